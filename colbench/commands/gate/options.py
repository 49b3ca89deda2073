"""``colbench gate``'s options, declared once: its Typer parameters and its section of
docs/options.md come from :class:`GateOptions`. Free of pandas and numpy: --help is quick.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from colbench.commands.gate.checks import (
    DEFAULT_ALPHA,
    DEFAULT_KEEP,
    DEFAULT_MAX_CV,
    DEFAULT_MIN_BASELINE_RUNS,
    DEFAULT_POWER,
)
from colbench.config.option_table import Option, judge, output, rows_of


@dataclass(frozen=True)
class GateOptions:
    """The options of ``colbench gate`` beyond the runs (see docs/gate.md)."""

    # A list because Typer repeats an option only into a list; the default is None.
    check: list[str] | None = judge(  # noqa: RUF009
        None,
        "--check",
        help="METRIC:+X%, METRIC:-X% or METRIC:VALUE; repeatable. Metrics: busbw_gbps, "
        "algbw_gbps, time_us, time_min_us, time_p50_us, time_p99_us, time_max_us (or "
        "without the unit: busbw, time_p50, ...).",
    )
    min_size: str | None = judge(
        None, "--min-size", help="Judge performance only at size_bytes >= this (1K=1024)."
    )
    max_size: str | None = judge(
        None, "--max-size", help="Judge performance only at size_bytes <= this."
    )
    alpha: float = judge(DEFAULT_ALPHA, "--alpha", help="Significance level of the rank test.")
    max_cv_pct: float = judge(
        DEFAULT_MAX_CV * 100,
        "--max-cv-pct",
        help="Warn when a row's samples vary more than this (%).",
    )
    min_avg_busbw_gbps: str | None = judge(
        None,
        "--min-avg-busbw-gbps",
        help="Fail when an op's average busbw is below this value itself (GB/s). Without "
        "it, NCCL_TESTS_MIN_BW is the floor as in nccl-tests: the average must reach 0.9x "
        "its value.",
    )
    power: float = judge(
        DEFAULT_POWER, "--power", help="Power the detectable-slowdown figures are stated at."
    )
    fwer: str = judge(
        "holm",
        "--fwer",
        help="Family-wise control over the rows and the pooled (or overall) test: holm "
        "(weighted), or none (each alone).",
    )
    min_judged: int = judge(
        1,
        "--min-judged",
        help="Fewer rows sensitive enough to judge (a sensitive pooled or overall result "
        "over at least as many rows counts too): performance inconclusive (exit 0, or 5 "
        "with --fail-inconclusive).",
    )
    fail_inconclusive: bool = judge(
        False,
        "--fail-inconclusive",
        help="Exit 5 instead of 0 when the gate passes on correctness and presence only "
        "(no baseline, another machine, or performance inconclusive; paired: no row could "
        "have seen a slowdown).",
    )
    min_baseline_runs: int = judge(
        DEFAULT_MIN_BASELINE_RUNS,
        "--min-baseline-runs",
        help="Judge performance on the between-run drift of the baseline's runs when its "
        "window (--keep) holds at least this many; fewer: within-run spread only.",
    )
    any_machine: bool = judge(
        False,
        "--any-machine",
        help="Judge performance against a baseline from another machine (CPU, cores, "
        "GPU or versions differ) instead of marking it not comparable.",
    )
    missing_baseline_ok: bool = judge(
        False,
        "--missing-baseline-ok",
        help="A BASELINE directory that does not exist judges the current run alone "
        "(correctness, presence); performance not judged.",
    )
    accept_incomplete_baseline: bool = judge(
        False,
        "--accept-incomplete-baseline",
        help="Judge by a baseline whose run is incomplete (killed, failed or cut short: "
        "fewer rows than it planned); refused without it (exit 2).",
    )
    allow_emulated: bool = judge(
        False,
        "--allow-emulated",
        help="Judge rows of an emulated fabric (sweep --ranks-per-gpu) against rows of a "
        "real one (refused without it: emulated times measure the emulation).",
    )
    variant_a: str | None = judge(
        None, "--variant-a", help="Paired gate: the reference variant of the one run BASELINE."
    )
    variant_b: str | None = judge(
        None, "--variant-b", help="Paired gate: the variant judged against --variant-a."
    )
    report: str | None = output(None, "--report", help="Write a Markdown report here.")
    junit: str | None = output(None, "--junit", help="Write JUnit XML here (one case per row).")
    update: bool = output(
        False,
        "--update-baseline",
        help="Accept CURRENT as the new baseline (copied into BASELINE); refused when it "
        "has wrong elements or oom rows, and (exit 1) from a window of --keep above 1 when "
        "it fails the gate.",
    )
    keep: int = output(
        DEFAULT_KEEP,
        "--keep",
        help="With --update-baseline: keep the last K accepted runs pooled (a rolling "
        "window) instead of replacing the baseline.",
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench gate``, in the order ``--help`` lists them."""
    return rows_of(GateOptions)
