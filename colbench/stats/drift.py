"""Between-run drift: judging a run against the K runs of a rolling baseline.

On a shared runner a row's median moves more between identical runs minutes apart than
its samples spread within one run, so a test that knows only the within-run spread
(:mod:`colbench.stats.power`) cannot promise anything about a stored baseline. A
baseline window of K accepted runs (``--update-baseline --keep K``) shows the drift
itself: each run's median of a row is one draw of "what this runner measures".

**The row test.** On the log scale, let x_1..x_K be the baseline runs' medians of a row,
m their mean and s their standard deviation (K - 1 degrees of freedom), and c the current
run's median. If the current run is one more draw of the same runner, c - m is normal
with standard deviation s * sqrt(1 + 1/K) (the prediction error of a new draw), and
(c - m) / (s * sqrt(1 + 1/K)) is Student-t with K - 1 degrees of freedom. A check of
limit L fails when the current run lies beyond the baseline *moved by the limit*: the
one-sided p-value of t = (|c - m| - l) / (s * sqrt(1 + 1/K)), l the limit in logs.

**The detectable change.** A run slowed by a further log shift delta beyond the limit
gives t a noncentral t distribution with K - 1 degrees of freedom and noncentrality
delta / (s * sqrt(1 + 1/K)); the detectable margin is the delta at which the test rejects
with the stated power. It is computed by numerical integration over the chi distribution
of the sample SD (:func:`colbench.stats.noise.t_tail`), not simulated and not read
off a normal approximation, which at K = 5..10 promises power the t test lacks.

**The overall statistic.** Drift is common mode: a slow spell of the runner moves every
row of a run alike, so pooling rows removes the rows' own noise but not the drift. The
run-level statistic is the median over the judged rows of log(current / baseline mean);
its between-run spread comes from the baseline itself: each baseline run's statistic
against the mean of the others (leave-one-out), :func:`overall_spread`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from colbench.stats import noise, rank_tests


@dataclass(frozen=True)
class RunSpread:
    """What K baseline runs say about one statistic: its mean and between-run SD (logs)."""

    center_log: float
    sd_log: float
    runs: int

    @property
    def dof(self) -> int:
        return self.runs - 1

    @property
    def scale(self) -> float:
        """The SD of a new run's statistic about the baseline mean (prediction error)."""
        return self.sd_log * math.sqrt(1 + 1 / self.runs)


def spread_of(log_medians: Sequence[float]) -> RunSpread | None:
    """Mean and SD of the runs' log medians; None below 3 runs (the t test needs 2 dof)."""
    k = len(log_medians)
    if k < 3:
        return None
    return RunSpread(sum(log_medians) / k, rank_tests.pooled_sd([log_medians]) or 0.0, k)


def overall_spread(baseline_logs: Sequence[Sequence[float]]) -> RunSpread | None:
    """The run-level statistic's spread from a rows x runs matrix of log medians.

    Run j's statistic is S_j = median over rows of (x_rj - mean of the other runs' x_r).
    Were the median a mean, S_j = K / (K - 1) * (x_j - mean), so the runs' SD is
    sqrt((K - 1) / K^2 * sum (S_j - mean S)^2) with K - 1 degrees of freedom; the median
    over rows keeps that to a good approximation and resists a row that jumps alone.
    """
    if not baseline_logs:
        return None
    k = len(baseline_logs[0])
    if k < 3 or any(len(row) != k for row in baseline_logs):
        return None
    matrix = np.asarray(baseline_logs, dtype=float)
    totals = matrix.sum(axis=1)
    loo = [float(np.median(matrix[:, j] - (totals - matrix[:, j]) / (k - 1))) for j in range(k)]
    mean = sum(loo) / k
    sd = math.sqrt((k - 1) / k**2 * sum((s - mean) ** 2 for s in loo))
    return RunSpread(0.0, sd, k)


def overall_current(
    baseline_logs: Sequence[Sequence[float]], current_logs: Sequence[float]
) -> float:
    """The current run's statistic: median over rows of (c_r - baseline mean of row r)."""
    return rank_tests.median(
        [c - sum(row) / len(row) for row, c in zip(baseline_logs, current_logs, strict=True)]
    )


def t_critical(level: float, dof: int) -> float:
    """The t with P(T > t) = level; the test needs 3 runs, 2 degrees of freedom (the
    spreads :func:`judge` is given have them: :func:`spread_of`, :func:`overall_spread`)."""
    if dof < 2:
        raise ValueError("the drift test needs at least 2 degrees of freedom (3 runs)")
    return noise.t_upper(level, dof)


@functools.lru_cache(maxsize=256)
def margin_in_scales(level: float, power: float, dof: int) -> float:
    """The shift beyond the limit, in units of the prediction SD, that the one-sided test
    at ``level`` finds with probability ``power``: the noncentrality of that power."""
    critical = t_critical(level, dof)
    return noise.solve_monotone(
        lambda ncp: noise.t_tail(critical, dof, ncp), power, 0.0, 200.0, falling=False
    )


def limit_log(limit: float, upward: bool) -> float:
    """A relative limit as a log distance: up by 1 + L, down by 1 - L (never, from L >= 1)."""
    if upward:
        return math.log1p(limit)
    return -math.log1p(-limit) if limit < 1 else math.inf


@dataclass(frozen=True)
class DriftJudgement:
    """What the drift test says about one statistic against its baseline runs."""

    #: exp(current - baseline mean) - 1: the relative change against the runs' mean.
    change: float
    #: +1 worse, -1 better, 0 within the limit.
    direction: int
    #: One-sided p of "beyond the baseline moved by the limit"; None within the limit.
    p_value: float | None


def judge(spread: RunSpread, current_log: float, worse_when: int, limit: float) -> DriftJudgement:
    """The prediction test of the current statistic against the baseline runs' spread."""
    d = current_log - spread.center_log
    change = math.expm1(d)
    beyond = abs(d) - limit_log(limit, d > 0)
    if beyond <= 0:
        return DriftJudgement(change, 0, None)
    direction = 1 if d * worse_when > 0 else -1
    if spread.scale == 0:
        return DriftJudgement(change, direction, 0.0)
    return DriftJudgement(change, direction, noise.t_tail(beyond / spread.scale, spread.dof))


def detectable_margin(spread: RunSpread, level: float, power: float) -> float:
    """The log shift beyond the limit that the test at ``level`` finds with ``power``."""
    return margin_in_scales(round(level, 12), round(power, 12), spread.dof) * spread.scale
