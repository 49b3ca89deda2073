"""The one typed description of a sweep, and its validation.

The CLI and YAML suites give :class:`colbench.config.options.SweepOptions`; :func:`from_options`
checks them into a :class:`SweepConfig` of three small parts (what to measure, how to
launch, what to write), which everything downstream reads. Validation that needs no
process group happens here, so bad input fails before any rank starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from colbench import ops as ops_registry
from colbench.config.contend import LoadSpec, check_load
from colbench.config.option_table import config_values
from colbench.config.options import (
    DEFAULT_INIT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    EMULATED_INIT_TIMEOUT_S,
    EMULATED_TIMEOUT_S,
    PLACEMENTS,
    Average,
    Backend,
    MemoryCheck,
    SweepOptions,
    parse_split,
)
from colbench.config.options import table as options_table
from colbench.config.sizes import parse_size, parse_sizes, size_range
from colbench.errors import UsageError
from colbench.ops.base import Collective
from colbench.ops.dtypes import DTYPES, parse_dtypes, parse_redops, redop_supported


@dataclass(frozen=True)
class MeasureConfig:
    """What to measure: collectives, sizes, types, and how each size is timed and checked."""

    ops: tuple[str, ...] = ("all_reduce",)
    """Collectives to run, in order."""
    sizes_bytes: tuple[int, ...] = ()
    """Requested message sizes in bytes (binary units), ascending."""
    dtypes: tuple[str, ...] = ("float32",)
    """Element types (torch names)."""
    redops: tuple[str, ...] = ("sum",)
    """Reduction operators for ops that reduce."""
    root: int = 0
    """Root rank of broadcast, reduce, gather and scatter."""
    placements: tuple[str, ...] = PLACEMENTS
    """``out`` (separate buffers) and/or ``in`` (in-place form), as nccl-tests reports both."""
    iters: int = 20
    """Timed calls per size."""
    warmup: int = 5
    """Untimed calls per size before timing (connection set-up, caches)."""
    check: bool = True
    """Verify every result bitwise after timing."""
    average: Average = "avg"
    """How each rank's batch time is combined before bandwidth is computed."""
    group_size: int | None = None
    """Split the world into contiguous groups of this many ranks that run every
    collective at once (nccl-tests' NCCL_TESTS_SPLIT="DIV k"); None = one group of all ranks."""
    group_mod: int | None = None
    """``--split mod:K``: K groups, each of the ranks with equal rank mod K, all running
    every collective at once (nccl-tests' NCCL_TESTS_SPLIT="MOD K": on nodes of K GPUs,
    one rail per group); None: see ``group_size``."""

    def ranks_per_group(self, world_size: int) -> int:
        """Ranks each collective runs on: the n of the bandwidth formulas."""
        if self.group_mod:
            return world_size // self.group_mod
        return self.group_size or world_size

    seed: int = 0
    """Seed of the deterministic input data (and of all_to_allv's split generators)."""
    splits: str = "uniform"
    """all_to_allv's traffic pattern (colbench.ops.splits): who sends how much to whom."""
    memory_check: MemoryCheck = "skip"
    """Before allocating: ``skip`` sizes that do not fit, ``refuse`` the sweep, or ``off``."""
    memory_limit_bytes: int | None = None
    """Cap on the buffer memory one rank may use (on top of what the machine has)."""
    time_budget_s: float | None = None
    """Per size: time as many iterations as fit in this many seconds (``--iters`` is then
    the minimum), instead of a fixed count."""
    rotate: int = 1
    """Buffer sets cycled call by call, so caches do not flatter repeated calls."""
    cuda_graph: bool = False
    """NCCL: capture the timed batch in a CUDA graph and replay it (nccl-tests' -G)."""
    repeat: int = 1
    """Times the whole plan is measured, one sample per row each time (rows' ``repeat``)."""
    contend: LoadSpec | None = None
    """``--contend``: the load one of two interleaved variants runs beside the measured
    collective (colbench.config.contend); None: no load, no such variants."""


