"""Evidence pooled across rows: a stratified rank test beside each row's own (docs/gate.md,
"The pooled test", measures it and says what it assumes).

Against a baseline of fewer runs than the drift test needs, each row is judged by its own
exact rank test (:func:`colbench.commands.gate.verdict.judge`), and with R samples a side that
test cannot go below p = 1 / C(2R, R): 0.05 at R = 3, 0.004 at R = 5. The family's rows
are judged at alpha / (2 m) each, so with 3 samples a side no row can ever be judged
alone, however clearly every row moved. The evidence is in the rows together.

**The test.** For each relative check every judged row is one stratum. On the log scale,
oriented so that larger is worse, the baseline's samples are moved toward worse by the
limit, as the row test moves them, and U_i counts the pairs (current, moved baseline) in
which the current one is worse, ties one half. If no row is beyond its limit, each row's
samples are exchangeable, so the exact null of S = sum of the U_i is the convolution of
the rows' exact U distributions, and p = P(S >= observed): van Elteren's stratified
Wilcoxon test when every row has the same sample counts (with unequal counts the plain
sum leans toward the rows with more samples and stays exact).

**What it could see.** The smallest slowdown, the same in every row, that the test finds
at its level with the gate's power, simulated from each row's own log SD (as
:mod:`colbench.stats.power` does for one row). Only a baseline of several runs (the drift
test) or an interleaved run (the paired gate) can tell a slowdown from a busy machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from colbench.commands.gate import sensitivity
from colbench.commands.gate.checks import Check
from colbench.commands.gate.sensitivity import FamilySummary, OverallResult
from colbench.commands.gate.verdict import RowResult, Verdict
from colbench.results.join import Pair, ok_values
from colbench.stats import drift, power, rank_tests

#: Rows with more samples (both sides) than this are not counted exactly: the whole
#: statistic then takes the normal approximation with the ties' correction.
EXACT_MAX_N = 120


@dataclass(frozen=True)
class Stratum:
    """One row's samples, as oriented logs: larger is worse (or better, for that test)."""

    moved: tuple[float, ...]
    current: tuple[float, ...]

    @classmethod
    def of(
        cls, baseline: Sequence[float], current: Sequence[float], orientation: int, limit: float
    ) -> Stratum:
        """``orientation`` * log of the values; the baseline moved that way by ``limit``."""
        shift = drift.limit_log(limit, orientation > 0)
        return cls(
            tuple(orientation * math.log(v) + shift for v in baseline),
            tuple(orientation * math.log(v) for v in current),
        )

    @property
    def doubled_u(self) -> int:
        """2 U: twice the pairs with the current sample beyond the moved baseline's."""
        return sum(2 if c > b else int(c == b) for c in self.current for b in self.moved)


def pooled_p(strata: Sequence[Stratum]) -> float:
    """One-sided p of S = sum of the rows' U: P(S >= observed) under exchangeability."""
    observed = sum(s.doubled_u for s in strata)
    if any(len(s.moved) + len(s.current) > EXACT_MAX_N for s in strata):
        return _normal_p(strata, observed)
    pmf = np.ones(1)
    for s in strata:
        ranks = rank_tests.midranks([*s.current, *s.moved])
        pmf = np.convolve(pmf, rank_tests.u_null(ranks, len(s.current), len(s.moved)))
    return float(min(1.0, rank_tests.upper_tail(pmf)[observed]))


