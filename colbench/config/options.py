"""The one table of ``colbench sweep``'s options: the fields of :class:`SweepOptions` (its
base :class:`colbench.config.core_options.CoreOptions`'s first), each a type, a default and
what :func:`~colbench.config.option_table.option` attaches (flags, help, YAML reading, the
config field it becomes and how). ``sweep``/``run``/``crosscheck``'s parameters, the suite
schema (colbench.config.suite), the config (colbench.config.validate.from_options) and
docs/options.md (``make docs``; a test fails until it is rerun) are derived from it, so an
option is one row here beside the config field it feeds.

Values here are what a user typed (``"1K-16M"``, ``"out,in"``); colbench.config.model turns
them into the typed, validated sweep.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from colbench.bench.ops.splits import given as given_splits
from colbench.bench.ops.splits import parse as parse_splits
from colbench.config.contend import parse_contend
from colbench.config.core_options import CoreOptions
from colbench.config.model import (
    BACKENDS,
    DEFAULT_INIT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    EMULATED_INIT_TIMEOUT_S,
    EMULATED_TIMEOUT_S,
    MEMORY_CHECKS,
    NO_TIMEOUT_S,
    check_json_path,
    parse_engines,
    parse_split,
    per_iter_flag,
)
from colbench.config.option_table import Option, launch, measure, one_of, optional, output, rows_of
from colbench.config.sizes import parse_size
from colbench.config.variants import merge_axes, parse_axes, parse_interpreters
from colbench.direct.knobs import parse_cta_policies, parse_register


@dataclass(frozen=True)
class SweepOptions(CoreOptions):
    """sweep's options as given: flags, a suite file, or both (flags win)."""

    backend: str = launch(
        "auto",
        "--backend",
        help="auto (NCCL if GPUs, else gloo), nccl or gloo.",
        choices=BACKENDS,
        convert=one_of("--backend", BACKENDS),
    )
    nprocs: int | None = launch(
        None,
        "--nprocs",
        help="Ranks to spawn without a launcher (default: GPUs for NCCL, 2 for gloo).",
    )
    parallel_init: int = launch(
        0,
        "--parallel_init",
        "-p",
        help="nccl-tests' parallel init (0/1): taken, and changes nothing here, where every "
        "rank is a process that starts its own communicator. Ranks: --nprocs.",
        nccl_tests="-p",
        to=None,
    )
    ranks_per_gpu: int = launch(
        1,
        "--ranks-per-gpu",
        help="NCCL on fewer GPUs than ranks: K ranks share each GPU, each an emulated node of "
        "its own (NCCL_HOSTID per rank, NCCL's network transport over loopback, kernels "
        "time-sliced). Tests NCCL's multi-rank code and algorithms; not a fabric measurement.",
    )
    timeout: float | None = launch(
        None,
        "--timeout",
        "-T",
        help="Seconds any one step (a timed batch, a barrier, a verification) may take: a "
        f"hang ends the run with exit 4 naming the stuck ranks, op and size. Default "
        f"{DEFAULT_TIMEOUT_S:g}, {EMULATED_TIMEOUT_S:g} with --ranks-per-gpu above 1; 0 "
        f"none, as nccl-tests (torch needs a limit: {NO_TIMEOUT_S / 86400:g} days).",
        nccl_tests="-T",
        to="timeout_s",
    )
    init_timeout: float | None = launch(
        None,
        "--init-timeout",
        help="Seconds for every rank to join the rendezvous, and for the communicator to "
        f"start. Default {DEFAULT_INIT_TIMEOUT_S:g}, {EMULATED_INIT_TIMEOUT_S:g} with "
        "--ranks-per-gpu above 1.",
        to="init_timeout_s",
    )
    group_size: int | None = measure(
        None,
        "--group-size",
        help="Split the world into contiguous groups of this many ranks, all running "
        "each collective at once (busbw uses the group size as n).",
        nccl_tests="NCCL_TESTS_SPLIT",
        to=None,
    )
    split: str | None = measure(
        None,
        "--split",
        help="Split the world like nccl-tests' NCCL_TESTS_SPLIT: mod:K, K groups of the ranks "
        "with equal rank mod K (on K-GPU nodes, one rail each); div:K, contiguous groups of "
        "K (as --group-size K). Rows carry it in their split column.",
        nccl_tests="NCCL_TESTS_SPLIT",
        parse=parse_split,
        to=None,
    )
    seed: int = measure(
        0,
        "--seed",
        help="Seed of the deterministic input data and of all_to_allv's split generators.",
    )
    splits: str = measure(
        "uniform",
        "--splits",
        help="all_to_allv's traffic pattern: uniform, spread:S (nccl-tests' generated "
        "pattern, S 0-1), zipf:ALPHA (receivers skewed by expert popularity), "
        "topk:TOKENS,HIDDEN,EXPERTS,K (top-k routing of each rank's tokens) or file:PATH "
        "(an nccl-tests traffic matrix, rows = senders). A size S scales it so the mean "
        "rank sends S bytes.",
        nccl_tests="NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
        parse=parse_splits,
        convert=given_splits,
        settled=True,
    )
    out: str | None = output(
        None, "--out", help="Run directory (must be new or empty).", to="out_dir"
    )
    results_dir: str = output(
        "results", "--results-dir", help="Parent of default run directories.", to="results_root"
    )
    progress: bool | None = output(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: when a terminal)."
    )
    memory_check: str = measure(
        "skip",
        "--memory-check",
        help="Before allocating: skip sizes that do not fit in memory (refused when none fits), "
        "refuse the sweep, or off.",
        choices=MEMORY_CHECKS,
        convert=one_of("--memory-check", MEMORY_CHECKS),
    )
    memory_limit: str | None = measure(
        None,
        "--memory-limit",
        help="Cap on buffer memory per rank, e.g. 512M (binary).",
        yaml="size",
        to="memory_limit_bytes",
        convert=optional(parse_size),
    )
    time_budget: float | None = measure(
        None,
        "--time-budget",
        help="Seconds of timed calls per size: iterations adapt to fill it "
        "(--iters is then the minimum).",
        to="time_budget_s",
    )
    rotate: int = measure(
        1, "--rotate", help="Cycle N buffer sets call by call so caches do not help."
    )
    cuda_graph: int = measure(
        0,
        "--cuda-graph",
        "--cudagraph",
        "-G",
        help="NCCL: capture the timed batch (-n calls) in a CUDA graph and launch it this "
        "many times (nccl-tests' -G N), to see small-message latency without torch's "
        "per-call launch cost; 0 off.",
        nccl_tests="-G",
    )
    contend: str | None = measure(
        None,
        "--contend",
        help="Measure beside a load, as two interleaved variants (contend=none and "
        "contend=LOAD): gemm:N[:DTYPE], an N x N matmul loop (a second CUDA stream; a "
        "thread per CPU rank), or OP:SIZE[:DTYPE], a second collective looping on its own "
        "process group, e.g. all_to_all:1M (docs/contend.md).",
        convert=optional(parse_contend),
    )
    engine: str = measure(
        "torch",
        "--engine",
        help="What makes the calls: torch (torch.distributed) or nccl (NCCL itself through "
        "nccl4py, as nccl-tests calls it: pip install 'colbench[nccl]'); torch,nccl runs "
        "both as interleaved variants, and the summary gives torch's cost per call.",
        to="engines",
        convert=parse_engines,
    )
    register: str = measure(
        "none",
        "--register",
        "--local_register",
        "-R",
        help="--engine nccl: register every buffer with NCCL (nccl-tests' -R): local "
        "(1, ncclCommRegister) or symmetric (2, symmetric windows, NCCL 2.27+); none (0). "
        "Where NCCL cannot, the rows say unsupported and why.",
        nccl_tests="-R",
        convert=parse_register,
        settled=True,
    )
    cta_policy: str | None = launch(
        None,
        "--cta-policy",
        "--cta_policy",
        "-x",
        help="NCCL_CTA_POLICY variants (nccl-tests' -x): 0 default, 1 efficiency (NCCL "
        "2.27+), 2 zero (2.28+), or a list, e.g. 0,1; each row's variant says which, and "
        "NCCL's probe log what it read.",
        nccl_tests="-x",
        to=None,
        convert=optional(parse_cta_policies),
    )
    debug: bool = launch(
        False, "--debug", help="NCCL: dump torch's flight recorder into the run dir on timeout."
    )
    table: bool = output(True, "--table/--no-table", help="Print the nccl-tests style table.")
    env: list[str] | None = launch(  # noqa: RUF009 (None; a list only when given)
        None,
        "--env",
        help="Variant axis KEY=V1,V2 (repeatable): the sweep runs once per combination, "
        "each in fresh ranks started with those variables, e.g. --env NCCL_ALGO=Ring,Tree.",
        yaml="variants",
        yaml_keys=("variants", "env"),
        to="env_axes",
        convert=lambda given: parse_axes(given or []),
    )
    python: str | None = launch(
        None,
        "--python",
        help="Interpreter variants NAME=PATH,NAME=PATH: each variant's ranks run in that "
        "Python (e.g. two virtual environments with two torch builds).",
        to="interpreters",
        convert=parse_interpreters,
    )
    interleave: bool = launch(
        True,
        "--interleave/--no-interleave",
        help="Variants' ranks alive at once, taking turns per size and repeat, so they "
        "share the machine's drift; --no-interleave runs one variant's sweep after another.",
    )
    nccl_probe: bool = launch(
        True,
        "--nccl-probe/--no-nccl-probe",
        help="NCCL: before each variant, run a probe world (each row once, NCCL's TUNING log "
        "on) so every row records the algorithm and protocol NCCL chose (nccl_algo, "
        "nccl_proto); --no-nccl-probe saves its start-up and leaves them empty.",
    )
    plot: bool = output(
        False,
        "--plot/--no-plot",
        help="Write busbw.png and time.png into the run dir. Off by default, as nccl-tests "
        "draws nothing: a sweep is read as its table (p2p and health, read as heatmaps, "
        "draw theirs by default).",
    )
    per_rank: bool = output(
        False,
        "--per-rank",
        help="Also write per_rank.csv: every rank's batch time and barrier wait per row.",
    )
    output_file: str | None = output(
        None,
        "--output-file",
        "--output_file",
        "-J",
        help="Also write nccl-tests' JSON report to FILE.json (nccl-tests' layout and "
        "quirks, docs/nccl-tests.md#json-report); an existing file is kept and FILE.json.0, "
        ".1... written instead, as nccl-tests does. One --op, one repeat, no variants.",
        nccl_tests="-J",
        convert=optional(check_json_path),
    )
    per_iter_timing: int = output(
        0,
        "--per-iter-timing",
        "--per_iter_timing",
        "-I",
        help="1: the -J report gets nccl-tests' per-iteration blocks (every timed call's "
        "time, the slowest rank's and each rank's); needs -J, not --cuda-graph.",
        nccl_tests="-I",
        convert=per_iter_flag,
    )
    ceiling_gbps: float | None = output(
        None,
        "--ceiling-gbps",
        help="The rate (GB/s, one direction, per rank) that bounds busbw, for the "
        "ceiling_gbps and pct_of_ceiling columns, replacing the one read from the hardware "
        "(docs/explain.md).",
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option, in the order ``--help`` lists them."""
    return rows_of(SweepOptions)


def merge(file_values: Mapping[str, Any], given: Mapping[str, Any]) -> SweepOptions:
    """Defaults, then a suite file's values, then the flags given on the command line; an
    ``--env`` flag replaces the file's values for its variable only."""
    values = {**file_values, **given}
    if "env" in given and file_values.get("env"):
        merged = merge_axes(parse_axes(file_values["env"]), parse_axes(given["env"] or []))
        values["env"] = [f"{key}={','.join(vals)}" for key, vals in merged]
    return replace(SweepOptions(), **values)