@dataclass(frozen=True)
class LaunchConfig:
    """How ranks are started, and how long they may take."""

    backend: Backend = "auto"
    """``auto`` picks NCCL when GPUs are there, else gloo."""
    nprocs: int | None = None
    """Ranks to spawn when no launcher started us (default: GPUs for NCCL, 2 for gloo)."""
    timeout_s: float = 300.0
    """Longest any one step may take (a timed batch, a barrier); a hang past it ends the
    run with exit 4 naming the stuck ranks. torch's process groups get a little more, so
    colbench reports first (see colbench.run.watchdog)."""
    init_timeout_s: float = 120.0
    """Every rank must have joined the rendezvous, and the communicator started, within
    this many seconds."""
    ranks_per_gpu: int = 1
    """NCCL ranks sharing each GPU; above 1 every rank is an emulated node of its own
    (colbench.launch.emulation): a real multi-rank NCCL world on fewer GPUs."""
    debug: bool = False
    """NCCL: keep torch's flight recorder and dump it into the run directory on timeout."""
    env_axes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``--env KEY=V1,V2`` axes; their cartesian product runs the sweep once per variant."""
    interpreters: tuple[tuple[str, str], ...] = ()
    """``--python NAME=PATH,...``: each (name, interpreter) multiplies the variants; their
    ranks run in that interpreter."""
    interleave: bool = True
    """Variants' worlds alive at once, taking turns per (size, repeat); False runs them
    one after the other (see colbench.run.turns)."""
    nccl_probe: bool = True
    """NCCL worlds of 2+ ranks: a probe world per variant records NCCL's choice per call
    first (colbench.sweep.probe)."""


@dataclass(frozen=True)
class OutputConfig:
    """What is written and shown."""

    out_dir: str | None = None
    """Run directory; default ``<results_root>/<timestamp>-<ops>-<backend>``."""
    results_root: str = "results"
    """Parent of default run directories."""
    progress: bool | None = None
    """Progress bar on stderr; None = only when stderr is a terminal."""
    table: bool = True
    """Print the nccl-tests style table on stdout."""
    plot: bool = False
    """Write busbw.png and time.png into the run directory when the sweep is done."""
    per_rank: bool = False
    """Write per_rank.csv beside results.csv: each rank's batch time and barrier wait."""
    ceiling_gbps: float | None = None
    """The user's rate bounding busbw (GB/s), replacing the hardware's (colbench.hardware)."""
    command_line: tuple[str, ...] = field(default_factory=tuple)
    """argv of the invocation, recorded in meta.json."""


@dataclass(frozen=True)
class TaskRunFields:
    """The launch and output fields a task's one flat config shares with sweep's options
    (p2p's, health's), and their ``launch`` and ``output`` for the run host (colbench.run)."""

    backend: str = "auto"
    nprocs: int | None = None
    ranks_per_gpu: int = 1
    timeout_s: float = LaunchConfig.timeout_s
    init_timeout_s: float = LaunchConfig.init_timeout_s
    out_dir: str | None = None
    results_root: str = "results"
    command_line: tuple[str, ...] = field(default_factory=tuple)

    @property
    def launch(self) -> LaunchConfig:
        """How the run host starts the task's ranks."""
        return LaunchConfig(
            backend=cast(Backend, self.backend),
            nprocs=self.nprocs,
            timeout_s=self.timeout_s,
            init_timeout_s=self.init_timeout_s,
            ranks_per_gpu=self.ranks_per_gpu,
        )

    @property
    def output(self) -> OutputConfig:
        """Where the run directory goes."""
        return OutputConfig(
            out_dir=self.out_dir, results_root=self.results_root, command_line=self.command_line
        )


_PARTS = {"measure": MeasureConfig, "launch": LaunchConfig, "output": OutputConfig}


