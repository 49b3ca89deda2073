"""What every rank runs, in order: the config expanded into work, agreed by all.

Ranks that disagree on the plan would call different collectives and hang, so the
plan is a pure function of the config and the world, its digest is compared before
anything runs, and the memory limit that trims it is the minimum over ranks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.bench import memory
from colbench.bench.groups import SideGroup
from colbench.bench.memory import buffer_bytes
from colbench.bench.ops.base import Collective, Layout
from colbench.bench.ops.data import DTYPES, NO_REDOP, redop_supported
from colbench.config.model import EVERY_ROOT, SweepConfig
from colbench.errors import UsageError
from colbench.host.launchers import devices
from colbench.host.launchers.env import local_world_size_from_env
from colbench.nccl.algo import CommFacts, predict
from colbench.nccl.names import torch_version


@dataclass(frozen=True)
class Work:
    """One (op, dtype, redop) combination and the sizes it runs."""

    coll: Collective
    dtype: str
    redop: str
    requested: tuple[int, ...]
    layouts: tuple[Layout, ...]
    placements: tuple[str, ...]
    skipped_sizes: tuple[int, ...] = field(default=())
    #: Why the backend refuses this work under the run's settings (rows get status
    #: ``unsupported`` and no collective is called); empty when it runs.
    unsupported: str = ""
    #: The root of a rooted collective (the group's rank); -1 for the others.
    root: int = -1


def refused_by_backend(
    coll: Collective,
    dtype: str,
    redop: str,
    backend: str,
    env: Mapping[str, str],
    facts: CommFacts | None,
) -> str:
    """Why NCCL would refuse this call under this environment ("" if it would run).
    ``facts``: the measured communicator as the ranks found it at start-up (its ranks,
    NCCL's nodes, version...); None (the parent, before any rank exists) judges nothing."""
    if backend != "nccl" or facts is None or not coll.nccl_function:
        return ""
    call_dtype, call_redop = coll.nccl_call_type or (dtype, redop)
    prediction = predict(facts, coll.nccl_function, call_dtype, call_redop, env)
    return prediction.reason or ""


def plan(
    cfg: SweepConfig,
    world_size: int,
    backend: str,
    env: Mapping[str, str] | None = None,
    facts: CommFacts | None = None,
) -> list[Work]:
    """Expand the config into the work this world runs, in table order. ``env`` (default:
    this process's) holds NCCL's settings, ``facts`` what NCCL's rules depend on."""
    env = os.environ if env is None else env
    out: list[Work] = []
    for coll in cfg.collectives():
        placements = cfg.placements_for(coll)
        if coll.unsupported(world_size, backend) or not placements:
            continue
        if cfg.measure.cuda_graph and not coll.graph_capturable:
            continue
        # A size-less op (barrier) runs once, at size 0, in the first dtype.
        sizes = cfg.measure.sizes_bytes if coll.sized else (0,)
        redops = cfg.measure.redops if coll.uses_redop else (NO_REDOP,)
        for dtype_name in cfg.measure.dtypes if coll.sized else cfg.measure.dtypes[:1]:
            dtype = DTYPES[dtype_name]
            for redop in redops:
                if redop != NO_REDOP and redop_supported(redop, dtype):
                    continue
                refused = refused_by_backend(coll, dtype_name, redop, backend, env, facts)
                pairs = [(s, coll.layout(s, dtype.elem_bytes, world_size)) for s in sizes]
                kept = [(s, lay) for s, lay in pairs if lay.count > 0 or not coll.sized]
                skipped = tuple(s for s, lay in pairs if lay.count == 0 and coll.sized)
                # Kept even with no size left, so the skipped sizes are still reported.
                out.extend(
                    Work(
                        coll,
                        dtype_name,
                        redop,
                        tuple(s for s, _ in kept),
                        tuple(lay for _, lay in kept),
                        placements,
                        skipped,
                        refused,
                        root,
                    )
                    for root in roots(coll, cfg, world_size)
                )
    return out


def roots(coll: Collective, cfg: SweepConfig, world_size: int) -> range:
    """The roots ``coll`` runs with: --root, or each rank in turn under --root -1 (as
    nccl-tests' ``-r -1``, every size of one root before the next); -1 when it has none."""
    if not coll.rooted:
        return range(-1, 0)
    if cfg.measure.root == EVERY_ROOT:
        return range(world_size)
    return range(cfg.measure.root, cfg.measure.root + 1)


def plan_notes(item: Work, engine: Any) -> list[str]:
    """Rank 0's remarks on one line of the plan before it is measured: sizes skipped,
    an op the backend or the ``engine`` (colbench.bench.groups.Engine) cannot run, a
    traffic matrix whose busiest rank is far from the mean."""
    notes = []
    if item.skipped_sizes:
        notes.append(
            f"{item.coll.name} {item.dtype}: {len(item.skipped_sizes)} size(s) up "
            f"to {max(item.skipped_sizes)} B leave no whole 16-byte chunk per rank; "
            "skipped"
        )
    if item.unsupported:
        notes.append(f"{item.coll.name} {item.dtype}: unsupported: {item.unsupported}")
    elif (refused := engine.unsupported(item.coll)) is not None:
        notes.append(
            f"{item.coll.name} {item.dtype}: unsupported on --engine {engine.name}: {refused}"
        )
    last = item.layouts[-1] if item.layouts else None
    if last is not None and {last.send_imbalance, last.recv_imbalance} - {None, 1.0}:
        # size_bytes is the busiest rank's: say how far from the mean it is.
        notes.append(
            f"{item.coll.name} {item.coll.splits_label} {item.dtype}: at {last.size_bytes} B "
            f"the busiest rank sends {last.send_imbalance or 0:.2f}x and receives "
            f"{last.recv_imbalance or 0:.2f}x the mean rank's {last.mean_bytes:.0f} B"
        )
    return notes


def count_units(work: Sequence[Work]) -> int:
    """Measured rows the plan will produce (for the progress bar)."""
    return sum(len(w.layouts) * len(w.placements) for w in work)


#: A call's fixed cost, as bytes' worth of time, for the forecast of a sweep's time
#: (colbench.host.pace): a size's time grows with its bytes, and small sizes still cost
#: a launch, a barrier and a wake-up each (about 0.1 ms at a few GB/s).
CALL_BYTES = 256 * 1024


def row_weight(size_bytes: int, budgeted: bool) -> float:
    """A row's share of the sweep's time: under --time-budget every size fills the same
    time; else its bytes and a call's fixed cost, at the same iterations for every size."""
    return 1.0 if budgeted else float(size_bytes + CALL_BYTES)


def weight_total(work: Sequence[Work], budgeted: bool) -> float:
    """The weight of one repeat of the plan's rows (:func:`row_weight`)."""
    return sum(
        len(w.placements) * row_weight(layout.size_bytes, budgeted)
        for w in work
        for layout in w.layouts
    )


def fit_to_memory(
    work: Sequence[Work], budget_bytes: int, sets: int = 1
) -> tuple[list[Work], list[str]]:
    """Drop the sizes whose buffers would not fit in ``budget_bytes`` per rank: the same
    budget in every rank (the minimum over ranks), so that the plans stay identical."""
    kept: list[Work] = []
    notes: list[str] = []
    for item in work:
        if not item.layouts:
            kept.append(item)
            continue
        elem = DTYPES[item.dtype].elem_bytes
        needs = [buffer_bytes(item.coll, lay, elem, item.placements, sets) for lay in item.layouts]
        n_fit = sum(need <= budget_bytes for need in needs)
        if n_fit < len(needs):
            notes.append(
                f"{item.coll.name} {item.dtype}: sizes from {item.requested[n_fit]} B need "
                f"{needs[n_fit] / 2**20:.0f} MiB per rank, more than the "
                f"{budget_bytes / 2**20:.0f} MiB available"
            )
        if n_fit:
            kept.append(
                dataclasses.replace(
                    item, requested=item.requested[:n_fit], layouts=item.layouts[:n_fit]
                )
            )
    return kept, notes


def plan_digest(cfg: SweepConfig, work: Sequence[Work]) -> str:
    """A hash of everything that decides which collectives a rank will call, in order:
    ranks that disagree would hang or abort in the transport, and comparing this first
    turns that into one clear message."""
    # splits_label: a traffic matrix file's hash, so ranks that read two different
    # copies of it disagree here rather than in the exchange.
    items = [
        (
            w.coll.name,
            w.coll.splits_label,
            w.dtype,
            w.redop,
            w.requested,
            w.placements,
            w.unsupported,
        )
        for w in work
    ]
    # Every option counts unless it provably cannot change which collectives run, in
    # which order: a new option is then covered without anyone remembering to add it.
    fields = {
        name: value for name, value in sorted(cfg.to_dict().items()) if name not in DIGEST_EXEMPT
    }
    return hashlib.sha256(repr((items, fields)).encode()).hexdigest()[:16]


#: SweepConfig fields that never change the sequence of collectives a rank calls:
#: where output goes and how it is shown, limits that ranks agree on by a minimum
#: (memory) or that only bound waiting (timeouts), and what only the parent reads.
DIGEST_EXEMPT = frozenset(
    {
        "out_dir",
        "results_root",
        "progress",
        "table",
        "plot",
        "command_line",
        "debug",
        "timeout_s",
        "init_timeout_s",
        "memory_limit_bytes",
        "nprocs",
        "backend",
        "env_axes",
        "interpreters",
        "interleave",
        "nccl_probe",
    }
)


def fit_plan(
    cfg: SweepConfig,
    work: list[Work],
    device: Any,
    world_size: int,
    side: SideGroup,
    worlds: int = 1,
) -> tuple[list[Work], list[str]]:
    """The plan trimmed to the per-rank buffer budget, the minimum over all ranks so every
    plan is the same, and its notes. ``worlds``: the interleaved worlds alive at once,
    whose buffers share the memory."""
    if cfg.measure.memory_check == "off":
        return work, []
    import torch

    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    if free is not None:
        # --ranks-per-gpu: the GPU's free memory is every sharing rank's to split.
        free //= cfg.launch.ranks_per_gpu
    local = memory.rank_budget_bytes(
        local_world_size_from_env(world_size), cfg.measure.memory_limit_bytes, free
    )
    budget = side.min_int(local // worlds)
    fitted, notes = fit_to_memory(work, budget, cfg.measure.rotate)
    if notes and cfg.measure.memory_check == "refuse":
        raise UsageError(f"not enough memory: {notes[0]} (--memory-check skip runs what fits)")
    if notes and count_units(work) and not count_units(fitted):
        # Skipping what does not fit leaves nothing: a run of no rows is no result.
        raise UsageError(f"nothing fits in memory: {notes[0]}")
    return fitted, [f"{note}; skipped" for note in notes]


def nccl_facts(side: SideGroup, device: Any, first_group: tuple[int, ...]) -> CommFacts:
    """What NCCL's choice of algorithm depends on, for the measured communicator (the
    first group of --group-size or --split), from every rank's view: NCCL's host identity
    (so emulated nodes count as nodes), its version, the GPU's compute capability. Every
    rank gathers the same facts, so every rank plans alike. What is not known here
    (NVSwitch, NVLS multicast, a CollNet plugin) stays None: NCCL's rules are then read
    both ways, and a row is refused only when no reading runs it."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    version = torch_version()
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


@dataclass(frozen=True)
class RunInfo:
    """Facts about the run that every row repeats."""

    run_id: str
    backend: str
    device_name: str
    world_size: int
    nnodes: int
    variant: str = ""
    #: Groups the world is split into (--group-size, --split); each has world_size //
    #: groups ranks.
    groups: int = 1
    #: How: ``div:K`` or ``mod:K`` (colbench.bench.groups.split_label); empty for one group.
    split: str = ""
    #: Ranks sharing each GPU (--ranks-per-gpu): above 1 the fabric is emulated.
    ranks_per_gpu: int = 1
    #: NCCL's choice per call, (op, bytes per rank) -> (algorithm, protocol), as a probe
    #: world logged it (colbench.commands.sweep.probe); empty when not recorded.
    nccl_choices: Mapping[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    #: The rate that bounds every row's busbw (colbench.hardware.node), GB/s; None
    #: where none can be known, and ``ceiling_source`` says where it comes from or why.
    ceiling_gbps: float | None = None
    ceiling_source: str = ""
    #: Ranks that share the ceiling's link in an exchange (all_to_all(v) rows: the most
    #: ranks on one node of a multi-node run; 1 otherwise, or for --ceiling-gbps).
    ceiling_sharing: int = 1
    #: The --contend load this world runs beside every collective (its label); empty: none.
    load: str = ""
    #: What the calls go through (--engine): torch.distributed, or NCCL itself.
    engine: str = "torch"

    @property
    def group_size(self) -> int:
        """Ranks one collective runs on: the n of the bandwidth formulas."""
        return self.world_size // self.groups


def warmup_calls(info: RunInfo, cfg: SweepConfig) -> int:
    """Untimed calls before each batch. NCCL connects peers lazily, on a communicator's
    first call of each kind (and a CUDA graph would capture that set-up): with
    ``--warmup 0`` it still gets one, so no batch times a connection."""
    return max(1, cfg.measure.warmup) if info.backend == "nccl" else cfg.measure.warmup
