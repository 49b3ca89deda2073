"""The one table of ``colbench sweep``'s options.

Each option is a field of :class:`SweepOptions`: its type and default are the field's,
and :func:`~colbench.config.option_table.option` (the machinery every options table shares)
attaches the rest (flags, help, how a YAML value is read, the parser its text must pass,
the config field it becomes and how). The Typer parameters of ``sweep``/``run``/
``crosscheck``, the YAML schema of suites (colbench.config.suite), the config
(colbench.config.build.from_options, through ``config_values``) and docs/options.md are all
derived from this table, so adding an option is one row here beside the config field it
feeds (then ``make docs`` rewrites the docs, see colbench.cli.docgen; a test fails until
it has).

Values here are what a user typed (``"1K-16M"``, ``"out,in"``); colbench.config.model turns
them into the typed, validated sweep.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from colbench.bench import ops
from colbench.bench.ops.dtypes import REDOPS, parse_dtypes, parse_redops
from colbench.bench.ops.splits import given as given_splits
from colbench.bench.ops.splits import parse as parse_splits
from colbench.config import option_table
from colbench.config.contend import parse_contend
from colbench.config.nccl_flags import Refusal
from colbench.config.option_table import Option, option, rows_of
from colbench.config.sizes import parse_size, parse_sizes
from colbench.config.variants import parse_axes, parse_interpreters
from colbench.direct.engine import parse_engines
from colbench.direct.knobs import parse_cta_policies, parse_register
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
class SweepOptions:
    """sweep's options as given: flags, a suite file, or both (flags win)."""

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
    backend: str = option(
        "auto",
        "--backend",
        help="auto (NCCL if GPUs, else gloo), nccl or gloo.",
        concern="launch",
        choices=BACKENDS,
        convert=one_of("--backend", BACKENDS),
    )
    nprocs: int | None = option(
        None,
        "--nprocs",
        help="Ranks to spawn without a launcher (default: GPUs for NCCL, 2 for gloo).",
        concern="launch",
    )
    parallel_init: int = option(
        0,
        "--parallel_init",
        "-p",
        help="nccl-tests' parallel init (0/1): taken, and changes nothing here, where every "
        "rank is a process that starts its own communicator. Ranks: --nprocs.",
        concern="launch",
        nccl_tests="-p",
        to=None,
    )
    ranks_per_gpu: int = option(
        1,
        "--ranks-per-gpu",
        help="NCCL on fewer GPUs than ranks: K ranks share each GPU, each an emulated node of "
        "its own (NCCL_HOSTID per rank, NCCL's network transport over loopback, kernels "
        "time-sliced). Tests NCCL's multi-rank code and algorithms; not a fabric measurement.",
        concern="launch",
    )
    timeout: float | None = option(
        None,
        "--timeout",
        "-T",
        help="Seconds any one step (a timed batch, a barrier, a verification) may take: a "
        f"hang ends the run with exit 4 naming the stuck ranks, op and size. Default "
        f"{DEFAULT_TIMEOUT_S:g}, {EMULATED_TIMEOUT_S:g} with --ranks-per-gpu above 1; 0 "
        f"none, as nccl-tests (torch needs a limit: {NO_TIMEOUT_S / 86400:g} days).",
        concern="launch",
        nccl_tests="-T",
        to="timeout_s",
    )
    init_timeout: float | None = option(
        None,
        "--init-timeout",
        help="Seconds for every rank to join the rendezvous, and for the communicator to "
        f"start. Default {DEFAULT_INIT_TIMEOUT_S:g}, {EMULATED_INIT_TIMEOUT_S:g} with "
        "--ranks-per-gpu above 1.",
        concern="launch",
        to="init_timeout_s",
    )
    group_size: int | None = option(
        None,
        "--group-size",
        help="Split the world into contiguous groups of this many ranks, all running "
        "each collective at once (busbw uses the group size as n).",
        concern="measure",
        nccl_tests="NCCL_TESTS_SPLIT",
        to=None,
    )
    split: str | None = option(
        None,
        "--split",
        help="Split the world like nccl-tests' NCCL_TESTS_SPLIT: mod:K, K groups of the ranks "
        "with equal rank mod K (on K-GPU nodes, one rail each); div:K, contiguous groups of "
        "K (as --group-size K). Rows carry it in their split column.",
        concern="measure",
        nccl_tests="NCCL_TESTS_SPLIT",
        parse=parse_split,
        to=None,
    )
    seed: int = option(
        0,
        "--seed",
        help="Seed of the deterministic input data and of all_to_allv's split generators.",
        concern="measure",
    )
    splits: str = option(
        "uniform",
        "--splits",
        help="all_to_allv's traffic pattern: uniform, spread:S (nccl-tests' generated "
        "pattern, S 0-1), zipf:ALPHA (receivers skewed by expert popularity), "
        "topk:TOKENS,HIDDEN,EXPERTS,K (top-k routing of each rank's tokens) or file:PATH "
        "(an nccl-tests traffic matrix, rows = senders). A size S scales it so the mean "
        "rank sends S bytes.",
        concern="measure",
        nccl_tests="NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
        parse=parse_splits,
        convert=given_splits,
    )
    out: str | None = option(
        None,
        "--out",
        help="Run directory (must be new or empty).",
        concern="output",
        to="out_dir",
    )
    results_dir: str = option(
        "results",
        "--results-dir",
        help="Parent of default run directories.",
        concern="output",
        to="results_root",
    )
    progress: bool | None = option(
        None,
        "--progress/--no-progress",
        help="Progress bar on stderr (default: when a terminal).",
        concern="output",
    )
    memory_check: str = option(
        "skip",
        "--memory-check",
        help="Before allocating: skip sizes that do not fit in memory, refuse the sweep, or off.",
        concern="measure",
        choices=MEMORY_CHECKS,
        convert=one_of("--memory-check", MEMORY_CHECKS),
    )
    memory_limit: str | None = option(
        None,
        "--memory-limit",
        help="Cap on buffer memory per rank, e.g. 512M (binary).",
        concern="measure",
        yaml="size",
        to="memory_limit_bytes",
        convert=optional(parse_size),
    )
    time_budget: float | None = option(
        None,
        "--time-budget",
        help="Seconds of timed calls per size: iterations adapt to fill it "
        "(--iters is then the minimum).",
        concern="measure",
        to="time_budget_s",
    )
    rotate: int = option(
        1,
        "--rotate",
        help="Cycle N buffer sets call by call so caches do not help.",
        concern="measure",
    )
    cuda_graph: int = option(
        0,
        "--cuda-graph",
        "--cudagraph",
        "-G",
        help="NCCL: capture the timed batch (-n calls) in a CUDA graph and launch it this "
        "many times (nccl-tests' -G N), to see small-message latency without torch's "
        "per-call launch cost; 0 off.",
        concern="measure",
        nccl_tests="-G",
    )
    contend: str | None = option(
        None,
        "--contend",
        help="Measure beside a load, as two interleaved variants (contend=none and "
        "contend=LOAD): gemm:N[:DTYPE], an N x N matmul loop (a second CUDA stream; a "
        "thread per CPU rank), or OP:SIZE[:DTYPE], a second collective looping on its own "
        "process group, e.g. all_to_all:1M (docs/contend.md).",
        concern="measure",
        convert=optional(parse_contend),
    )
    # The direct-NCCL engine (issue 37; colbench.direct).
    engine: str = option(
        "torch",
        "--engine",
        help="What makes the calls: torch (torch.distributed) or nccl (NCCL itself through "
        "nccl4py, as nccl-tests calls it: pip install 'colbench[nccl]'); torch,nccl runs "
        "both as interleaved variants, and the summary gives torch's cost per call.",
        concern="measure",
        to="engines",
        convert=parse_engines,
    )
    # --- NCCL's newer knobs (issue 37 item 4; colbench.direct.knobs): one block, to move
    # whole when the options table is split. ---
    register: str = option(
        "none",
        "--register",
        "--local_register",
        "-R",
        help="--engine nccl: register every buffer with NCCL (nccl-tests' -R): local "
        "(1, ncclCommRegister) or symmetric (2, symmetric windows, NCCL 2.27+); none (0). "
        "Where NCCL cannot, the rows say unsupported and why.",
        concern="measure",
        nccl_tests="-R",
        convert=parse_register,
    )
    cta_policy: str | None = option(
        None,
        "--cta-policy",
        "--cta_policy",
        "-x",
        help="NCCL_CTA_POLICY variants (nccl-tests' -x): 0 default, 1 efficiency (NCCL "
        "2.27+), 2 zero (2.28+), or a list, e.g. 0,1; each row's variant says which, and "
        "NCCL's probe log what it read.",
        concern="launch",
        nccl_tests="-x",
        to=None,
        convert=optional(parse_cta_policies),
    )
    # --- end of NCCL's newer knobs ---
    debug: bool = option(
        False,
        "--debug",
        help="NCCL: dump torch's flight recorder into the run dir on timeout.",
        concern="launch",
    )
    table: bool = option(
        True, "--table/--no-table", help="Print the nccl-tests style table.", concern="output"
    )
    env: list[str] | None = option(  # noqa: RUF009 (None; a list only when given)
        None,
        "--env",
        help="Variant axis KEY=V1,V2 (repeatable): the sweep runs once per combination, "
        "each in fresh ranks started with those variables, e.g. --env NCCL_ALGO=Ring,Tree.",
        concern="launch",
        yaml="variants",
        yaml_keys=("variants", "env"),
        to="env_axes",
        convert=lambda given: parse_axes(given or []),
    )
    python: str | None = option(
        None,
        "--python",
        help="Interpreter variants NAME=PATH,NAME=PATH: each variant's ranks run in that "
        "Python (e.g. two virtual environments with two torch builds).",
        concern="launch",
        to="interpreters",
        convert=parse_interpreters,
    )
    interleave: bool = option(
        True,
        "--interleave/--no-interleave",
        help="Variants' ranks alive at once, taking turns per size and repeat, so they "
        "share the machine's drift; --no-interleave runs one variant's sweep after another.",
        concern="launch",
    )
    nccl_probe: bool = option(
        True,
        "--nccl-probe/--no-nccl-probe",
        help="NCCL: before each variant, run a probe world (each row once, NCCL's TUNING log "
        "on) so every row records the algorithm and protocol NCCL chose (nccl_algo, "
        "nccl_proto); --no-nccl-probe saves its start-up and leaves them empty.",
        concern="launch",
    )
    plot: bool = option(
        False,
        "--plot/--no-plot",
        help="Write busbw.png and time.png into the run dir. Off by default, as nccl-tests "
        "draws nothing: a sweep is read as its table (p2p and health, read as heatmaps, "
        "draw theirs by default).",
        concern="output",
    )
    per_rank: bool = option(
        False,
        "--per-rank",
        help="Also write per_rank.csv: every rank's batch time and barrier wait per row.",
        concern="output",
    )
    # nccl-tests' JSON report (-J, -I): colbench.results.reporters.nccl_tests_json.
    output_file: str | None = option(
        None,
        "--output-file",
        "--output_file",
        "-J",
        help="Also write nccl-tests' JSON report to FILE.json (nccl-tests' layout and "
        "quirks, docs/nccl-tests.md#json-report); an existing file is kept and FILE.json.0, "
        ".1... written instead, as nccl-tests does. One --op, one repeat, no variants.",
        concern="output",
        nccl_tests="-J",
        convert=optional(check_json_path),
    )
    per_iter_timing: int = option(
        0,
        "--per-iter-timing",
        "--per_iter_timing",
        "-I",
        help="1: the -J report gets nccl-tests' per-iteration blocks (every timed call's "
        "time, the slowest rank's and each rank's); needs -J, not --cuda-graph.",
        concern="output",
        nccl_tests="-I",
        convert=per_iter_flag,
    )
    ceiling_gbps: float | None = option(
        None,
        "--ceiling-gbps",
        help="The rate (GB/s, one direction, per rank) that bounds busbw, for the "
        "ceiling_gbps and pct_of_ceiling columns, replacing the one read from the hardware "
        "(docs/explain.md).",
        concern="output",
    )