@dataclass(frozen=True)
class SweepConfig:
    """A complete, validated sweep request: what to measure, how to launch, what to write."""

    measure: MeasureConfig = field(default_factory=MeasureConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    @classmethod
    def of(cls, **values: Any) -> SweepConfig:
        """A config from fields by their own names (``ops=..., iters=3``), rest defaults."""
        return cls().replace(**values)

    def replace(self, **values: Any) -> SweepConfig:
        """A copy with some fields changed, named as in :meth:`of`."""
        parts: dict[str, Any] = {}
        for name, kind in _PARTS.items():
            part = getattr(self, name)
            mine = {k: values.pop(k) for k in list(values) if k in _FIELDS[kind]}
            parts[name] = dataclasses.replace(part, **mine) if mine else part
        if values:
            raise TypeError(f"SweepConfig has no field {next(iter(values))!r}")
        return type(self)(**parts)

    def collectives(self) -> tuple[Collective, ...]:
        return tuple(ops_registry.get(name).configured(self.measure) for name in self.measure.ops)

    def to_dict(self) -> dict[str, Any]:
        """Every field by its own name, in one flat mapping (meta.json's ``config``)."""
        return {**asdict(self.measure), **asdict(self.launch), **asdict(self.output)}


_FIELDS: dict[type, frozenset[str]] = {
    kind: frozenset(f.name for f in dataclasses.fields(kind)) for kind in _PARTS.values()
}


def resolve_sizes(
    sizes: str | None,
    minbytes: str | None,
    maxbytes: str | None,
    factor: float | None,
    step: str | None,
) -> tuple[int, ...]:
    """Merge ``--sizes`` with the nccl-tests flags -b/-e/-f/-i into one size list."""
    step_bytes = parse_size(step) if step is not None else None
    if sizes is not None:
        if minbytes is not None or maxbytes is not None:
            raise UsageError("give either --sizes or -b/--minbytes and -e/--maxbytes, not both")
        return tuple(parse_sizes(sizes, factor, step_bytes))
    low = parse_size(minbytes) if minbytes is not None else None
    high = parse_size(maxbytes) if maxbytes is not None else None
    if low is None and high is None:
        return tuple(parse_sizes("1K-16M", factor, step_bytes))
    # nccl-tests defaults both ends to 32M; one given end alone means a single size.
    low = high if low is None else low
    high = low if high is None else high
    assert low is not None and high is not None
    return tuple(size_range(low, high, factor, step_bytes))


def build(
    *,
    op: str,
    sizes: tuple[int, ...],
    dtype: str,
    redop: str,
    **kwargs: Any,
) -> SweepConfig:
    """Validate user choices into a SweepConfig (raises UsageError)."""
    collectives = ops_registry.parse_ops(op)
    if kwargs.get("cuda_graph") and op.strip() != "all":
        # Asked for by name, it cannot be quietly left out: refuse. (``all`` skips it.)
        named = [c.name for c in collectives if not c.graph_capturable]
        if named:
            raise UsageError(
                f"--cuda-graph cannot capture {named[0]}: it synchronises the host, which a "
                "CUDA graph cannot hold; run it without --cuda-graph"
            )
    dtypes = parse_dtypes(dtype)
    redops = parse_redops(redop)
    cfg = SweepConfig.of(
        ops=tuple(c.name for c in collectives),
        sizes_bytes=tuple(sizes),
        dtypes=tuple(d.name for d in dtypes),
        redops=redops,
        **kwargs,
    )
    validate(cfg)
    return cfg


def from_options(opts: SweepOptions, command_line: tuple[str, ...] = ()) -> SweepConfig:
    """Check and convert what the user gave (flags, a suite) into a SweepConfig.

    Each option becomes the config field it declares (colbench.config.option_table's
    ``config_values``); only what several options make together is written here: the
    sizes, and the timeouts that depend on the fabric. Raises UsageError, in the order a
    user fixes things: flags' own values first, then combinations (in :func:`build` and
    :func:`validate`).
    """
    values = config_values(options_table(), asdict(opts))
    for name in ("timeout_s", "init_timeout_s"):
        values[name] = default_timeout(
            values[name], opts.ranks_per_gpu, init=name == "init_timeout_s"
        )
    sizes = resolve_sizes(opts.sizes, opts.minbytes, opts.maxbytes, opts.factor, opts.step)
    groups = _groups(opts.group_size, opts.split)
    return build(sizes=sizes, command_line=command_line, **groups, **values)


def _groups(group_size: int | None, split: str | None) -> dict[str, Any]:
    """``--group-size`` or ``--split`` as the config's group_size and group_mod."""
    if split is None:
        return {"group_size": group_size, "group_mod": None}
    if group_size is not None:
        raise UsageError("give --split or --group-size, not both (--split div:K is --group-size K)")
    kind, k = parse_split(split)
    return (
        {"group_size": k, "group_mod": None}
        if kind == "div"
        else {"group_size": None, "group_mod": k}
    )


def default_timeout(given: float | None, ranks_per_gpu: int, *, init: bool) -> float:
    """``--timeout``/``--init-timeout`` as given, else the default for the fabric."""
    if given is not None:
        return given
    if ranks_per_gpu > 1:
        return EMULATED_INIT_TIMEOUT_S if init else EMULATED_TIMEOUT_S
    return DEFAULT_INIT_TIMEOUT_S if init else DEFAULT_TIMEOUT_S


#: Time-sliced ranks on one GPU: beyond this many, every step is mostly waiting for a turn.
MAX_RANKS_PER_GPU = 16

RANKS_PER_GPU_NEEDS_NCCL = (
    "--ranks-per-gpu {k} shares each GPU among NCCL ranks; it needs --backend nccl (or auto "
    "on a GPU machine). gloo ranks run on the CPU: --nprocs sets how many"
)

#: The largest count, seed or rank an option takes: the ranks compute with 32-bit
#: counters and 64-bit element indices mixed with the seed, and a larger value is a typo.
MAX_COUNT = 2**31 - 1


def _positive_seconds(flag: str, value: float | None) -> None:
    # ``not > 0`` refuses NaN too; an infinite wait cannot be set on a process group.
    if value is not None and (not value > 0 or value == float("inf")):
        raise UsageError(f"{flag} must be positive, got {value:g} (a finite number of seconds)")


def validate_run(cfg: SweepConfig) -> None:
    """Checks of the options any run has: counts, ranks and timeouts."""
    m = cfg.measure
    validate_counts(iters=m.iters, repeat=m.repeat, warmup=m.warmup, seed=m.seed, root=m.root)
    validate_launch(cfg.launch)


def validate_counts(*, iters: int, repeat: int, warmup: int, seed: int, root: int) -> None:
    """The counts a sweep and p2p share, by their flags' names."""
    bounded = (
        ("--iters", iters),
        ("--repeat", repeat),
        ("--warmup", warmup),
        ("--seed", seed),
        ("--root", root),
    )
    for flag, value in bounded:
        if value > MAX_COUNT:
            raise UsageError(f"{flag} takes at most {MAX_COUNT}, got {value}")
    if seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {seed}")
    if iters < 1:
        raise UsageError(f"--iters must be at least 1, got {iters}")
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    if warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, got {warmup}")


def validate_launch(launch: LaunchConfig) -> None:
    """Ranks and timeouts, for any task."""
    if launch.nprocs is not None and launch.nprocs > MAX_COUNT:
        raise UsageError(f"--nprocs takes at most {MAX_COUNT}, got {launch.nprocs}")
    if launch.nprocs is not None and launch.nprocs < 1:
        raise UsageError(f"--nprocs must be at least 1, got {launch.nprocs}")
    if not 1 <= launch.ranks_per_gpu <= MAX_RANKS_PER_GPU:
        raise UsageError(
            f"--ranks-per-gpu takes 1 to {MAX_RANKS_PER_GPU} ranks per GPU, "
            f"got {launch.ranks_per_gpu}"
        )
    _positive_seconds("--timeout", launch.timeout_s)
    _positive_seconds("--init-timeout", launch.init_timeout_s)
    if launch.ranks_per_gpu > 1 and launch.backend == "gloo":
        raise UsageError(RANKS_PER_GPU_NEEDS_NCCL.format(k=launch.ranks_per_gpu))


CUDA_GRAPH_NEEDS_NCCL = "--cuda-graph captures NCCL calls in a CUDA graph; it needs --backend nccl"


def validate(cfg: SweepConfig) -> None:
    """Checks that need no process group."""
    if not cfg.measure.sizes_bytes:
        raise UsageError("no sizes to run")
    validate_run(cfg)
    if cfg.measure.root < 0:
        raise UsageError(f"--root must be a rank (0 or more), got {cfg.measure.root}")
    if cfg.measure.cuda_graph and cfg.launch.backend == "gloo":
        # Also checked against the backend ``auto`` picks; this catches it before torch loads.
        raise UsageError(CUDA_GRAPH_NEEDS_NCCL)
    _positive_seconds("--time-budget", cfg.measure.time_budget_s)
    ceiling = cfg.output.ceiling_gbps
    if ceiling is not None and (not ceiling > 0 or ceiling == float("inf")):
        raise UsageError(f"--ceiling-gbps must be a positive rate in GB/s, got {ceiling:g}")
    if not 1 <= cfg.measure.rotate <= 64:
        raise UsageError(f"--rotate takes 1 to 64 buffer sets, got {cfg.measure.rotate}")
    if cfg.measure.group_size is not None and cfg.measure.group_size < 1:
        raise UsageError(f"--group-size must be at least 1, got {cfg.measure.group_size}")
    if cfg.measure.group_mod is not None and cfg.measure.group_mod < 1:
        raise UsageError(f"--split mod:K needs K of 1 or more, got {cfg.measure.group_mod}")
    if all(c.uses_redop for c in cfg.collectives()):
        reasons = [
            why
            for d in cfg.measure.dtypes
            for r in cfg.measure.redops
            if (why := redop_supported(r, DTYPES[d]))
        ]
        if len(reasons) == len(cfg.measure.dtypes) * len(cfg.measure.redops):
            raise UsageError(f"nothing to run: {reasons[0]}")
    if not any(placements_for(c, cfg) for c in cfg.collectives()):
        forms = "/".join(cfg.measure.placements)
        raise UsageError(f"none of the chosen ops has a {forms} form; see colbench explain")


def validate_for_world(cfg: SweepConfig, world_size: int, backend: str) -> list[str]:
    """Checks that need the world size; returns warnings for combinations that will be skipped.

    With ``--group-size`` every collective runs in groups of that size, so the group
    size is what ops and roots are checked against.
    """
    if cfg.measure.contend is not None:
        check_load(cfg.measure.contend, cfg.measure, world_size, backend)
    what = "world"
    if cfg.measure.group_size is not None:
        if world_size % cfg.measure.group_size:
            raise UsageError(
                f"--group-size {cfg.measure.group_size} does not divide the world size {world_size}"
            )
        what, world_size = "group", cfg.measure.group_size
    if cfg.measure.group_mod is not None:
        k = cfg.measure.group_mod
        if world_size % k:
            raise UsageError(
                f"--split mod:{k} needs a world size that is a multiple of {k}, got {world_size}"
            )
        what, world_size = "group", world_size // k
    if cfg.measure.root >= world_size and any(c.rooted for c in cfg.collectives()):
        raise UsageError(f"--root {cfg.measure.root} is not a rank of a {what} of {world_size}")
    if cfg.measure.cuda_graph and backend != "nccl":
        raise UsageError(CUDA_GRAPH_NEEDS_NCCL)
    notes: list[str] = []
    for coll in cfg.collectives():
        reason = coll.unsupported(world_size, backend)
        if reason:
            notes.append(f"skipping {coll.name}: {reason}")
            continue
        if cfg.measure.cuda_graph and not coll.graph_capturable:
            notes.append(f"skipping {coll.name}: a CUDA graph cannot capture it (--cuda-graph)")
            continue
        forms = {"out": "out-of-place", "in": "in-place"}
        missing = [forms[p] for p in cfg.measure.placements if p not in coll.placements]
        # With both placements asked for, the table's n/a columns say enough.
        if coll.sized and missing and not placements_for(coll, cfg):
            notes.append(f"skipping {coll.name}: torch has no {missing[0]} form of it")
        if coll.uses_redop:
            for d in cfg.measure.dtypes:
                for r in cfg.measure.redops:
                    why = redop_supported(r, DTYPES[d])
                    if why:
                        notes.append(f"skipping {coll.name} {d} {r}: {why}")
    if cfg.measure.splits != "uniform" and not any(c.splits_label for c in cfg.collectives()):
        notes.append(f"--splits {cfg.measure.splits} has no effect: no op measured takes it")
    if all(
        c.unsupported(world_size, backend) or not placements_for(c, cfg) for c in cfg.collectives()
    ):
        raise UsageError(f"nothing to run at {what} size {world_size}: " + "; ".join(notes))
    return notes


def placements_for(coll: Collective, cfg: SweepConfig) -> tuple[str, ...]:
    """The requested placements this op has; size-less ops (barrier) run once regardless."""
    if not coll.sized:
        return coll.placements
    return tuple(p for p in cfg.measure.placements if p in coll.placements)
