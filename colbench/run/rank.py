"""A rank's life: join the world, agree on the plan with its peers, bench, leave."""

from __future__ import annotations

import os
import socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from colbench import __version__, launch
from colbench.launch import devices
from colbench.sweep import memory
from colbench.sweep.bench import RankBench, RunInfo
from colbench.config.model import SweepConfig
from colbench.errors import UsageError
from colbench.sweep.groups import Groups, SideGroup, members, split_label, split_world
from colbench.run.inflight import InFlight
from colbench.launch import emulation
from colbench.nccl.algo import CommFacts
from colbench.sweep.plan import Work, fit_to_memory, plan, plan_digest
from colbench.run import watchdog as hang_watchdog
from colbench.run.job import Peer, RankJob
from colbench.sweep.lead import lead_run
from colbench.run.startup import _device_for, init_process_group
from colbench.run.turns import Turns
from colbench.sweep.timing import Timer


class _Introduction(Protocol):
    @property
    def digest(self) -> object: ...
    @property
    def rank(self) -> int: ...


PeerT = TypeVar("PeerT", bound=_Introduction)


def rank_main(job: RankJob, rank: int, local_rank: int, in_flight: InFlight) -> None:
    """One rank's whole life: join the group, run the plan, leave."""
    import torch.distributed as dist

    device = _device_for(
        job.backend,
        local_rank,
        memory.local_world_size_from_env(job.world_size),
        job.cfg.launch.ranks_per_gpu,
    )
    in_flight.phase = "rendezvous"
    in_flight.store = init_process_group(job, rank, device, in_flight)
    try:
        in_flight.step("setup")
        body = run_plan if job.task is None else job.task.run_rank
        body(job, rank, device, in_flight)
    except BaseException as exc:
        # Stamp the failure now: tearing down would close connections and make the
        # peers fail too, and the first failure must stay recognisable as the first.
        in_flight.failed(exc)
        raise
    # Only a clean run tears down: after a failure the process exits at once, and a
    # teardown could block on peers that are gone.
    in_flight.phase = "shutdown"
    dist.destroy_process_group()


def run_plan(job: RankJob, rank: int, device: Any, in_flight: InFlight) -> None:
    """Side group, plan agreement with the peers, groups, memory fit, then the bench."""
    cfg = job.cfg
    # Every group gets torch's timeout a little later than colbench's own, so the
    # hang watchdog names the stuck ranks before torch aborts or one rank raises.
    group_timeout_s = hang_watchdog.process_group_timeout_s(cfg.launch.timeout_s)
    side = SideGroup.create(job.world_size, group_timeout_s)
    group_size = cfg.measure.ranks_per_group(job.world_size)
    layout = members(cfg.measure.group_size, cfg.measure.group_mod, job.world_size)
    first = layout[0] if layout else tuple(range(job.world_size))
    facts = nccl_facts(side, device, first) if job.backend == "nccl" else None
    work = plan(cfg, group_size, job.backend, facts=facts)
    me = _introduce(job, rank, device, work)
    # Ranks NCCL would refuse on one GPU were refused before the communicator started
    # (colbench.run.startup.prepare_nccl).
    peers = meet_peers(side, me)
    # Node labels, not bare host names: namespaces and containers share a host name.
    hosts = launch.node_labels([p.node for p in peers])
    subgroup = split_world(layout, rank, group_timeout_s) if layout else None
    groups = Groups(side, subgroup)
    info = RunInfo(
        run_id=job.run_id,
        backend=job.backend,
        device_name=me.device_name,
        world_size=job.world_size,
        nnodes=len({p.node for p in peers}),
        groups=subgroup.count if subgroup else 1,
        split=split_label(cfg.measure.group_size, cfg.measure.group_mod, job.world_size),
        variant=job.variant,
        ranks_per_gpu=cfg.launch.ranks_per_gpu if job.backend == "nccl" else 1,
        nccl_choices=job.nccl_choices,
    )
    timer = make_timer(device.type, cfg.measure.cuda_graph, side.barrier)
    worlds = job.turns.worlds if job.turns is not None else 1
    work, memory_notes = _fit_plan(cfg, work, device, job.world_size, side, worlds)
    turns = None
    if job.turns is not None:
        turns = Turns(job.turns, rank, job.results_dir or job.run_dir)
        per_repeat = sum(len(item.layouts) for item in work)
        turns.handshake(per_repeat * cfg.measure.repeat, per_repeat)
    if rank != 0 or job.run_dir is None:
        RankBench(cfg, info, rank, device, timer, None, groups, in_flight, turns).run(work)
    else:
        notes = (_measurement_warnings(cfg, job.backend), memory_notes)
        lead_run(job, info, peers, hosts, work, notes, (device, timer, groups, in_flight, turns))


