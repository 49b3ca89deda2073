"""The sweep as a task of the run host (colbench.host): how its ranks start, what each rank
does once its process group exists, and what is left when they are done.

In every rank: the side group, NCCL's facts, the plan agreed by digest with the peers,
the --group-size subgroups, the memory fit, then the bench (rank 0 through its
reporters, colbench.commands.sweep.lead).
"""

from __future__ import annotations

import os
import socket
import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.bench.groups import (
    Engine,
    Groups,
    Refused,
    SideGroup,
    TorchEngine,
    knobbed,
    members,
    split_label,
    split_world,
    torch_nccl_version,
)
from colbench.bench.load import make_load
from colbench.bench.loop import BenchContext, RankBench, RowSink
from colbench.bench.ops import REGISTRY
from colbench.bench.plan import RunInfo, Work, count_units, fit_plan, nccl_facts, plan, plan_digest
from colbench.bench.timing import make_timer
from colbench.commands.sweep.lead import Met, lead_sink, measurement_warnings
from colbench.commands.sweep.setup import measure_setups, setup_rows
from colbench.config.contend import LoadSpec
from colbench.config.model import SweepConfig
from colbench.config.validate import validate_for_world
from colbench.direct.engine import DIRECT, DirectEngine, group_ranks
from colbench.errors import ExitCode, UsageError
from colbench.hardware import node as node_hardware
from colbench.host import watchdog as hang_watchdog
from colbench.host.child import device_name, gpu_record, meet_peers
from colbench.host.job import ConfiguredTask, InFlight, Peer, RankJob
from colbench.host.launchers import devices
from colbench.host.launchers.env import node_id, node_labels
from colbench.host.supervise import report_done
from colbench.host.turns import Turns
from colbench.output import plural
from colbench.results.init_rows import INIT
from colbench.results.rundir import RunDir

#: What a sweep's rank says when its peers' plans differ from rank 0's.
SWEEP_DISAGREES = (
    "ranks disagree on the sweep: rank(s) {ranks} planned different collectives than rank 0 "
    "(different arguments or colbench versions?)"
)

#: NCCL's choice per call as a probe world logged it (colbench.commands.sweep.probe): (op, bytes
#: per rank) -> (algorithm, protocol).
Choices = dict[tuple[str, int], tuple[str, str]]

#: Every rank's :class:`Peer`, its node's label, and each node's hardware by label: rank 0's
#: :class:`Met` (the other ranks need no more than the run's facts drawn from them, and
#: make nothing of colbench.commands.sweep.lead's).
Introductions = tuple[list[Peer], list[str], dict[str, Any]]