def _normal_p(strata: Sequence[Stratum], observed: int) -> float:
    """The normal approximation of P(S >= observed), ties corrected, continuity 1/2."""
    mean = sum(len(s.current) * len(s.moved) / 2 for s in strata)
    variance = sum(
        rank_tests.u_variance(
            rank_tests.midranks([*s.current, *s.moved]), len(s.current), len(s.moved)
        )
        for s in strata
    )
    if variance <= 0:
        return 1.0
    z = (observed / 2 - mean - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def smallest_p(counts: Sequence[tuple[int, int]]) -> float:
    """The smallest p the test of rows with these (baseline, current) counts can give."""
    return math.prod(rank_tests.smallest_one_sided_p(n_b, n_c) for n_b, n_c in counts)


def uniform_margin(
    rows: Sequence[tuple[float, int, int]], level: float, target_power: float
) -> float | None:
    """The log shift beyond the limit, the same in every row of (log SD, baseline
    samples, current samples), that the test at ``level`` finds with ``target_power``;
    None when it can never reach ``level``."""
    if len(rows) < 2 or smallest_p([(n_b, n_c) for _, n_b, n_c in rows]) > level:
        return None
    key = tuple((round(sigma, 4), n_b, n_c) for sigma, n_b, n_c in rows)
    return power.stratified_margin(key, round(level, 12), round(target_power, 12))


def judge_rows(
    judged: Sequence[tuple[Pair, RowResult]], alpha: float, target_power: float, fwer: str
) -> FamilySummary:
    """The rows' rank tests and one pooled test per relative check, in one family under
    weighted Holm (:func:`colbench.commands.gate.sensitivity.control_family`); the figures."""
    summary = FamilySummary()
    rows = [row for _, row in judged if row.judged]
    if len(rows) >= 2:
        checks = dict.fromkeys(c.check for row in rows for c in row.relative)
        found = (_pooled(check, judged, alpha) for check in checks)
        summary.overall = [o for o in found if o is not None]
    floors = [_floor(row) for row in rows]
    sensitivity.control_family(summary, rows, alpha, fwer, "pooled test", floors)
    kept = len(rows) - summary.alone
    cut = sorted(floors)[kept - 1] if kept else -1.0
    for row, floor in zip(rows, floors, strict=True):
        # A row left out of the family states what it could not reach: its own level.
        level = summary.row_level if floor <= cut else summary.nominal_row_level
        sensitivity.state_power(row, level, target_power)
    for o in summary.overall:
        sensitivity.state_margin(o, _margin(o, rows, summary.overall_level, target_power))
    return summary


def _margin(
    o: OverallResult, rows: Sequence[RowResult], level: float, target_power: float
) -> float | None:
    """The pooled test's margin from its rows' log SDs and sample counts; None when a row
    has no SD."""
    mine = [c for row in rows for c in row.relative if c.check == o.check]
    if any(c.log_sd is None for c in mine):
        return None
    sigmas = [(c.log_sd or 0.0, c.n_baseline, c.n_current) for c in mine]
    return uniform_margin(sigmas, level, target_power)


def _pooled(
    check: Check, judged: Sequence[tuple[Pair, RowResult]], alpha: float
) -> OverallResult | None:
    """One relative check's pooled test over every row it judged (at least two)."""
    sides: list[tuple[list[float], list[float]]] = []
    logs: list[float] = []
    for pair, row in judged:
        c = next((c for c in row.relative if c.check == check), None)
        if c is None or c.baseline_median is None or c.current_median is None:
            continue
        base, cur = ok_values(pair.a, check.metric), ok_values(pair.b, check.metric)
        if min(base + cur) <= 0:
            continue
        sides.append((base, cur))
        logs.append(math.log(c.current_median / c.baseline_median))
    if len(sides) < 2:
        return None
    median_log, w = rank_tests.median(logs), check.worse_when
    change = math.expm1(median_log)
    p_worse = pooled_p([Stratum.of(b, c, w, check.limit) for b, c in sides])
    beyond = abs(median_log) - drift.limit_log(check.limit, median_log > 0)
    direction = 0 if beyond <= 0 else (1 if median_log * w > 0 else -1)
    if p_worse <= alpha or direction >= 0:
        verdict = (
            Verdict.WORSE if p_worse <= alpha else (Verdict.NOISY if direction else Verdict.SAME)
        )
        return OverallResult(check, len(sides), change, p_worse, verdict)
    p_better = pooled_p([Stratum.of(b, c, -w, check.limit) for b, c in sides])
    verdict = Verdict.BETTER if p_better <= alpha else Verdict.NOISY
    return OverallResult(check, len(sides), change, p_better, verdict)


def _floor(row: RowResult) -> float:
    """The smallest p any of the row's rank tests can give, from its sample counts."""
    counts = [(c.n_baseline, c.n_current) for c in row.relative if c.n_baseline and c.n_current]
    return min((rank_tests.smallest_one_sided_p(b, n) for b, n in counts), default=1.0)
