"""The one typed description of a sweep: a :class:`SweepConfig` of three small parts (what
to measure, how to launch, what to write), which everything downstream reads; beside it,
the defaults and the parsers the options tables name. colbench.config.validate makes and
checks one, reading these types: so this module does not import it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from colbench.bench import ops as ops_registry
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import REDOPS
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
    expanded = [p for name in names for p in aliases.get(name, name).split(",")]
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
    if any(name not in ENGINES for name in names):
        raise UsageError(f"bad --engine {text!r}: use torch, nccl or torch,nccl")
    if len(set(names)) != len(names):
        raise UsageError(f"bad --engine {text!r}: an engine is listed twice")
    return names


@dataclass(frozen=True)
class MeasureConfig:
    """What to measure: collectives, sizes, types, and how each size is timed and checked.

    Each field of these three parts is an option of colbench.config.options (its own name,
    or the option's ``to``), converted; the option's help says what it means, and a field's
    docstring only what the converted value adds."""

    ops: tuple[str, ...] = ("all_reduce",)
    sizes_bytes: tuple[int, ...] = ()
    """Ascending; made of --sizes or -b/-e/-f/-i together."""
    dtypes: tuple[str, ...] = ("float32",)
    """torch's names."""
    redops: tuple[str, ...] = ("sum",)
    root: int = 0
    """``EVERY_ROOT`` (-1): each rank in turn."""
    placements: tuple[str, ...] = PLACEMENTS
    iters: int = 20
    warmup: int = 5
    check: int = 1
    average: Average = "avg"
    group_size: int | None = None
    """Contiguous groups (nccl-tests' NCCL_TESTS_SPLIT="DIV k", --split div:K too); None:
    one group of all ranks."""
    group_mod: int | None = None
    """``--split mod:K``: K groups of the ranks with equal rank mod K; None: see
    ``group_size``."""

    def ranks_per_group(self, world_size: int) -> int:
        """Ranks each collective runs on: the n of the bandwidth formulas."""
        if self.group_mod:
            return world_size // self.group_mod
        return self.group_size or world_size

    seed: int = 0
    splits: str = "uniform"
    """colbench.bench.ops.splits reads it."""
    memory_check: MemoryCheck = "skip"
    memory_limit_bytes: int | None = None
    time_budget_s: float | None = None
    rotate: int = 1
    cuda_graph: int = 0
    repeat: int = 1
    contend: LoadSpec | None = None
    """None: no load, no such variants."""
    engines: tuple[str, ...] = ("torch",)
    """Two are two interleaved variants, ``engine=torch`` and ``engine=nccl``."""
    init_only: bool = False
    """Its rows go to init.csv (colbench.commands.sweep.setup)."""
    register: str = "none"
    """colbench.direct.register reads it."""


@dataclass(frozen=True)
class LaunchConfig:
    """How ranks are started, and how long they may take."""

    backend: Backend = "auto"
    nprocs: int | None = None
    timeout_s: float = 300.0
    """torch's process groups get a little more, so colbench reports first (see
    colbench.host.watchdog)."""
    init_timeout_s: float = 120.0
    ranks_per_gpu: int = 1
    debug: bool = False
    env_axes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(variable, values) of each --env axis (and --cta-policy's)."""
    interpreters: tuple[tuple[str, str], ...] = ()
    """(name, interpreter) of each --python variant."""
    interleave: bool = True
    """See colbench.host.turns."""
    nccl_probe: bool = True
    """See colbench.commands.sweep.probe."""


@dataclass(frozen=True)
class OutputConfig:
    """What is written and shown."""

    out_dir: str | None = None
    """Default ``<results_root>/<timestamp>-<ops>-<backend>``."""
    results_root: str = "results"
    progress: bool | None = None
    table: bool = True
    plot: bool = False
    per_rank: bool = False
    ceiling_gbps: float | None = None
    output_file: str | None = None
    """Absolute, ending in .json."""
    per_iter_timing: bool = False
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
            mine = {k: values.pop(k) for k in list(values) if k in _FIELDS[kind]}
            parts[name] = dataclasses.replace(getattr(self, name), **mine)
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