@dataclass(frozen=True)
class SweepTask(ConfiguredTask):
    """A sweep's ranks: ``cfg`` says what they measure; ``nccl_choices`` what NCCL chose
    per call (the rows carry it; empty: not recorded); ``quiet``: a probe world's, which
    reports nothing of its own."""

    cfg: SweepConfig
    nccl_choices: Choices = field(default_factory=dict)
    worlds: int = 1
    quiet: bool = False
    #: The --contend load this world runs beside every timed batch (colbench.bench.load);
    #: None in the ``contend=none`` world and without --contend.
    load: LoadSpec | None = None
    #: The run's one task, reported only under an external launcher (spawned worlds get
    #: tasks of their own, and the parent places the run once they are all done): its
    #: report places the run against the published results (colbench.commands.references).
    whole_run: bool = False
    #: Rank 0 draws the progress bar on a terminal (colbench.commands.sweep.lead).
    live_bar = True
    #: ``--engine torch,nccl``: this world's engine; None: the config's one.
    engine: str | None = None
    #: Why NCCL, in this variant's probe world, did not do what a knob of the variant asks
    #: (colbench.nccl.knobs.evidence): every row then says unsupported; None: nothing refused.
    refused: str | None = None

    @property
    def engine_name(self) -> str:
        return self.engine or self.cfg.measure.engines[0]

    @property
    def direct_nccl(self) -> bool:
        """NCCL is called directly: torch's process group is then gloo, and this world
        makes no torch NCCL communicator (colbench.host.child)."""
        return self.engine_name == DIRECT

    @property
    def label(self) -> str:
        ops = self.cfg.measure.ops
        if set(ops) == {op.name for op in REGISTRY}:
            return "all"
        label = "-".join(ops)
        return label if len(label) <= 48 else label[:45] + "etc"

    def check(self, world_size: int, backend: str) -> list[str]:
        """Validation that needs the world size; refuses a sweep that would measure nothing."""
        notes = validate_for_world(self.cfg, world_size, backend)
        n = self.cfg.measure.ranks_per_group(world_size)
        if count_units(plan(self.cfg, n, backend)) == 0:
            raise UsageError(
                f"nothing to run: at {n} ranks every size leaves less than one 16-byte "
                "chunk per rank; use larger sizes"
            )
        return notes

    def run_rank(self, job: RankJob, rank: int, device: Any, in_flight: Any) -> None:
        if self.quiet or (job.turns is not None and job.turns.world != 0):
            # A probe world's time, or another interleaved world's, is not the run's to state.
            in_flight.pace = None
        _run_plan(self, job, rank, device, in_flight)

    def report(self, run_dir: Path) -> int:
        if self.quiet:
            return int(ExitCode.OK)
        if self.cfg.measure.init_only:
            report_setups(run_dir, self.cfg.output.table)
        code = max(report_done(run_dir), min_bw_verdict(run_dir))
        if self.whole_run and code in (ExitCode.OK, ExitCode.DATA_ERROR):
            from colbench.commands.references.place import record_after_run

            record_after_run(run_dir)
        return code


def report_setups(run_dir: Path, table: bool) -> None:
    """--init-only: the set-up rows on stdout (with the table), their count on stderr."""
    from colbench.commands.sweep.setup import table_lines
    from colbench.results.init_rows import load_init

    files = RunDir(run_dir)
    frame = load_init(files.path)
    if table:
        print("\n".join(table_lines(frame)), flush=True)
    print(
        f"colbench: {plural(len(frame), 'communicator set-up')} in {files.table_path(INIT)}",
        file=sys.stderr,
    )


def min_bw_verdict(run_dir: Path) -> int:
    """NCCL_TESTS_MIN_BW as nccl-tests honours it (colbench.config.min_bw): exit 1 (as
    wrong results: nccl-tests fails both alike) when the run's average bus bandwidth, the
    mean over its rows, is below 0.9x the value; nothing when it is unset."""
    from colbench.config.min_bw import MIN_BW_VARIABLE, from_environment

    floor = from_environment() if MIN_BW_VARIABLE in os.environ else None
    average = None if floor is None else RunDir(run_dir).read_meta().get("busbw_avg_gbps")
    if floor is None or average is None:
        return int(ExitCode.OK)
    okay = floor.okay(average)
    print(
        f"colbench: average bus bandwidth {average:.4g} GB/s, floor {floor.floor_gbps:.4g} GB/s "
        f"({floor.describe()}): {'OK' if okay else 'FAILED'}",
        file=sys.stderr,
    )
    return int(ExitCode.OK if okay else ExitCode.DATA_ERROR)


