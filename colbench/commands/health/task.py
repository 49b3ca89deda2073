"""A health run as a rank task: every rank's share of the checks, then the report.

colbench.host starts the ranks (spawned, or under torchrun/Slurm/MPI) as for a sweep or
p2p; each runs the checks (colbench.commands.health.checks) and rank 0 keeps the samples
in ``health.samples.json`` for the report to judge (colbench.commands.health.report).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.bench.groups import SideGroup
from colbench.bench.timing import make_timer
from colbench.commands.health import checks
from colbench.commands.health.config import (
    FIXED_S,
    RUN_LABEL,
    SAMPLES_FILE,
    SAMPLES_VERSION,
    STEP_OVERHEAD_S,
    HealthConfig,
    estimate_s,
    steps,
)
from colbench.commands.p2p.task import Member
from colbench.errors import UsageError
from colbench.hardware import node as node_hardware
from colbench.host import watchdog as hang_watchdog
from colbench.host.child import device_name, meet_peers
from colbench.host.job import ConfiguredTask, Failure, Fault
from colbench.host.launchers import devices
from colbench.host.launchers.env import node_id, node_labels, node_name
from colbench.host.pace import Pace, counting
from colbench.results import tables
from colbench.results.rundir import RunDir

#: What every rank says if the others' plans differ from rank 0's ({ranks}: theirs).
HEALTH_DISAGREES = "health: rank(s) {ranks} run another level or colbench version than rank 0"


def plan_digest(cfg: HealthConfig) -> str:
    return hashlib.sha256(repr((cfg.level, __version__)).encode()).hexdigest()[:16]


def names_of(members: list[Member]) -> list[str]:
    """One name per rank: the launcher's (or the host's), each member's ``label``;
    ``name#k`` for the k-th of several nodes that give one name (containers that share
    a host name), as launchers.node_labels labels node ids, whose readable part (before
    the first ``|``) is here the member's name."""
    return node_labels([f"{m.label}|{m.node}" for m in members])


def placement(members: list[Member]) -> checks.Placement:
    order = list(dict.fromkeys(m.node for m in members))
    return checks.Placement(tuple(order.index(m.node) for m in members))


@dataclass(frozen=True)
class HealthTask(ConfiguredTask):
    cfg: HealthConfig
    worlds = 1
    label = RUN_LABEL

    def check(self, world_size: int, backend: str) -> list[str]:
        if world_size < 2:
            raise UsageError(
                f"health checks nodes against each other: it needs at least 2 ranks, this job "
                f"has {world_size} (a node alone, as in a Slurm prolog: --nprocs 2 or more)"
            )
        return []

    def run_rank(self, job: Any, rank: int, device: Any, in_flight: Any) -> None:
        cfg, level = self.cfg, self.cfg.plan
        side = SideGroup.create(
            job.world_size, hang_watchdog.process_group_timeout_s(cfg.timeout_s), in_flight
        )
        me = Member(
            plan_digest(cfg), rank, os.getpid(), node_id(), node_name(), device_name(device)
        )
        members = meet_peers(side, me, HEALTH_DISAGREES)
        names = names_of(members)
        place = placement(members)
        towards = job.store_host or os.environ.get("MASTER_ADDR")
        hardware = node_hardware.gather(side, [m.node for m in members], names, rank, towards)
        run_dir = Path(job.run_dir) if rank == 0 and job.run_dir is not None else None
        pace = in_flight.pace if run_dir is not None else None
        if run_dir is not None:
            self._write_plan(job, run_dir, members, names, place, hardware, pace)
        started = time.monotonic()
        in_flight.op, in_flight.dtype = "health", "uint8"
        timer = make_timer(device.type, False, side.barrier)
        on_step = counting(in_flight.step, pace)
        walker = checks.Walker(rank, side, timer, level, place, device, on_step)
        walker.fault = Fault(rank, os.environ.get("COLBENCH_FAULT"))
        groups = checks.node_groups(place)
        pair_groups = checks.PairGroups(place, job.backend)
        for walker.pass_index in range(level.passes):
            checks.node_alone(walker)
            checks.intra_node(walker, groups)
            checks.pairs(walker, job.backend)
            checks.pair_all_reduce(walker, pair_groups)
            checks.whole_world(walker, job.world_size)
        if pace is not None:
            pace.end()
        in_flight.step("destroying the pair groups")
        pair_groups.destroy()
        in_flight.step("gathering the samples")
        # Each rank's GPU by PCI address: the report finds it, and the NIC nearest it,
        # in the node's hardware facts (NVML's index need not be CUDA's).
        bus_id = devices.gpu_bus_id(device) if device.type == "cuda" else ""
        every = side.gather_objects((bus_id, walker.samples))
        if run_dir is not None:
            doc = {
                "version": SAMPLES_VERSION,
                "names": names,
                "node_of": list(place.node_of),
                "gpu_bus_ids": [bus or None for bus, _ in every],
                "samples": [asdict(s) for _, mine in every for s in mine],
            }
            tables.write_text(run_dir / SAMPLES_FILE, json.dumps(doc) + "\n")
            RunDir(run_dir).update_meta(
                status="complete", measured_s=round(time.monotonic() - started, 2)
            )

    def _write_plan(
        self, job: Any, run_dir: Path, members: list[Member], names: list[str],
        place: checks.Placement, hardware: dict[str, Any], pace: Pace | None,
    ) -> None:  # fmt: skip
        """meta.json as the checks begin, the level's time said, and the run's forecast
        (colbench.host.pace) from that estimate, which keeps the count of steps for the
        progress lines."""
        level = self.cfg.plan
        nodes, per_node = len(place.nodes), max(len(r) for r in place.nodes)
        expected_s = estimate_s(level, nodes, per_node)
        counts = steps(level, nodes, per_node)
        meta = job.first_meta(asdict(self.cfg), names, members)
        meta.update(
            kind="health",
            health_version=SAMPLES_VERSION,
            level=level.name,
            estimate_s=round(expected_s, 1),
            steps=counts,
            hardware=hardware,
        )
        RunDir(run_dir).write_meta(meta)
        print(
            f"colbench: health --level {level.name}: about {expected_s:.0f} s for {nodes} "
            f"node{'' if nodes == 1 else 's'} ({job.world_size} ranks)",
            file=sys.stderr,
            flush=True,
        )
        if pace is not None:
            total, stated_s = sum(counts.values()), time.time() - pace.started_at + expected_s
            pace.plan(total, total, "steps", STEP_OVERHEAD_S + level.step_s, FIXED_S, stated_s)

    def report(self, run_dir: Path) -> int:
        from colbench.commands.health.report import report

        return report(run_dir, self.cfg)

    def failed(self, run_dir: Path, failure: Failure) -> None:
        from colbench.commands.health.report import drain_failed

        drain_failed(run_dir, self.cfg, failure)
