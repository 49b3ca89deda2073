"""The core of ``colbench sweep``'s options, first in its ``--help``: which collectives, at
which sizes, types, reductions and root, in which placement, and how each size is timed,
checked and averaged (nccl-tests' own flags, most of them); with the parsers and checks
every option of the sweep's table names.

:class:`CoreOptions` is the head of the one table, :class:`colbench.config.options.SweepOptions`,
which extends it: a dataclass lists its base's fields first, so ``--help``, suites and
docs/options.md keep the table's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from colbench.bench import ops
from colbench.bench.ops.dtypes import REDOPS, parse_dtypes, parse_redops
from colbench.config.option_table import option
from colbench.config.sizes import parse_sizes
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
    for name in AVERAGES:
        if key == name:
            return name
    raise UsageError(f"bad --average {text!r}: choose avg, min, max or rank0 (or nccl-tests' 0-3)")


def check_passes(value: int) -> int:
    """``--check N`` (nccl-tests' -c): passes of fill, run once and verify; 0 none."""
    if not 0 <= value <= MAX_CHECK_PASSES:
        raise UsageError(f"--check takes 0 to {MAX_CHECK_PASSES} passes, got {value}")
    return value


def parse_collectives(text: str) -> tuple[ops.Collective, ...]:
    """``--op``: collectives; a reduction's name (nccl-tests' ``--op sum``) is refused with
    where the reduction goes here."""
    for name in (n.strip().lower() for n in text.split(",")):
        if name in (*REDOPS, "mulsum"):
            raise UsageError(
                f"--op {name}: --op names the collective here (e.g. --op all_reduce); the "
                f"reduction, nccl-tests' -o/--op, is -o/--redop {name}"
            )
    return ops.parse_ops(text)


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


def one_of(flag: str, allowed: tuple[str, ...]) -> Callable[[str], Any]:
    """A converter that refuses a value outside ``allowed``, naming ``flag``."""

    def checked(value: str) -> Any:
        if value not in allowed:
            raise UsageError(f"bad {flag} {value!r}: use {', '.join(allowed)}")
        return value

    return checked


def optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert``, passing an unset (None) value through."""
    return lambda value: None if value is None else convert(value)


def parse_split(text: str) -> tuple[Literal["div", "mod"], int]:
    """``--split``: ``mod:K`` or ``div:K`` (nccl-tests' NCCL_TESTS_SPLIT "MOD K", "%K",
    "DIV K" and "/K" too) -> (kind, K)."""
    key = text.strip().lower().replace(" ", "")
    for kind, spellings in (("mod", ("mod:", "mod", "%")), ("div", ("div:", "div", "/"))):
        for prefix in spellings:
            rest = key.removeprefix(prefix)
            if rest != key and rest.isdigit() and int(rest) >= 1:
                return ("mod" if kind == "mod" else "div"), int(rest)
    raise UsageError(
        f"bad --split {text!r}: use mod:K (K groups of equal rank mod K) or div:K "
        "(contiguous groups of K), K a whole number of 1 or more"
    )


def parse_placements(text: str) -> tuple[str, ...]:
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    aliases = {"out-of-place": "out", "in-place": "in", "oop": "out", "ip": "in", "both": "out,in"}
    expanded: list[str] = []
    for name in names:
        expanded.extend(aliases.get(name, name).split(","))
    if not expanded or any(p not in PLACEMENTS for p in expanded):
        raise UsageError(f"bad --placement {text!r}: use out, in or out,in")
    return tuple(p for p in PLACEMENTS if p in expanded)


@dataclass(frozen=True)
class CoreOptions:
    """The head of sweep's options table (:class:`colbench.config.options.SweepOptions`)."""

    op: str = option(
        "all_reduce",
        "--op",
        help="Collectives, comma list or 'all': "
        + ", ".join(ops.BY_NAME)
        + ". Unlike nccl-tests' --op (the reduction, -o/--redop here), --op names the "
        "collective.",
        concern="measure",
        yaml="list",
        parse=parse_collectives,
    )
    sizes: str | None = option(
        None,
        "--sizes",
        "-s",
        help="Range 1K-1G (doubling) or list 1K,4K,1M (binary units). Default 1K-16M "
        "(nccl-tests' is 32M only).",
        concern="measure",
        yaml="list",
        parse=parse_sizes,
        to=None,
    )
    minbytes: str | None = option(
        None,
        "--minbytes",
        "-b",
        help="Smallest size (binary units), as nccl-tests' -b: with -e and no -f, sizes step "
        "by -i (1M), as there.",
        concern="measure",
        nccl_tests="-b",
        yaml="size",
        to=None,
    )
    maxbytes: str | None = option(
        None,
        "--maxbytes",
        "-e",
        help="Largest size (binary units), as nccl-tests' -e.",
        concern="measure",
        nccl_tests="-e",
        yaml="size",
        to=None,
    )
    factor: int | None = option(
        None,
        "--factor",
        "--stepfactor",
        "-f",
        help="Multiply the size by this whole number per step; 1 steps by -i instead (as "
        "nccl-tests). Default 2 with --sizes MIN-MAX, 1 with -b/-e (nccl-tests' default).",
        concern="measure",
        nccl_tests="-f",
        to=None,
    )
    step: str | None = option(
        None,
        "--step",
        "--stepbytes",
        "-i",
        help="Add this many bytes per step instead (default 1M where -f is 1, as nccl-tests).",
        concern="measure",
        nccl_tests="-i",
        yaml="size",
        to=None,
    )
    dtype: str = option(
        "float32",
        "--dtype",
        "--datatype",
        "-d",
        help="Element types, comma list or 'all': float32, float16, bfloat16, float64, "
        "int8, uint8, int32, int64 (nccl-tests' float, half, double work too; its uint32, "
        "uint64, f8e4m3, f8e5m2 are not here, nor in 'all').",
        concern="measure",
        nccl_tests="-d",
        yaml="list",
        parse=parse_dtypes,
    )
    redop: str = option(
        "sum",
        "--redop",
        "-o",
        help="Reduction ops, comma list or 'all': sum, prod, min, max, avg (float only); "
        "nccl-tests' --op, whose mulsum is not here.",
        concern="measure",
        nccl_tests="-o",
        yaml="list",
        parse=parse_redops,
    )
    root: int = option(
        0,
        "--root",
        "-r",
        help="Root rank of broadcast, reduce, gather, scatter; -1 every rank in turn (as "
        "nccl-tests).",
        concern="measure",
        nccl_tests="-r",
    )
    placement: str = option(
        "out,in",
        "--placement",
        help="out (separate buffers), in (in-place form) or out,in.",
        concern="measure",
        yaml="list",
        parse=parse_placements,
        to="placements",
        convert=parse_placements,
    )
    iters: int = option(
        20, "--iters", "-n", help="Timed calls per size.", concern="measure", nccl_tests="-n"
    )
    repeat: int = option(
        1,
        "--repeat",
        "--run_cycles",
        "-N",
        help="Measure the whole sweep this many times, interleaved (every size once, then "
        "again); every sample is a CSV row with its repeat index (for colbench gate). "
        "nccl-tests' -N; its 0 (forever) is refused.",
        concern="measure",
        nccl_tests="-N",
    )
    init_only: bool = option(
        False,
        "--init-only",
        help="Measure communicator set-up only (PARAM's --init-only): each repeat makes a "
        "fresh communicator of every rank (torch: a new group and its first call, where "
        "torch starts NCCL lazily; --engine nccl: NCCL's unique-id bootstrap and "
        "ncclCommInitRank), timed, with the device memory it took; rows in init.csv, no "
        "collective rows. Variants run one after the other.",
        concern="measure",
    )
    warmup: int = option(
        5,
        "--warmup",
        "--warmup_iters",
        "-w",
        help="Untimed calls per size before timing. Default 5; nccl-tests' is 1.",
        concern="measure",
        nccl_tests="-w",
    )
    check: int = option(
        1,
        "--check",
        "-c",
        help="Passes of fill, run once, verify after each size's timing (as nccl-tests): "
        "1 (default), 0 none.",
        concern="measure",
        nccl_tests="-c",
        yaml="check",
        convert=check_passes,
    )
    average: str = option(
        "avg",
        "--average",
        "-a",
        help="Combine ranks' times: avg, min, max, rank0 (or nccl-tests 1, 2, 3, 0).",
        concern="measure",
        nccl_tests="-a",
        yaml="list",
        parse=parse_average,
        convert=parse_average,
    )