def _run_plan(task: SweepTask, job: RankJob, rank: int, device: Any, in_flight: InFlight) -> None:
    """Side group, plan agreement with the peers, groups, memory fit, then the bench: the
    same loop in every rank, rank 0's rows fed to its reporters (:func:`lead_sink`)."""
    cfg = task.cfg
    # Every group gets torch's timeout a little later than colbench's own, so the
    # hang watchdog names the stuck ranks before torch aborts or one rank raises.
    group_timeout_s = hang_watchdog.process_group_timeout_s(cfg.launch.timeout_s)
    side = SideGroup.create(job.world_size, group_timeout_s, in_flight)
    layout = members(cfg.measure.group_size, cfg.measure.group_mod, job.world_size)
    first = layout[0] if layout else tuple(range(job.world_size))
    work, me, met = _agree(task, job, rank, device, side, first)
    subgroup = split_world(layout, rank, group_timeout_s) if layout else None
    setups = None
    if cfg.measure.init_only:
        # Communicator set-up is what is measured: no collective, no engine of the run's.
        in_flight.step(f"timing communicator set-up ({task.engine_name})")
        setups = measure_setups(
            task.engine_name, side, rank, job.world_size, device, cfg.measure.repeat
        )
        work = []
    # The direct engine's communicator starts here, where torch's started in an NCCL
    # world: before the memory fit (which then sees what NCCL took) and before any turn of
    # an interleaved run (a start-up inside another world's timed batch would be timed).
    engine, stream = (
        (TorchEngine(), None)
        if setups is not None
        else _engine(task, side, rank, job.world_size, subgroup, device, in_flight)
    )
    if task.refused is not None:
        engine = Refused(engine, task.refused)
    try:
        info = _run_info(task, job, me, met, subgroup, first)
        worlds = job.turns.worlds if job.turns is not None else 1
        work, memory_notes = fit_plan(cfg, work, device, job.world_size, side, worlds)
        groups = Groups(side, subgroup)
        context = _bench_context(
            task, job, rank, device, info, groups, engine, stream, in_flight, work
        )
        with _sink(job, rank, context, met, work, memory_notes, setups) as sink:
            RankBench(context, sink).run(work)
    except BaseException:
        # ncclCommDestroy waits for the node's other ranks; a failing rank must not.
        engine.close(abort=True)
        raise
    engine.close()


def _agree(
    task: SweepTask, job: RankJob, rank: int, device: Any, side: SideGroup, first: tuple[int, ...]
) -> tuple[list[Work], Peer, Introductions]:
    """This rank's plan, agreed with its peers by digest, and who they are: (the plan,
    this rank's introduction, every rank's with its node's hardware)."""
    cfg = task.cfg
    facts = nccl_facts(side, device, first) if job.backend == "nccl" else None
    work = plan(cfg, cfg.measure.ranks_per_group(job.world_size), job.backend, facts=facts)
    me = _introduce(cfg, job, rank, device, work)
    # Ranks NCCL would refuse on one GPU were refused before the communicator started
    # (colbench.host.launchers.devices.prepare_nccl).
    peers = meet_peers(side, me, SWEEP_DISAGREES)
    # Node labels, not bare host names: namespaces and containers share a host name.
    nodes = [p.node for p in peers]
    hosts = node_labels(nodes)
    towards = job.store_host or os.environ.get("MASTER_ADDR")
    # Each node's first rank reads its hardware; the others take part in the gather only
    # (nothing of colbench.hardware.node's runs in them).
    mine = node_hardware.read_node(towards=towards) if nodes.index(me.node) == rank else None
    hardware = {hosts[r]: f for r, f in enumerate(side.gather_objects(mine)) if f is not None}
    return work, me, (peers, hosts, hardware)


def _run_info(
    task: SweepTask,
    job: RankJob,
    me: Peer,
    met: Introductions,
    subgroup: Any,
    first: tuple[int, ...],
) -> RunInfo:
    """The run's facts every row carries, the bandwidth ceiling of the first group among
    them (rank 0's alone: only its rows are kept)."""
    cfg = task.cfg
    emulated = job.backend == "nccl" and cfg.launch.ranks_per_gpu > 1
    peers, hosts, hardware = met
    bus_ids = [p.gpu.get("bus_id") for p in peers]
    ceiling_gbps, ceiling_source, sharing = None, "", 1
    if me.rank == 0:
        ceiling_gbps, ceiling_source, sharing = node_hardware.group_ceiling(
            hardware, job.backend, hosts, bus_ids, first, cfg.output.ceiling_gbps, emulated
        )
    return RunInfo(
        run_id=job.run_id,
        backend=job.backend,
        device_name=me.device_name,
        world_size=job.world_size,
        nnodes=len({p.node for p in peers}),
        groups=subgroup.count if subgroup else 1,
        split=split_label(cfg.measure.group_size, cfg.measure.group_mod, job.world_size),
        variant=job.variant,
        ranks_per_gpu=cfg.launch.ranks_per_gpu if job.backend == "nccl" else 1,
        nccl_choices=task.nccl_choices,
        ceiling_gbps=ceiling_gbps,
        ceiling_source=ceiling_source,
        ceiling_sharing=sharing,
        load=task.load.label if task.load is not None else "",
        engine=task.engine_name,
    )


