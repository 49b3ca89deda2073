"""A p2p run as a rank task: what every rank does once its process group exists.

colbench.host starts the ranks (spawned, or under torchrun/Slurm/MPI) exactly as for a
sweep, then hands each rank to :meth:`P2PTask.run_rank` instead of the sweep's loop;
when the ranks are done, :meth:`P2PTask.report` prints the matrix and the verdict.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.bench.groups import SideGroup
from colbench.bench.rowmaker import combine_times
from colbench.bench.timing import make_timer
from colbench.commands.gate.checks import DEFAULT_ALPHA
from colbench.commands.p2p.budget import Matrix, Plan, measure, passes_floor
from colbench.commands.p2p.config import RUN_LABEL, P2PConfig
from colbench.commands.p2p.links import MIN_RANKS, passes_needed
from colbench.commands.p2p.measure import Pass, Stepper, Times, Transport
from colbench.commands.p2p.results import P2P, P2PRow
from colbench.commands.p2p.schedule import Selection, pair_steps, select
from colbench.errors import UsageError
from colbench.host import watchdog as hang_watchdog
from colbench.host.child import device_name, meet_peers
from colbench.host.job import ConfiguredTask
from colbench.host.launchers.detect import detect
from colbench.host.launchers.env import node_id, node_labels
from colbench.results.rundir import RunDir

#: Tests (and clusters whose host names say little) name each rank's node with this.
NODE_LABEL_ENV = "COLBENCH_NODE_LABEL"


P2P_DISAGREES = (
    "ranks disagree on the p2p run: rank(s) {ranks} were started with other options than "
    "rank 0 (or another colbench version)"
)


@dataclass(frozen=True)
class Member:
    """What each rank tells the others before measuring."""

    digest: str
    rank: int
    pid: int
    node: str
    label: str
    device_name: str


@dataclass(frozen=True)
class World:
    """Who is where: node label per rank, and the ranks that take part."""

    members: list[Member]
    labels: list[str]
    selection: Selection


def plan_digest(cfg: P2PConfig) -> str:
    """What every rank must agree on before the first message."""
    keys: tuple[object, ...] = (cfg.size_bytes, cfg.latency_bytes, cfg.bidirectional, cfg.serial)
    keys += (cfg.per_node, cfg.rail, cfg.iters, cfg.warmup, cfg.repeat, cfg.max_time_s)
    keys += (__version__,)
    return hashlib.sha256(repr(keys).encode()).hexdigest()[:16]


def pair_row(times_us: Sequence[float], round_trips_us: Sequence[float], **cells: Any) -> P2PRow:
    """One pair's row: the sender's message times (timed as a sweep's are, by one rank),
    its ping-pong round trips halved into latencies (osu_latency), and the other cells."""
    timing = combine_times([times_us], "rank0")
    trip = combine_times([round_trips_us], "rank0")
    return P2PRow(
        time_us=timing["time_us"],
        time_min_us=timing["time_min_us"],
        time_p50_us=timing["time_p50_us"],
        time_p99_us=timing["time_p99_us"],
        time_max_us=timing["time_max_us"],
        bw_gbps=cells["size_bytes"] / timing["time_us"] / 1e3,
        latency_us=trip["time_us"] / 2,
        latency_p50_us=trip["time_p50_us"] / 2,
        latency_p99_us=trip["time_p99_us"] / 2,
        **cells,
    )


@dataclass(frozen=True)
class P2PTask(ConfiguredTask):
    """p2p's ranks, as the run host (colbench.host) starts them."""

    cfg: P2PConfig
    worlds = 1
    label = RUN_LABEL

    def check(self, world_size: int, backend: str) -> list[str]:
        """Pairs need two ranks; naming a slow link needs more; --per-node and --rail need
        nodes, which ranks spawned here never have. (Launched ranks learn their nodes only
        when they meet: their refusal comes then, in the run directory rank 0 made.)"""
        if world_size < 2:
            raise UsageError(
                f"p2p measures pairs of ranks: it needs at least 2, this job has {world_size}"
            )
        if self.cfg.fail_below_pct is not None and world_size < MIN_RANKS:
            raise UsageError(
                f"--fail-below needs at least {MIN_RANKS} ranks to tell a slow link from the "
                f"others; this job has {world_size}"
            )
        if detect() is None:
            # Ranks spawned here share this node (and its COLBENCH_NODE_LABEL), so what the
            # ranks would refuse once they meet is refused now, before a run directory.
            selection = select(["here"] * world_size, self.cfg.per_node, self.cfg.rail)
            if self.cfg.fail_below_pct is not None:
                self._check_fail_below(selection)
        return []

    def run_rank(self, job: Any, rank: int, device: Any, in_flight: Any) -> None:
        """This rank's share of the matrix; rank 0 also writes meta.json and p2p.csv."""
        cfg = self.cfg
        side = SideGroup.create(
            job.world_size, hang_watchdog.process_group_timeout_s(cfg.timeout_s), in_flight
        )
        world = self._meet(side, rank, device_name(device))
        run_dir = Path(job.run_dir) if rank == 0 and job.run_dir is not None else None
        if run_dir is not None:
            RunDir(run_dir).write_meta(self._meta(job, world))
        started = time.time()
        in_flight.op, in_flight.dtype = "p2p", "uint8"
        timer, pace = make_timer(device.type, False, side.barrier), in_flight.pace
        on_weight = pace.step if pace is not None else lambda _: None
        stepper = Stepper(rank, side, timer, cfg.iters, cfg.warmup, in_flight.step, on_weight)
        link = Transport(job.backend, window=cfg.window_for(job.backend))
        matrix = Matrix(
            cfg, stepper, link, side, world.selection, device, in_flight,
            job.started_at or started,
        )  # fmt: skip
        matrix.allocate(cfg.size_bytes)
        floor = passes_floor(world.selection, world.labels, cfg.fail_below_pct is not None)
        writer = RunDir(run_dir).writer(P2P) if run_dir is not None else None
        written = 0

        def keep(index: int, plan: Plan, one: Pass) -> None:
            # One gather a pass: a run stopped part way keeps every pass it finished.
            nonlocal written
            in_flight.step(f"gathering pass {index + 1}")
            gathered: list[Pass] = side.gather_objects(one)
            if writer is not None:
                rows = self._rows(job, world, gathered, plan, index)
                writer.write_all(rows)
                written += len(rows)

        try:
            # Every pass measures the whole matrix once (sweep --repeat's interleaving): a
            # pair that was slow only while the host was busy is slow in one pass, not all.
            planned = measure(matrix, floor, run_dir is not None, keep)
        finally:
            if writer is not None:
                writer.close()
        if run_dir is not None:
            RunDir(run_dir).update_meta(
                status="complete",
                rows=written,
                duration_s=round(time.time() - started, 3),
                plan=planned.record(),
            )

    def _meet(self, side: SideGroup, rank: int, device_name: str) -> World:
        me = Member(
            digest=plan_digest(self.cfg),
            rank=rank,
            pid=os.getpid(),
            node=node_id(),
            label=os.environ.get(NODE_LABEL_ENV, "").strip(),
            device_name=device_name,
        )
        members = meet_peers(side, me, P2P_DISAGREES)
        readable = node_labels([m.node for m in members])
        labels = [m.label or name for m, name in zip(members, readable, strict=True)]
        # An explicit label is the node: it also decides --per-node and --rail.
        keys = [m.label or m.node for m in members]
        selection = select(keys, self.cfg.per_node, self.cfg.rail)
        if self.cfg.fail_below_pct is not None:
            self._check_fail_below(selection)
        return World(members, labels, selection)

    def _check_fail_below(self, selection: Selection) -> None:
        """Refuse, before measuring, a health check that could never fail."""
        if len(selection.ranks) < MIN_RANKS:
            raise UsageError(
                f"--fail-below needs at least {MIN_RANKS} ranks taking part (nodes with "
                f"--per-node) to tell a slow link from the others; this run has "
                f"{len(selection.ranks)}"
            )
        n_links = len({frozenset(pair) for step in pair_steps(selection) for pair in step})
        need = passes_needed(n_links, n_links, DEFAULT_ALPHA)
        if self.cfg.repeat < need:
            raise UsageError(
                f"--fail-below over {n_links} links needs --repeat {need} or more: with "
                f"{self.cfg.repeat} pass(es) no link can be shown below the others beyond "
                "their spread"
            )

    def _meta(self, job: Any, world: World) -> dict[str, Any]:
        meta = job.first_meta(asdict(self.cfg), world.labels, world.members)
        meta.update(
            kind="p2p",
            bandwidth_window=self.cfg.window_for(job.backend),
            p2p_schema_version=P2P.version,
            ranks_taking_part=list(world.selection.ranks),
        )
        return meta

    def _rows(
        self, job: Any, world: World, gathered: list[Pass], ran: Plan, repeat: int
    ) -> list[P2PRow]:
        """Pass ``repeat``'s rows (``gathered``: every rank's times of it), as ``ran``
        measured them (the plan after any cut); the device is rank 0's, which writes them."""
        cfg = self.cfg
        common = {
            "run_id": job.run_id,
            "backend": job.backend,
            "device": world.members[0].device_name,
            "world_size": job.world_size,
            "nnodes": len(set(world.labels)),
            "mode": "bi" if cfg.bidirectional else "uni",
            "size_bytes": ran.size_bytes,
            "warmup": ran.warmup,
            "iters": ran.iters,
            "latency_bytes": cfg.latency_bytes,
        }
        bw: Times = {k: v for one in gathered for k, v in one[0].items()}
        lat: Times = {k: v for one in gathered for k, v in one[1].items()}
        rows = []
        for src, dst in sorted(bw):
            where = {"src_node": world.labels[src], "dst_node": world.labels[dst]}
            cells = {"src_rank": src, "dst_rank": dst, "repeat": repeat, **where, **common}
            rows.append(pair_row(bw[(src, dst)], lat[(src, dst)], **cells))
        return rows

    def report(self, run_dir: Path) -> int:
        """After the ranks: the matrix, the heatmap, and the verdict printed last."""
        from colbench.commands.p2p.report import report

        return report(run_dir, self.cfg)
