"""What the gate judges by and what it finds: its rules, a floor's result, the whole
verdict (apart from the engine that builds it, so that the reports depend on the result
alone), and what the reports say about its statistics, worded here once so that the
console table, Markdown and JUnit never disagree about what was tested.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from colbench.commands.gate import sensitivity
from colbench.commands.gate.checks import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_CV,
    DEFAULT_MIN_BASELINE_RUNS,
    Check,
    SizeWindow,
)
from colbench.commands.gate.sensitivity import OverallResult
from colbench.commands.gate.verdict import RowResult, Verdict
from colbench.config.min_bw import BusbwFloor
from colbench.errors import UsageError
from colbench.output import plural
from colbench.stats import power, rank_tests


@dataclass(frozen=True)
class FloorResult:
    """One op's average bus bandwidth against a floor (NCCL_TESTS_MIN_BW's 0.9x rule, or
    --min-avg-busbw-gbps itself: :class:`colbench.config.min_bw.BusbwFloor` says which)."""

    op: str
    variant: str
    avg_busbw_gbps: float
    floor: BusbwFloor

    @property
    def fails(self) -> bool:
        return not self.floor.okay(self.avg_busbw_gbps)

    @property
    def label(self) -> str:
        return self.op + (f" [{self.variant}]" if self.variant else "")

    def limit_text(self) -> str:
        """The floor as the reports state it: its value, and where it comes from."""
        return f"{self.floor.floor_gbps:.4g} GB/s ({self.floor.describe()})"


@dataclass(frozen=True)
class GateRules:
    """How the gate judges, built once from its options (and checked then). Each field is
    the option of its name (colbench.commands.gate.options); ``min_runs`` is
    --min-baseline-runs, ``missing_ok`` --missing-baseline-ok, and ``floor`` every op's
    average busbw must reach: --min-avg-busbw-gbps itself, or NCCL_TESTS_MIN_BW's 0.9x."""

    checks: tuple[Check, ...]
    window: SizeWindow = field(default_factory=SizeWindow)
    alpha: float = DEFAULT_ALPHA
    max_cv: float = DEFAULT_MAX_CV
    fwer: str = "holm"
    power: float = power.DEFAULT_POWER
    min_judged: int = 1
    min_runs: int = DEFAULT_MIN_BASELINE_RUNS
    floor: BusbwFloor | None = None
    any_machine: bool = False
    missing_ok: bool = False
    accept_incomplete_baseline: bool = False

    def __post_init__(self) -> None:
        check_levels(self.alpha, self.power)
        if self.fwer not in sensitivity.FWER_CHOICES:
            raise UsageError(f"--fwer must be one of {', '.join(sensitivity.FWER_CHOICES)}")
        if self.min_runs < 3:
            raise UsageError(f"--min-baseline-runs must be >= 3, got {self.min_runs}")


def check_levels(alpha: float, power_level: float) -> None:
    """--alpha and --power are probabilities: refused outside (0, 1)."""
    for flag, value in (("--alpha", alpha), ("--power", power_level)):
        if not 0 < value < 1:
            raise UsageError(f"{flag} must be between 0 and 1, got {value:g}")