def _bench_context(
    task: SweepTask,
    job: RankJob,
    rank: int,
    device: Any,
    info: RunInfo,
    groups: Groups,
    engine: Engine,
    stream: Any,
    in_flight: InFlight,
    work: list[Work],
) -> BenchContext:
    """What the loop measures with: the --contend load started, an interleaved run's
    turns agreed, the timer of the device."""
    cfg = task.cfg
    load = None
    if task.load is not None:
        in_flight.step("starting the --contend load")
        group_timeout_s = hang_watchdog.process_group_timeout_s(cfg.launch.timeout_s)
        load = make_load(task.load, cfg, device, rank, job.world_size, job.backend, group_timeout_s)
    turns = None
    if job.turns is not None:
        turns = Turns(job.turns, rank, job.results_dir or job.run_dir)
        per_repeat = sum(len(item.layouts) for item in work)
        turns.handshake(per_repeat * cfg.measure.repeat, per_repeat)
    return BenchContext(
        cfg=cfg,
        info=info,
        rank=rank,
        device=device,
        timer=make_timer(device.type, cfg.measure.cuda_graph, groups.side.barrier, stream),
        groups=groups,
        in_flight=in_flight,
        turns=turns,
        load=load,
        engine=engine,
    )


def _sink(
    job: RankJob,
    rank: int,
    context: BenchContext,
    met: Introductions,
    work: list[Work],
    memory_notes: list[str],
    setups: Any,
) -> AbstractContextManager[RowSink | None]:
    """Rank 0's reporters (colbench.commands.sweep.lead); None in the other ranks, which
    measure but report nothing. --init-only's set-up rows are written first."""
    if rank != 0 or job.run_dir is None:
        return nullcontext()
    if setups is not None:
        with RunDir(job.run_dir).writer(INIT) as writer:
            writer.write_all(setup_rows(setups, context.info))
    warned = (measurement_warnings(context.cfg, job.backend), memory_notes)
    return lead_sink(job, context, Met(*met), work, warned)


def _engine(
    task: SweepTask,
    side: SideGroup,
    rank: int,
    world_size: int,
    subgroup: Any,
    device: Any,
    in_flight: InFlight,
) -> tuple[Engine, Any]:
    """This world's engine, and the CUDA stream its calls launch on (None: torch's own).

    The direct engine launches on a stream of its own, made current for the whole run,
    so the timers' CUDA events are recorded on the stream NCCL runs on and a CUDA graph
    captures on it (colbench.bench.timing)."""
    register = task.cfg.measure.register
    if not task.direct_nccl:
        if register == "none" and device.type != "cuda":
            return TorchEngine(), None  # no NCCL under a CPU rank: no knob to refuse
        return knobbed(TorchEngine(), register, torch_nccl_version(device)), None
    import torch

    in_flight.step("starting NCCL (--engine nccl)")
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    if stream is not None:
        torch.cuda.set_stream(stream)
    handle = 0 if stream is None else int(stream.cuda_stream)
    ranks = group_ranks(subgroup, world_size)
    engine = DirectEngine.create(side, rank, ranks, handle, register=register, device=device)
    return knobbed(engine, "none", engine.comm.version_tuple), stream


def _introduce(cfg: SweepConfig, job: RankJob, rank: int, device: Any, work: list[Work]) -> Peer:
    """This rank's :class:`Peer`: its plan's digest, where it runs, what it saw."""
    return Peer(
        digest=(plan_digest(cfg, work), __version__),
        rank=rank,
        host=socket.gethostname(),
        pid=os.getpid(),
        device_name=device_name(device),
        node=node_id(),
        # Proof, kept in meta.json, that every rank started with its variant's values.
        env_seen={k: os.environ.get(k) for k in job.variant_keys},
        gpu_uuid=devices.gpu_uuid(device) if device.type == "cuda" else "",
        gpu=gpu_record(device, cfg.launch.ranks_per_gpu),
    )
