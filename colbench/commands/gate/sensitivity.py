"""The gate's judgement of many rows at once: one family, what each member could see, and
the rows judged on the baseline window's between-run drift.

Two passes over the verdicts of :mod:`colbench.commands.gate.verdict`, after every row is
judged (both need the number of rows judged, m):

1. **Family-wise control** (:func:`control_family`). Each row judged on performance is
   one hypothesis; its p-value is the smallest of its relative checks' tests that found
   it worse (busbw and time of one row come from the same timed calls: one question
   asked twice). Beside the rows stands one *overall* hypothesis over all of them: the
   pooled rank test of a run against a baseline of few runs
   (:mod:`colbench.commands.gate.pooled`), or the drift test of the run's median change
   against a window of runs (:func:`judge_drift`). They form one family under weighted
   Holm: the overall hypothesis weighs :data:`OVERALL_WEIGHT`, each row (1 - that) / m,
   so the chance that an unchanged run fails anything stays at alpha.
   A row the test alone would call worse but Holm does not back is ``noisy``.
2. **Power** (:func:`state_power`). Each relative check states the smallest slowdown it
   would have caught with the gate's power at its strictest level (alpha (1 - w) / m for
   a row), from the samples' spread (:mod:`colbench.stats.power`); a row whose checks
   all need a margin beyond their limit larger than the limit is ``insensitive``.

**The drift test** (:func:`judge_drift`), once the baseline holds ``--min-baseline-runs``
runs, decides every relative check instead of the within-run rank test; its overall
hypothesis is each check's median over the rows of log(current / baseline).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.commands.gate.checks import Check
from colbench.commands.gate.verdict import CheckResult, RowResult, Verdict, gravest
from colbench.output import plural
from colbench.results.join import Pair, Sample, is_ok
from colbench.stats import drift, power, rank_tests
from colbench.stats.holm import holm as holm_procedure

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
    discrete tests), which depends on the counts alone, so the family-wise rate holds.
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
    without one is insensitive, noted with what it could see (else ``no_figure``)."""
    figures = [c.detectable for c in row.relative if not c.insensitive and c.detectable is not None]
    row.detectable = min(figures, default=None)
    if row.relative and not figures and row.verdict is Verdict.SAME:
        row.verdict = Verdict.INSENSITIVE
        shown = [c.detectable for c in row.relative if c.detectable is not None]
        seen = f"it would see only slowdowns >= {min(shown):.0%}" if shown else no_figure
        row.notes.append(f"too noisy to judge: {seen} at {target_power:.0%} power{basis}")


@dataclass
class DriftSummary(FamilySummary):
    """What the drift pass did: the family, the overall results, and the baseline's runs."""

    runs: int = 0


def baseline_runs(frame: Any) -> list[str]:
    """The run ids of a baseline's rows, oldest first."""
    if not len(frame) or "run_id" not in frame.columns:
        return []
    return list(dict.fromkeys(str(r) for r in frame["run_id"]))


def _run_medians(samples: Sequence[Sample], metric: str) -> dict[str, float]:
    """Each run's median of the metric over its samples with a positive measurement."""
    by_run: dict[str, list[float]] = {}
    for s in samples:
        value = s.get(metric)
        if is_ok(s) and value is not None and float(value) > 0:
            by_run.setdefault(str(s.get("run_id")), []).append(float(value))
    return {run: rank_tests.median(values) for run, values in by_run.items()}


@dataclass
class _Judged:
    """One relative check of one row under the drift test, with what the overall needs."""

    row: RowResult
    result: CheckResult
    base_medians: dict[str, float]
    current_log: float
    spread: drift.RunSpread


def judge_drift(
    judged: Sequence[tuple[Pair, RowResult]],
    runs: Sequence[str],
    min_runs: int,
    alpha: float,
    target_power: float,
    fwer: str = "holm",
) -> DriftSummary:
    """Re-judge every relative check of the rows on the drift test; Holm; the figures."""
    summary = DriftSummary(runs=len(runs))
    found = (
        _judge_check(pair, row, c, min_runs, alpha) for pair, row in judged for c in row.relative
    )
    cases = [case for case in found if case is not None]
    rows = list({id(case.row): case.row for case in cases}.values())
    summary.overall = _overall(cases, runs, alpha) if len(rows) >= 2 else []
    control_family(summary, rows, alpha, fwer, "overall statistic")
    for case in cases:
        margin = drift.detectable_margin(case.spread, summary.row_level, target_power)
        state_margin(case.result, margin)
    for o in summary.overall:
        if o.spread is not None:
            margin = drift.detectable_margin(o.spread, summary.overall_level, target_power)
            state_margin(o, margin)
    for _, row in judged:
        if row.relative:
            row.verdict = gravest({c.verdict for c in row.checks})
            settle_power(row, target_power, "no figure", " (between-run drift)")
    return summary


def _judge_check(
    pair: Pair, row: RowResult, c: CheckResult, min_runs: int, alpha: float
) -> _Judged | None:
    """The drift test of one check; None (and the check left without a figure) when the
    baseline holds the row in fewer than ``min_runs`` runs."""
    medians = _run_medians(pair.a, c.check.metric)
    current = [float(s[c.check.metric]) for s in pair.b if is_ok(s) and s.get(c.check.metric)]
    spread = drift.spread_of([math.log(v) for v in medians.values()])
    if spread is None or len(medians) < min_runs or not current:
        c.p_value, c.log_sd, c.detectable, c.insensitive = None, None, None, True
        c.verdict = Verdict.SAME if c.verdict is Verdict.SAME else Verdict.NOISY
        c.rule = f"the baseline holds this row in {len(medians)} of {min_runs} runs"
        row.notes.append(f"{c.check.metric}: {c.rule}")
        return None
    current_log = math.log(rank_tests.median(current))
    j = drift.judge(spread, current_log, c.check.worse_when, c.check.limit)
    c.baseline_median, c.change = math.exp(spread.center_log), j.change
    c.current_median, c.p_value, c.log_sd = math.exp(current_log), j.p_value, spread.sd_log
    c.rule = "drift test"
    c.verdict = _verdict(j, alpha)
    return _Judged(row, c, medians, current_log, spread)


def _verdict(j: drift.DriftJudgement, level: float) -> Verdict:
    """At the unadjusted level: Holm (control_family) then demotes the worse it does not back."""
    if j.direction == 0:
        return Verdict.SAME
    if j.p_value is None or j.p_value > level:
        return Verdict.NOISY
    return Verdict.WORSE if j.direction > 0 else Verdict.BETTER


def _overall(cases: Sequence[_Judged], runs: Sequence[str], alpha: float) -> list[OverallResult]:
    """One run-level statistic per relative check, over the rows present in every run."""
    out = []
    for check in dict.fromkeys(case.result.check for case in cases):
        mine = [c for c in cases if c.result.check == check and set(runs) <= set(c.base_medians)]
        if len(mine) < 2:
            continue
        base = [[math.log(c.base_medians[r]) for r in runs] for c in mine]
        spread = drift.overall_spread(base)
        if spread is None:
            continue
        current = drift.overall_current(base, [c.current_log for c in mine])
        j = drift.judge(spread, current, check.worse_when, check.limit)
        out.append(
            OverallResult(check, len(mine), j.change, j.p_value, _verdict(j, alpha), spread=spread)
        )
    return out