#: nccl-tests' flags that ``sweep`` does not take, each with why and what to use; the rest
#: are options above (their ``nccl_tests``). docs/nccl-tests.md's table is made of both.
_DIRECT_NCCL = "needs NCCL's own API, which torch.distributed does not expose; refused until "
REFUSED: tuple[Refusal, ...] = (
    Refusal("-t", "one rank per process here, one GPU each; use --nprocs", same=("1",)),
    Refusal("-g", "one rank per GPU here; use --nprocs", same=("1",)),
    Refusal(
        "-m",
        "torch.distributed issues one collective per call, with no NCCL group to aggregate "
        "calls in",
        same=("1",),
    ),
    Refusal(
        "-z",
        "colbench times a batch of -n calls and waits once, at its end (nccl-tests' -z 0)",
        same=("0",),
    ),
    Refusal("-y", "torch runs each collective on its process group's own stream", same=("0",)),
    Refusal(
        "-C",
        "colbench reports device time (and, on NCCL, the enqueue time of a call in enqueue_us)",
        same=("0",),
    ),
    Refusal(
        "-S",
        "rows carry no clock time; meta.json records when the run started",
        same=("0",),
    ),
    Refusal(
        "-D",
        "NCCL's device API is not reachable through torch.distributed",
        same=("0",),
    ),
    Refusal(
        "-V",
        "NCCL's device API (-D) is not reachable through torch.distributed",
        same=("16",),
    ),
    Refusal(
        "-M",
        "colbench reports no device memory use; --memory-check and --memory-limit guard allocation",
        same=("0",),
    ),
    Refusal("-u", "torch allocates aligned buffers; misaligned ones are not offered", same=("0",)),
    Refusal(
        "-K",
        "-I's summary here counts every timed iteration (per_iter_skip 0); more warm-up "
        "(-w) leaves the leading calls out of it",
        same=("0",),
    ),
)