@dataclass
class GateResult:
    """The whole verdict: every joined row, the floors, and what the reports print."""

    baseline: str
    current: str
    rules: GateRules
    rows: list[RowResult]
    floors: list[FloorResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: (what, baseline value, current value) for versions, CPU and environment.
    changes: list[tuple[str, str, str]] = field(default_factory=list)
    #: Why performance was not judged at all (no baseline, another machine); "" if it was.
    not_judged: str = ""
    #: Runs in the baseline's window; ``drift`` is set when the drift test judged the rows.
    baseline_runs: int = 0
    drift: sensitivity.DriftSummary | None = None
    #: Otherwise the rows' rank tests and the pooled test (colbench.commands.gate.pooled).
    pooled: sensitivity.FamilySummary | None = None
    #: Why each current run that is not whole is not: each one fails the gate, whatever
    #: its rows say, since a run killed part way would pass on the rows it kept.
    incomplete: list[str] = field(default_factory=list)

    @property
    def summary(self) -> sensitivity.FamilySummary | None:
        return self.drift or self.pooled

    @property
    def family(self) -> int:
        """Rows judged on performance (Holm's m)."""
        return self.summary.family if self.summary else 0

    @property
    def overall(self) -> list[sensitivity.OverallResult]:
        """One per relative check: the drift test's overall statistic, or the pooled test."""
        return self.summary.overall if self.summary else []

    @property
    def failures(self) -> int:
        """Failing rows, failing average-bandwidth floors and a failing overall result."""
        overall = sum(o.fails for o in self.overall)
        rows = sum(r.fails for r in self.rows) + sum(f.fails for f in self.floors)
        return rows + overall + len(self.incomplete)

    @property
    def passed(self) -> bool:
        return self.failures == 0

    @property
    def sensitive(self) -> list[RowResult]:
        """Judged rows that could have seen a slowdown (power.insensitive is false)."""
        return [r for r in self.rows if r.judged and r.detectable is not None]

    @property
    def too_noisy(self) -> int:
        return sum(r.judged and r.detectable is None for r in self.rows)

    @property
    def performance_checked(self) -> bool:
        """True when a relative check was asked for and performance could be judged."""
        return not self.not_judged and any(c.relative for c in self.rules.checks)

    @property
    def inconclusive(self) -> bool:
        """Performance was asked for, but too few rows could have seen a slowdown (an
        overall statistic that could, over at least that many rows, is enough)."""
        if not self.performance_checked or len(self.sensitive) >= self.rules.min_judged:
            return False
        overall = self.summary.sensitive_overall if self.summary else None
        return overall is None or overall.rows < self.rules.min_judged

    @property
    def passed_on_presence_only(self) -> bool:
        """Passed, but performance was not judged (whatever the checks) or inconclusive."""
        return self.passed and bool(self.not_judged or self.inconclusive)

    def counts(self) -> dict[Verdict, int]:
        found = Counter(row.verdict for row in self.rows)
        return {v: found[v] for v in Verdict if found[v]}


def rule_text(result: GateResult) -> str:
    if result.drift is not None:
        return (
            f"each row's median is compared with the medians of the baseline's "
            f"{result.drift.runs} runs; a change beyond its limit is real when a one-sided "
            "t test of the current median against the runs' mean and between-run spread "
            f"(log scale, {result.drift.runs - 1} dof) finds it beyond the mean moved by the "
            f"limit (p <= {result.rules.alpha:g})"
        )
    text = (
        "medians of the samples are compared; a change beyond its limit is real when a "
        "one-sided exact Mann-Whitney U test finds the current samples beyond the baseline's "
        f"moved by the limit (p <= {result.rules.alpha:g}); with too few samples for that test, "
        "when every current sample lies beyond the moved baseline's range and the medians "
        "moved by more than twice the limit"
    )
    if result.overall:
        text += (
            "; the pooled test sums that test's U over the rows (stratified, van Elteren) "
            "and asks whether the rows together lie beyond their moved baselines"
        )
    return text


def power_text(result: GateResult) -> str:
    """What the gate could see: the worst figure over the sensitive rows, the overall one,
    the rows too noisy, what the figures assume; or why performance was not judged."""
    if result.not_judged:
        return result.not_judged
    if not result.performance_checked:
        return ""
    sensitive = [r.detectable for r in result.sensitive if r.detectable is not None]
    alone = _alone(result)
    if sensitive:
        text = f"sensitive to slowdowns >= {max(sensitive):.0%} on {plural(len(sensitive), 'row')}"
    elif alone:
        text = f"no row can be judged alone ({alone})"
    else:
        text = "sensitive on no row"
    if result.drift is not None:
        text += f" (between-run drift of {result.drift.runs} baseline runs)"
    text += _overall_text(result)
    if result.too_noisy and not alone:
        text += f"; {plural(result.too_noisy, 'row')} too noisy to judge"
    overall_stated = any(o.detectable is not None for o in result.overall)
    if result.drift is None and (sensitive or overall_stated):
        text += (
            f"; within-run spread only: a baseline of {result.baseline_runs} run(s) (the "
            f"drift test needs {result.rules.min_runs}) cannot tell a slowdown from a busy "
            "machine; gate variants run interleaved for that (--variant-a/--variant-b)"
        )
    if result.inconclusive and result.passed:
        text += (
            f"; performance inconclusive: fewer than {result.rules.min_judged} sensitive rows "
            "(--min-judged)"
        )
    return text


def _alone(result: GateResult) -> str:
    """Why the judged rows were left to the pooled test (their sample counts cannot reach
    their level: colbench.commands.gate.sensitivity.control_family); "" when some row can."""
    summary = result.pooled
    if summary is None or not summary.overall or summary.alone < summary.family:
        return ""
    counts = {(c.n_baseline, c.n_current) for r in result.rows for c in r.relative}
    best = min(rank_tests.smallest_one_sided_p(b, c) for b, c in counts)
    shown = ", ".join(f"{b}/{c}" for b, c in sorted(counts))
    return f"{shown} samples: p >= {best:.2g} > {summary.nominal_row_level:.2g}"


def _overall_text(result: GateResult) -> str:
    """The overall results' figures: the drift statistic's or the pooled test's."""
    text = ""
    name = "overall" if result.drift is not None else "pooled"
    for o in result.overall:
        if o.detectable is None:
            continue
        # A test too noisy to promise a figure can still find a change beyond the limit:
        # that is a finding, not a failure to judge.
        state = ""
        if o.insensitive:
            found = o.verdict in (Verdict.WORSE, Verdict.BETTER)
            state = ", noisy" if found else ", too noisy to judge"
        metric = f" {o.check.metric}" if len(result.overall) > 1 else ""
        text += f"; {name}{metric} >= {o.detectable:.0%} over {plural(o.rows, 'row')}{state}"
        if o.verdict is not Verdict.SAME:
            text += f" ({o.verdict.value}: {overall_change(o)})"
    return text


def overall_change(o: OverallResult) -> str:
    """The overall statistic's change and p, as the rows' cells show theirs."""
    p = f", p={o.p_value:.3g}" if o.p_value is not None else ""
    return f"median change {o.change:+.1%}{p}"


def power_rule(result: GateResult) -> str:
    summary = result.summary
    judged = f"the {plural(result.family, 'row')} judged"
    rate = f"family-wise false-alarm rate <= {result.rules.alpha:g}"
    if summary is not None and summary.overall and result.rules.fwer == "holm":
        name = "overall statistic" if result.drift is not None else "pooled test"
        short = name.split()[0]
        rows = f"rows at >= {summary.row_level:.2g}"
        if summary.alone == summary.family:
            rows = (
                f"rows at >= {summary.nominal_row_level:.2g}, which no row's samples can "
                f"reach: their share goes to the {short} test"
            )
        elif summary.alone:
            rows += (
                f" ({plural(summary.alone, 'row')} whose samples cannot reach it left to the "
                f"{short} test)"
            )
        levels = f"{rows}, {short} at >= {summary.overall_level:.2g}"
        family = f"weighted Holm over {judged} and the {name} ({rate}; {levels})"
    elif result.rules.fwer == "holm":
        family = f"Holm over {judged} ({rate})"
    else:
        family = f"no family-wise control (each row at {result.rules.alpha:g})"
    if result.drift is not None:
        return (
            f"{family}; detect: the smallest slowdown a row (or the run's median over rows) "
            f"would have shown at {result.rules.power:.0%} power, from the between-run spread of "
            f"the baseline's {result.drift.runs} runs"
        )
    pooled = " (or every row alike, pooled)" if result.overall else ""
    return (
        f"{family}; detect: the smallest slowdown a row{pooled} would have shown at "
        f"{result.rules.power:.0%} power, from the samples' spread"
    )


def overall_lines(result: GateResult) -> list[str]:
    """One line per overall result: its change, p and verdict."""
    if result.drift is not None:
        return [
            f"overall {o.check.metric}: {o.verdict.value}, {overall_change(o)} over {o.rows} "
            f"rows against {o.spread.runs} baseline runs (between-run SD "
            f"{o.spread.sd_log:.3f} in logs)"
            for o in result.drift.overall
            if o.spread is not None
        ]
    return [
        f"pooled {o.check.metric}: {o.verdict.value}, {overall_change(o)} over "
        f"{plural(o.rows, 'row')} (stratified rank test of every row's samples against its "
        "baseline's moved by the limit)"
        for o in result.overall
    ]
