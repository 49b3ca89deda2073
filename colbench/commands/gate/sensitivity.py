"""The gate's judgement of many rows at once: one family, and what each member could see.

Two passes over the verdicts of :mod:`colbench.commands.gate.verdict`, after every row is
judged (both need the number of rows judged, m):

1. **Family-wise control** (:func:`control_family`). Each row judged on performance is
   one hypothesis; its p-value is the smallest of its relative checks' tests that found
   it worse (busbw and time of one row come from the same timed calls: one question
   asked twice). Beside the rows stands one *overall* hypothesis over all of them: the
   pooled rank test of a run against a baseline of few runs
   (:mod:`colbench.commands.gate.pooled`), or the drift test of the run's median change
   against a window of runs (:mod:`colbench.commands.gate.drift_rows`). They form one family
   under weighted Holm: the overall hypothesis weighs :data:`OVERALL_WEIGHT`, each row
   (1 - that) / m, so the chance that an unchanged run fails anything stays at alpha.
   A row the test alone would call worse but Holm does not back is ``noisy``.
2. **Power** (:func:`state_power`). Each relative check states the smallest slowdown it
   would have caught with the gate's power at its strictest level (alpha (1 - w) / m for
   a row), from the samples' spread (:mod:`colbench.stats.power`); a row whose checks
   all need a margin beyond their limit larger than the limit is ``insensitive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from colbench.commands.gate.checks import Check
from colbench.commands.gate.verdict import CheckResult, RowResult, Verdict, gravest
from colbench.output import plural
from colbench.stats import drift, power
from colbench.stats.holm import holm as holm_procedure

#: Family-wise control: weighted Holm over the rows and the overall hypothesis, or none
#: (each at alpha on its own).
FWER_CHOICES = ("holm", "none")
#: The overall hypothesis's share of alpha; the rows share the rest equally. Once the
#: overall hypothesis is rejected its share passes to the rows (Holm's step-down), so a
#: run slower everywhere gets the rows' plain Holm levels back.
OVERALL_WEIGHT = 0.5


@dataclass
class OverallResult:
    """The run-level hypothesis of one relative check: its change, p and verdict."""

    check: Check
    rows: int
    #: exp(median over rows of log(current / baseline)) - 1.
    change: float
    p_value: float | None
    verdict: Verdict = Verdict.SAME
    detectable: float | None = None
    insensitive: bool = False
    #: The baseline runs' between-run spread it was judged on (the drift test); None for
    #: the pooled rank test, which knows only the samples' spread within the runs.
    spread: drift.RunSpread | None = None

    @property
    def fails(self) -> bool:
        return self.verdict is Verdict.WORSE


@dataclass
class FamilySummary:
    """One family: the rows judged on performance, the overall results, their levels."""

    family: int = 0
    #: Each one's strictest level under weighted Holm (the stated figures use these).
    row_level: float = 0.0
    overall_level: float = 0.0
    #: Rows whose sample counts cannot reach their level even with every row in the
    #: family (that level: ``nominal_row_level``), left to the overall hypothesis.
    alone: int = 0
    nominal_row_level: float = 0.0
    overall: list[OverallResult] = field(default_factory=list)

    @property
    def sensitive_overall(self) -> OverallResult | None:
        """The overall result with the smallest stated slowdown that is not insensitive."""
        usable = [o for o in self.overall if not o.insensitive and o.detectable is not None]
        return min(usable, key=lambda o: o.detectable or 0.0, default=None)


def row_p(row: RowResult) -> float:
    """A row's p-value in the family: the smallest of its checks that found it worse."""
    return min(
        (c.p_value for c in row.checks if c.verdict is Verdict.WORSE and c.p_value is not None),
        default=1.0,
    )