def refusal_message(given: Mapping[str, Any]) -> str:
    """The usage error for the first refused nccl-tests flag ``given`` holds (parsed into
    :attr:`Refusal.name`), or "" when none asks for anything colbench does not do."""
    for refusal in REFUSED:
        value = given.get(refusal.name)
        if value is not None and (said := refusal.message(str(value))):
            return said
    return ""


def command_line_notes(given: Mapping[str, Any]) -> list[str]:
    """What an nccl-tests user should be told about flags that ran, given on the command line."""
    notes = []
    op = given.get("op")
    if op is not None and str(op).strip().lower() == "all" and "redop" not in given:
        notes.append(
            "--op all runs every collective: --op names the collective here; nccl-tests' "
            "--op all (every reduction) is -o all / --redop all"
        )
    if "parallel_init" in given:
        notes.append(
            "-p/--parallel_init changes nothing here: every rank is a process that starts "
            "its own communicator"
        )
    return notes


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option, in the order ``--help`` lists them."""
    return rows_of(SweepOptions)


def typer_parameters(
    rows: tuple[Option, ...] | None = None, hidden: frozenset[str] = frozenset()
) -> list[inspect.Parameter]:
    """The sweep table (or ``rows``) as keyword parameters of a Typer command."""
    return option_table.typer_parameters(table() if rows is None else rows, hidden)


def refused_parameters() -> list[inspect.Parameter]:
    """nccl-tests' flags that sweep does not take (:data:`REFUSED`), as hidden parameters:
    parsed like nccl-tests' (each takes a value), so the command can answer with the reason
    instead of click's "no such option"."""
    import typer

    return [
        inspect.Parameter(
            refusal.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                str | None, typer.Option(refusal.short, refusal.flag.long, hidden=True)
            ],
        )
        for refusal in REFUSED
    ]


def merge(file_values: Mapping[str, Any], given: Mapping[str, Any]) -> SweepOptions:
    """Defaults, then a suite file's values, then the flags given on the command line.

    An ``--env`` flag replaces the file's values for its variable only.
    """
    from colbench.config.variants import merge_axes, parse_axes

    values = {**file_values, **given}
    if "env" in given and file_values.get("env"):
        merged = merge_axes(parse_axes(file_values["env"]), parse_axes(given["env"] or []))
        values["env"] = [f"{key}={','.join(vals)}" for key, vals in merged]
    return replace(SweepOptions(), **values)
