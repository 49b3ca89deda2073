"""The one typed description of a sweep: a :class:`SweepConfig` of three small parts (what
to measure, how to launch, what to write), which everything downstream reads.

:func:`colbench.config.validate.from_options` makes one from what the CLI and YAML suites
give and checks it, reading these types: so this module does not import it. Beside the
types, their values: the defaults, and the parsers that read a value from a user's text and
refuse what it may not be (the options tables name them).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from colbench.bench import ops as ops_registry
from colbench.bench.ops.base import Collective
from colbench.bench.ops.dtypes import REDOPS
from colbench.config.contend import LoadSpec
from colbench.direct.engine import ENGINES
from colbench.errors import UsageError

Average = Literal["avg", "min", "max", "rank0"]
Backend = Literal["auto", "gloo", "nccl"]
MemoryCheck = Literal["skip", "refuse", "off"]
AVERAGES: tuple[Average, ...] = ("avg", "min", "max", "rank0")
BACKENDS: tuple[Backend, ...] = ("auto", "gloo", "nccl")
MEMORY_CHECKS: tuple[MemoryCheck, ...] = ("skip", "refuse", "off")
# nccl-tests' -a takes 0..3.
_AVERAGE_DIGITS: dict[str, Average] = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}
PLACEMENTS = ("out", "in")
#: nccl-tests' -c N verifies N times; beyond this a typo is likelier than intent.
MAX_CHECK_PASSES = 100
#: Default timeouts; ranks that share a GPU (--ranks-per-gpu) time-slice its kernels and
#: talk over loopback sockets, so every step takes longer (see docs/gpu.md).
DEFAULT_TIMEOUT_S = 300.0
#: ``--timeout 0`` (nccl-tests: no timeout): torch's process groups need a finite one.
NO_TIMEOUT_S = 7 * 86400.0
DEFAULT_INIT_TIMEOUT_S = 120.0
EMULATED_TIMEOUT_S = 900.0
EMULATED_INIT_TIMEOUT_S = 300.0


def parse_average(text: str) -> Average:
    key = text.strip().lower()
    key = _AVERAGE_DIGITS.get(key, key)
    if key in AVERAGES:
        return key
    raise UsageError(f"bad --average {text!r}: choose avg, min, max or rank0 (or nccl-tests' 0-3)")


def check_passes(value: int) -> int:
    """``--check N`` (nccl-tests' -c): passes of fill, run once and verify; 0 none."""
    if not 0 <= value <= MAX_CHECK_PASSES:
        raise UsageError(f"--check takes 0 to {MAX_CHECK_PASSES} passes, got {value}")
    return value


def parse_collectives(text: str) -> tuple[Collective, ...]:
    """``--op``: collectives; a reduction's name (nccl-tests' ``--op sum``) is refused with
    where the reduction goes here."""
    for name in (n.strip().lower() for n in text.split(",")):
        if name in (*REDOPS, "mulsum"):
            raise UsageError(
                f"--op {name}: --op names the collective here (e.g. --op all_reduce); the "
                f"reduction, nccl-tests' -o/--op, is -o/--redop {name}"
            )
    return ops_registry.parse_ops(text)


def parse_placements(text: str) -> tuple[str, ...]:
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    aliases = {"out-of-place": "out", "in-place": "in", "oop": "out", "ip": "in", "both": "out,in"}
    expanded: list[str] = []
    for name in names:
        expanded.extend(aliases.get(name, name).split(","))
    if not expanded or any(p not in PLACEMENTS for p in expanded):
        raise UsageError(f"bad --placement {text!r}: use out, in or out,in")
    return tuple(p for p in PLACEMENTS if p in expanded)


def check_json_path(path: str) -> str:
    """``-J FILE``: a name nccl-tests would write (it writes JSON only to ``*.json``, and
    nothing at all for other names) in a directory that exists; made absolute, so every
    process of the run names the same file."""
    target = Path(path).expanduser()
    if target.suffix.lower() != ".json":
        raise UsageError(
            f"-J {path}: nccl-tests writes its JSON report only to a name ending in .json "
            f"(and nothing for others); name it {target.name}.json"
        )
    if not target.parent.resolve().is_dir():
        raise UsageError(f"-J {path}: directory {target.parent} does not exist")
    return str(target.resolve())


def per_iter_flag(value: int) -> bool:
    """``-I 0/1`` (nccl-tests' --per_iter_timing) as a bool; nccl-tests turns other
    values into 0 with a warning, here they are refused."""
    if value not in (0, 1):
        raise UsageError(f"-I/--per-iter-timing takes 0 or 1, got {value}")
    return bool(value)


def parse_split(text: str) -> tuple[Literal["div", "mod"], int]:
    """``--split``: ``mod:K`` or ``div:K`` (nccl-tests' NCCL_TESTS_SPLIT "MOD K", "%K",
    "DIV K" and "/K" too) -> (kind, K)."""
    found = re.fullmatch(r"(mod:?|%|div:?|/)([0-9]+)", text.strip().lower().replace(" ", ""))
    if found is None or int(found[2]) < 1:
        raise UsageError(
            f"bad --split {text!r}: use mod:K (K groups of equal rank mod K) or div:K "
            "(contiguous groups of K), K a whole number of 1 or more"
        )
    return ("mod" if found[1][0] in "m%" else "div"), int(found[2])


def parse_engines(text: str) -> tuple[str, ...]:
    """``--engine torch,nccl`` -> ("torch", "nccl"), in the order given."""
    names = tuple(part.strip() for part in text.split(","))
    for name in names:
        if name not in ENGINES:
            raise UsageError(f"bad --engine {text!r}: use torch, nccl or torch,nccl")
    if len(set(names)) != len(names):
        raise UsageError(f"bad --engine {text!r}: an engine is listed twice")
    return names


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
    """Root rank of broadcast, reduce, gather and scatter; ``EVERY_ROOT`` (-1) each rank
    in turn, as nccl-tests' ``-r -1``."""
    placements: tuple[str, ...] = PLACEMENTS
    """``out`` (separate buffers) and/or ``in`` (in-place form), as nccl-tests reports both."""
    iters: int = 20
    """Timed calls per size."""
    warmup: int = 5
    """Untimed calls per size before timing (connection set-up, caches)."""
    check: int = 1
    """Passes of fill, run once and verify bitwise after each size's timing (nccl-tests'
    ``-c N``; a pass that finds wrong elements ends them); 0 verifies nothing."""
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
    """all_to_allv's traffic pattern (colbench.bench.ops.splits): who sends how much to whom."""
    memory_check: MemoryCheck = "skip"
    """Before allocating: ``skip`` sizes that do not fit, ``refuse`` the sweep, or ``off``."""
    memory_limit_bytes: int | None = None
    """Cap on the buffer memory one rank may use (on top of what the machine has)."""
    time_budget_s: float | None = None
    """Per size: time as many iterations as fit in this many seconds (``--iters`` is then
    the minimum), instead of a fixed count."""
    rotate: int = 1
    """Buffer sets cycled call by call, so caches do not flatter repeated calls."""
    cuda_graph: int = 0
    """NCCL: capture the timed batch in a CUDA graph and launch it this many times
    (nccl-tests' -G N); 0 runs the calls eagerly."""
    repeat: int = 1
    """Times the whole plan is measured, one sample per row each time (rows' ``repeat``)."""
    contend: LoadSpec | None = None
    """``--contend``: the load one of two interleaved variants runs beside the measured
    collective (colbench.config.contend); None: no load, no such variants."""
    engines: tuple[str, ...] = ("torch",)
    """``--engine``: what makes the calls (colbench.direct.engine); two are two
    interleaved variants, ``engine=torch`` and ``engine=nccl``."""
    init_only: bool = False
    """``--init-only``: time communicator set-up instead of collectives, ``repeat`` times
    per world (colbench.commands.sweep.setup); its rows go to init.csv."""
    register: str = "none"
    """``--register`` (nccl-tests' -R): the direct engine registers every buffer with NCCL,
    ``local`` (ncclCommRegister) or ``symmetric`` (ncclCommWindowRegister, symmetric
    windows); ``none`` registers nothing (colbench.direct.register)."""


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
    colbench reports first (see colbench.host.watchdog)."""
    init_timeout_s: float = 120.0
    """Every rank must have joined the rendezvous, and the communicator started, within
    this many seconds."""
    ranks_per_gpu: int = 1
    """NCCL ranks sharing each GPU; above 1 every rank is an emulated node of its own
    (colbench.host.launchers.gpus): a real multi-rank NCCL world on fewer GPUs."""
    debug: bool = False
    """NCCL: keep torch's flight recorder and dump it into the run directory on timeout."""
    env_axes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``--env KEY=V1,V2`` axes; their cartesian product runs the sweep once per variant."""
    interpreters: tuple[tuple[str, str], ...] = ()
    """``--python NAME=PATH,...``: each (name, interpreter) multiplies the variants; their
    ranks run in that interpreter."""
    interleave: bool = True
    """Variants' worlds alive at once, taking turns per (size, repeat); False runs them
    one after the other (see colbench.host.turns)."""
    nccl_probe: bool = True
    """NCCL worlds of 2+ ranks: a probe world per variant records NCCL's choice per call
    first (colbench.commands.sweep.probe)."""


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
    output_file: str | None = None
    """``-J``: nccl-tests' JSON report, an absolute path ending in .json (None: none)."""
    per_iter_timing: bool = False
    """``-I 1``: the -J report's per-iteration blocks (every timed call, every rank)."""
    command_line: tuple[str, ...] = field(default_factory=tuple)
    """argv of the invocation, recorded in meta.json."""


_Part = TypeVar("_Part", "LaunchConfig", "OutputConfig")


@dataclass(frozen=True)
class TaskRunFields:
    """The launch and output fields a task's one flat config shares with sweep's options
    (p2p's, health's), and their ``launch`` and ``output`` for the run host (colbench.host)."""

    backend: str = "auto"
    nprocs: int | None = None
    ranks_per_gpu: int = 1
    timeout_s: float = LaunchConfig.timeout_s
    init_timeout_s: float = LaunchConfig.init_timeout_s
    out_dir: str | None = None
    results_root: str = "results"
    progress: bool | None = None
    command_line: tuple[str, ...] = field(default_factory=tuple)

    @property
    def launch(self) -> LaunchConfig:
        """How the run host starts the task's ranks."""
        return self._part(LaunchConfig)

    @property
    def output(self) -> OutputConfig:
        """Where the run directory goes."""
        return self._part(OutputConfig)

    def _part(self, kind: type[_Part]) -> _Part:
        """``kind`` made of the fields these share with it (its own, not a subclass's)."""
        shared = _FIELDS[kind] & _FIELDS[TaskRunFields]
        return kind(**{name: getattr(self, name) for name in shared})


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

    def placements_for(self, coll: Collective) -> tuple[str, ...]:
        """The requested placements this op has; size-less ops (barrier) run once regardless."""
        if not coll.sized:
            return coll.placements
        return tuple(p for p in self.measure.placements if p in coll.placements)

    def to_dict(self) -> dict[str, Any]:
        """Every field by its own name, in one flat mapping (meta.json's ``config``)."""
        return {**asdict(self.measure), **asdict(self.launch), **asdict(self.output)}


_FIELDS: dict[type, frozenset[str]] = {
    kind: frozenset(f.name for f in dataclasses.fields(kind))
    for kind in (*_PARTS.values(), TaskRunFields)
}


#: ``--root -1``: every rank of the group is the root in turn (nccl-tests' ``-r -1``).
EVERY_ROOT = -1


def default_timeout(given: float | None, ranks_per_gpu: int, *, init: bool) -> float:
    """``--timeout``/``--init-timeout`` as given, else the default for the fabric;
    ``--timeout 0`` is nccl-tests' "none", as long a limit as torch is given."""
    if given == 0 and not init:
        return NO_TIMEOUT_S
    if given is not None:
        return given
    if ranks_per_gpu > 1:
        return EMULATED_INIT_TIMEOUT_S if init else EMULATED_TIMEOUT_S
    return DEFAULT_INIT_TIMEOUT_S if init else DEFAULT_TIMEOUT_S