def control_family(
    summary: FamilySummary,
    rows: Sequence[RowResult],
    alpha: float,
    fwer: str,
    overall: str,
    floors: Sequence[float] | None = None,
) -> None:
    """Weighted Holm over ``rows`` and ``summary.overall`` (``fwer`` none: each at alpha);
    the levels into ``summary``; a worse verdict it does not back becomes noisy, with a
    note that names the family (``overall``: what the overall hypothesis is called).

    ``floors`` are the rows' smallest attainable p-values (an exact rank test's depend on
    its sample counts only). A row whose floor lies above its level can never be
    rejected: it leaves the family and its weight passes to the others (Tarone's rule for
    discrete tests). The choice depends on the counts alone, not on the data, so the
    family-wise rate stays at alpha; 3 samples a side, whose floor 0.05 no row level of a
    family with an overall hypothesis reaches, leave all of alpha to the overall one.
    """
    m = len(rows)
    summary.family = m
    weight = OVERALL_WEIGHT if summary.overall else 0.0
    share = (1 - weight) / max(m, 1)
    holm = fwer != "none"
    floors = list(floors or [0.0] * m)
    testable = _testable(floors, weight, share, alpha) if holm else m
    summary.alone = m - testable
    summary.nominal_row_level = alpha * share if holm else alpha
    # Rows by floor, lowest first: the first ``testable`` keep their share.
    order = sorted(range(m), key=floors.__getitem__)
    weights = [0.0] * m
    for i in order[:testable]:
        weights[i] = share
    total = weight + share * testable
    summary.row_level = alpha * share / total if holm and testable else alpha
    summary.overall_level = alpha * weight / total if holm and weight else alpha
    worse = [o.p_value for o in summary.overall if o.fails and o.p_value is not None]
    p_values = [*map(row_p, rows), min(worse, default=1.0)]
    kept = (
        holm_procedure(p_values, alpha, [*weights, weight]).rejected
        if holm
        else [p <= alpha for p in p_values]
    )
    family = f"Holm over {plural(m, 'row')}"
    if weight:
        family = f"weighted {family} and the {overall}"
    for row, p, backed in zip(rows, p_values, kept, strict=False):
        if backed or p >= 1.0:
            continue
        for c in row.checks:
            if c.verdict is Verdict.WORSE and c.p_value is not None:
                c.verdict = Verdict.NOISY
        row.verdict = gravest({c.verdict for c in row.checks})
        row.notes.append(f"p={p:.3g} is not significant after {family}")
    for o in summary.overall:
        if o.fails and not kept[-1]:
            o.verdict = Verdict.NOISY


def _testable(floors: Sequence[float], weight: float, share: float, alpha: float) -> int:
    """How many rows, lowest floors first, can each reach the level they share with the
    overall hypothesis (Tarone): the largest k whose k-th floor is within
    alpha * share / (weight + k * share), counting rows of one floor together."""
    ranked = sorted(floors)
    for k in range(len(ranked), 0, -1):
        if k < len(ranked) and ranked[k] == ranked[k - 1]:
            continue
        if ranked[k - 1] <= alpha * share / (weight + k * share):
            return k
    return 0


def state_margin(target: CheckResult | OverallResult, margin: float | None) -> None:
    """The slowdown a log ``margin`` beyond the limit lets ``target`` detect, and whether
    that makes it insensitive (colbench.stats.power); no figure without a margin."""
    check = target.check
    target.insensitive = power.insensitive(check.limit, check.worse_when, margin)
    if margin is not None:
        target.detectable = power.detectable_slowdown(check.limit, check.worse_when, margin)


def state_power(row: RowResult, level: float, target_power: float) -> None:
    """Each relative check's detectable slowdown at ``level``, from the samples' spread."""
    for c in row.relative:
        margin = None
        if c.log_sd is not None:
            margin = power.shift_margin(c.log_sd, c.n_baseline, c.n_current, level, target_power)
        state_margin(c, margin)
    cannot = f"{row.n_baseline}/{row.n_current} samples cannot reach p <= {level:.2g}"
    settle_power(row, target_power, cannot)


def settle_power(row: RowResult, target_power: float, no_figure: str, basis: str = "") -> None:
    """The row's figure, the smallest its sensitive checks state; a row within its limits
    without one is insensitive, its note saying what it could see (``no_figure`` when no
    check states a figure; ``basis``: what the figures come from)."""
    figures = [c.detectable for c in row.relative if not c.insensitive and c.detectable is not None]
    row.detectable = min(figures, default=None)
    if row.relative and not figures and row.verdict is Verdict.SAME:
        row.verdict = Verdict.INSENSITIVE
        shown = [c.detectable for c in row.relative if c.detectable is not None]
        seen = f"it would see only slowdowns >= {min(shown):.0%}" if shown else no_figure
        row.notes.append(f"too noisy to judge: {seen} at {target_power:.0%} power{basis}")
