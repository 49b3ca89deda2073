"""What the gate judges by and what it finds: its rules (checked once, when built from the
options), a floor's result, and the whole verdict with the figures the reports read.

Apart from :mod:`colbench.commands.gate.engine`, which joins runs and judges rows into a
:class:`GateResult`, so that the reports depend on the result alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from colbench.commands.gate import drift_rows, sensitivity
from colbench.commands.gate.checks import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_CV,
    DEFAULT_MIN_BASELINE_RUNS,
    Check,
    SizeWindow,
)
from colbench.commands.gate.verdict import RowResult, Verdict
from colbench.config.min_bw import BusbwFloor
from colbench.errors import UsageError
from colbench.stats import power


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
    """How the gate judges, built once from its options (and checked then): the checks,
    the size window, the tests' levels, and what a missing or foreign baseline means."""

    checks: tuple[Check, ...]
    window: SizeWindow = field(default_factory=SizeWindow)
    alpha: float = DEFAULT_ALPHA
    max_cv: float = DEFAULT_MAX_CV
    #: The family-wise control over the rows, and the power detectable slowdowns are
    #: stated at.
    fwer: str = "holm"
    power: float = power.DEFAULT_POWER
    #: Rows that must be sensitive for performance to count as judged.
    min_judged: int = 1
    #: Runs in the baseline's window the drift test needs (colbench.commands.gate.drift_rows).
    min_runs: int = DEFAULT_MIN_BASELINE_RUNS
    #: Every op's average bus bandwidth must reach it: NCCL_TESTS_MIN_BW's (0.9x the
    #: value, as nccl-tests) or --min-avg-busbw-gbps's (the value itself).
    floor: BusbwFloor | None = None
    #: Judge performance against a baseline from another machine too.
    any_machine: bool = False
    #: A baseline that does not exist yet (a fresh runner) judges the current run alone.
    missing_ok: bool = False
    #: Judge by a baseline whose run is incomplete instead of refusing it.
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
    drift: drift_rows.DriftSummary | None = None
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