def nccl_facts(side: SideGroup, device: Any, first_group: tuple[int, ...]) -> CommFacts:
    """What NCCL's choice of algorithm depends on, for the measured communicator (the
    first group of --group-size or --split), from every rank's view: NCCL's host identity (so
    emulated nodes count as nodes), its version, the GPU's compute capability. Every
    rank gathers the same facts, so every rank plans alike. What is not known here
    (NVSwitch, NVLS multicast, a CollNet plugin) stays None: NCCL's rules are then read
    both ways, and a row is refused only when no reading runs it."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    raw = torch.cuda.nccl.version()
    version = tuple(raw) if isinstance(raw, tuple) else None
    mine = (devices.nccl_host_identity(), 10 * major + minor, version)
    everyone = side.gather_objects(mine)
    every = [everyone[r] for r in first_group]
    per_node = Counter(host for host, _, _ in every)
    versions = {v for _, _, v in every if v is not None}
    return CommFacts(
        ranks=len(first_group),
        nodes=len(per_node),
        ranks_per_node=max(per_node.values()),
        version=versions.pop() if len(versions) == 1 else None,
        compute_capability=min(cc for _, cc, _ in every),
    )


def _introduce(job: RankJob, rank: int, device: Any, work: list[Work]) -> Peer:
    """This rank's :class:`Peer`: its plan's digest, where it runs, what it saw."""
    return Peer(
        digest=(plan_digest(job.cfg, work), __version__),
        rank=rank,
        host=socket.gethostname(),
        pid=os.getpid(),
        device_name=_device_name(device),
        node=launch.node_id(),
        # Proof, kept in meta.json, that every rank started with its variant's values.
        env_seen={k: os.environ.get(k) for k in job.variant_keys},
        gpu_uuid=devices.gpu_uuid(device) if device.type == "cuda" else "",
        gpu=gpu_record(device, job.cfg.launch.ranks_per_gpu),
    )


def gpu_record(device: Any, ranks_per_gpu: int) -> dict[str, Any]:
    """This rank's GPU for meta.json: index and bus id, and under --ranks-per-gpu the
    emulated node's NCCL variables as this rank saw them (they differ per rank)."""
    if device.type != "cuda":
        return {}
    record: dict[str, Any] = {"index": device.index, "bus_id": devices.gpu_bus_id(device)}
    if ranks_per_gpu > 1:
        record["nccl_env"] = {name: os.environ.get(name) for name in emulation.VARIABLES}
    return record


def exit_now(code: int) -> NoReturn:
    """End a rank that has finished cleanly, skipping the interpreter's teardown.

    Everything is on disk and the process group is gone by now, but torch's C++
    teardown at interpreter exit sometimes aborts a clean rank ("terminate called without
    an active exception", no Python frame left; about 1 run in 20 on a busy 2-core
    machine), and a SIGABRT would turn a complete run into a failed one.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def make_timer(device_type: str, cuda_graph: bool, barrier: Callable[[], None]) -> Timer:
    """Host clock on CPU; CUDA events on GPU, around a replayed graph with --cuda-graph.

    ``barrier`` aligns the ranks between graph capture and the timed replays (a side
    group's barrier: the measured group carries nothing but the measured op).
    """
    from colbench.sweep.timing import CudaEventTimer, CudaGraphTimer, HostTimer

    if device_type != "cuda":
        return HostTimer()
    return CudaGraphTimer(barrier) if cuda_graph else CudaEventTimer()


def _device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _agreed_budget(
    cfg: SweepConfig, device: Any, world_size: int, side: SideGroup, worlds: int = 1
) -> int:
    """Per-rank buffer budget, the minimum over all ranks so every plan is the same.

    ``worlds``: the interleaved worlds alive at once, whose buffers share the memory.
    """
    import torch

    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    if free is not None:
        # --ranks-per-gpu: the GPU's free memory is every sharing rank's to split.
        free //= cfg.launch.ranks_per_gpu
    local = memory.rank_budget_bytes(
        memory.local_world_size_from_env(world_size), cfg.measure.memory_limit_bytes, free
    )
    return side.min_int(local // worlds)


#: What a sweep's rank says when its peers' plans differ from rank 0's.
SWEEP_DISAGREES = (
    "ranks disagree on the sweep: rank(s) {ranks} planned different collectives than rank 0 "
    "(different arguments or colbench versions?)"
)


def meet_peers(side: SideGroup, me: PeerT, disagreement: str = SWEEP_DISAGREES) -> list[PeerT]:
    """Gather every rank's introduction (a :class:`Peer`, or another task's with a
    ``digest`` and a ``rank``); stop with ``disagreement`` (naming the ``{ranks}``) if
    their digests differ from rank 0's.

    This is the first collective after the side group exists, so ranks started with
    different plans are told so before any of them waits in a collective the others
    will never call.
    """
    peers: list[PeerT] = side.gather_objects(me)
    differing = [p.rank for p in peers if p.digest != peers[0].digest]
    if differing:
        raise UsageError(disagreement.format(ranks=", ".join(map(str, differing))))
    return peers


def _measurement_warnings(cfg: SweepConfig, backend: str) -> list[str]:
    warnings = []
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        warnings.append(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL is set: it checks every collective and slows them "
            "several-fold; unset it for real measurements"
        )
    if cfg.launch.debug and backend == "nccl":
        warnings.append(
            "--debug: torch's NCCL flight recorder records every collective, which adds host "
            "time to each call; measure without --debug for numbers to compare"
        )
    return warnings


def _fit_plan(
    cfg: SweepConfig,
    work: list[Work],
    device: Any,
    world_size: int,
    side: SideGroup,
    worlds: int = 1,
) -> tuple[list[Work], list[str]]:
    if cfg.measure.memory_check == "off":
        return work, []
    budget = _agreed_budget(cfg, device, world_size, side, worlds)
    fitted, notes = fit_to_memory(work, budget, cfg.measure.rotate)
    if notes and cfg.measure.memory_check == "refuse":
        raise UsageError(f"not enough memory: {notes[0]} (--memory-check skip runs what fits)")
    return fitted, [f"{note}; skipped" for note in notes]
