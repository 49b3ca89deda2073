"""What the gate could have seen: detectable slowdowns and the family-wise control.

**Detectable change.** A relative check fails a row when the current samples lie beyond
the baseline's moved by the limit (:func:`colbench.commands.gate.verdict.judge`). Times on a
busy machine are close to lognormal, so on the log scale a slowdown is a shift and the
question becomes a two-sample shift test: the smallest log shift delta beyond the limit
that a one-sided test at level ``level`` finds with probability ``power`` is

    delta = (z(1 - level) + z(power)) * sigma * sqrt(1/n_b + 1/n_c) * sqrt(pi / 3)

with sigma the pooled standard deviation of the log values (each side about its own
mean). The first factors are the textbook normal-approximation power of a shift test;
sqrt(pi/3) converts it to the Mann-Whitney test the gate runs, whose asymptotic
efficiency against the t-test on normal data is 3/pi (it needs pi/3 as many samples for
the same power). The detectable change is then the limit moved once more by delta:
time x (1 + limit) x e^delta, bandwidth x (1 - limit) x e^-delta. An exact rank test
whose smallest attainable p-value is above ``level`` can detect nothing: None.

**Slowdown.** All figures are stated as a slowdown: the fraction of bandwidth lost,
1 - before/after of the time (a time rise r is a slowdown of r / (1 + r); "25% slower"
is bandwidth x 0.75, time x 1.33), so that busbw and time checks speak one language.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np

from colbench.stats import DEFAULT_POWER, rank_tests

#: Mann-Whitney against the t-test on normal data: asymptotic relative efficiency 3/pi.
_RANK_TEST_INFLATION = math.sqrt(math.pi / 3)


def log_spread(baseline: Sequence[float], current: Sequence[float]) -> float | None:
    """Pooled standard deviation of the log values, each side about its own mean;
    None when it cannot be estimated (a non-positive value, or no degree of freedom)."""
    if any(v <= 0 for side in (baseline, current) for v in side):
        return None
    return rank_tests.pooled_sd([[math.log(v) for v in side] for side in (baseline, current)])


def shift_margin(
    sigma: float, n_baseline: int, n_current: int, level: float, power: float = DEFAULT_POWER
) -> float | None:
    """The log shift beyond the limit found with probability ``power`` at ``level``;
    None when the exact rank test of these sample counts can never reach ``level``."""
    if n_baseline < 1 or n_current < 1 or not 0 < level < 1 or not 0 < power < 1:
        return None
    if rank_tests.smallest_one_sided_p(n_baseline, n_current) > level:
        return None
    return sigma * _rank_sum_margin(n_baseline, n_current, round(level, 12), round(power, 12))


def normal_margin(
    sigma: float, n_baseline: int, n_current: int, level: float, power: float = DEFAULT_POWER
) -> float:
    """The large-sample (normal approximation) figure that :func:`shift_margin` tends to."""
    z = NormalDist().inv_cdf(1 - level) + NormalDist().inv_cdf(power)
    return z * sigma * math.sqrt(1 / n_baseline + 1 / n_current) * _RANK_TEST_INFLATION


#: Simulated trials per power figure (fewer for strata of many samples: memory); a
#: figure's own noise is about 2%.
_TRIALS = {"rank sum": 4000, "signed rank": 2000, "stratified": 2000}
_MAX_SIMULATED = 20_000_000


def upper_critical(null_counts: np.ndarray, level: float) -> int:
    """The smallest value k of a statistic (an index into its null distribution's counts)
    with P(statistic >= k) <= ``level``; past the end when no value reaches ``level``."""
    hits = np.flatnonzero(rank_tests.upper_tail(null_counts) <= level)
    return int(hits[0]) if hits.size else len(null_counts)


def simulated_margin(
    statistic: Callable[[float], np.ndarray], critical: float, power: float, steps: int = 30
) -> float:
    """The one power simulation: the smallest shift at which a test rejects
    (``statistic(shift) >= critical``, over fixed random numbers, so that the figure is
    the same every time and rises with the shift) in ``power`` of the trials: doubling,
    then bisection.

    Simulated, not read off the normal approximation: at R = 3..10 samples and the small
    levels that Holm asks for, a rank test's discreteness makes the approximation promise
    power it does not have (5 against 5 at 0.004 catches about 40% of the shifts the
    approximation says it catches 80% of). The critical values come from exact nulls.
    """

    def caught(shift: float) -> float:
        return float((statistic(shift) >= critical).mean())

    low, high = 0.0, 1.0
    while caught(high) < power and high < 1e3:
        low, high = high, high * 2
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (low, mid) if caught(mid) >= power else (mid, high)
    return high


@functools.lru_cache(maxsize=256)
def _rank_sum_margin(n_baseline: int, n_current: int, level: float, power: float) -> float:
    """The shift, in standard deviations, at which the exact one-sided Mann-Whitney test
    of n_baseline against n_current normal samples rejects at ``level`` with ``power``."""
    n, m = n_baseline, n_current
    doubled = rank_tests.rank_sum_counts(range(1, n + m + 1), n, np.float64)
    # Untied doubled rank sums are even: every other entry, from n (n + 1) / 2 on, is U;
    # reversed, the counts of n m - U, which grows as the current samples fall behind.
    critical = upper_critical(doubled[n * (n + 1) :: 2][: n * m + 1][::-1], level)
    rng = np.random.default_rng(20261123)
    base = rng.standard_normal((_TRIALS["rank sum"], n, 1))
    cur = rng.standard_normal((_TRIALS["rank sum"], 1, m))

    def behind(shift: float) -> np.ndarray:
        # U counts pairs with the current sample above the baseline's; a slowdown of
        # bandwidth moves the current samples down, so small U (large n m - U) rejects.
        return n * m - ((cur - shift) > base).sum(axis=(1, 2))

    return simulated_margin(behind, critical, power, steps=40)


@functools.lru_cache(maxsize=256)
def signed_rank_margin(pairs: int, level: float, power: float) -> float:
    """The shift, in SDs of a difference, at which the one-sided signed-rank test of
    ``pairs`` normal differences rejects at ``level`` with ``power``: the critical W+
    from the exact null up to :data:`rank_tests.EXACT_MAX_PAIRS` pairs and the normal one
    beyond (as :func:`rank_tests.signed_rank_p_greater` decides)."""
    if pairs <= rank_tests.EXACT_MAX_PAIRS:
        # Untied doubled ranks: the even entries are the counts of W+ itself.
        counts = rank_tests.signed_rank_counts([2 * r for r in range(1, pairs + 1)])
        critical = float(upper_critical(counts[::2], level))
    else:
        sd = math.sqrt(pairs * (pairs + 1) * (2 * pairs + 1) / 24)
        critical = pairs * (pairs + 1) / 4 + 0.5 + NormalDist().inv_cdf(1 - level) * sd
    noise = np.random.default_rng(20261125).standard_normal((_TRIALS["signed rank"], pairs))
    ranks = np.arange(1, pairs + 1)

    def w_plus(shift: float) -> np.ndarray:
        d = noise + shift
        ordered = np.take_along_axis(d, np.argsort(np.abs(d), axis=1), axis=1)
        return ((ordered > 0) * ranks).sum(axis=1)

    return simulated_margin(w_plus, critical, power)


@functools.lru_cache(maxsize=64)
def stratified_margin(
    rows: tuple[tuple[float, int, int], ...], level: float, power: float
) -> float:
    """The log shift, the same in every stratum of (log SD, baseline samples, current
    samples), at which the stratified rank test (the sum of the strata's U) rejects at
    ``level`` with ``power``; the critical sum from the convolved exact nulls."""
    pmf = np.ones(1)
    for _, n_b, n_c in rows:
        pmf = np.convolve(pmf, rank_tests.u_null(range(1, n_b + n_c + 1), n_c, n_b))
    critical = upper_critical(pmf, level)
    pairs = sum(n_b * n_c for _, n_b, n_c in rows)
    trials = max(200, min(_TRIALS["stratified"], _MAX_SIMULATED // pairs))
    rng = np.random.default_rng(20261125)
    # z_b - z_c of every pair: with the current run moved by d SDs beyond the moved
    # baseline, a pair is worse when z_c + d > z_b.
    gaps = [
        (rng.standard_normal((trials, n_b, 1)) - rng.standard_normal((trials, 1, n_c)))
        .reshape(trials, -1)
        .astype(np.float32)
        for _, n_b, n_c in rows
    ]

    def doubled_u(shift: float) -> np.ndarray:
        total = np.zeros(trials, dtype=np.int64)
        for gap, (sigma, _, _) in zip(gaps, rows, strict=True):
            scaled = shift / sigma if sigma > 0 else math.inf
            total += 2 * (gap < scaled).sum(axis=1)
        return total

    return simulated_margin(doubled_u, critical, power)


def detectable_slowdown(limit: float, worse_when: int, margin: float) -> float:
    """The slowdown (fraction of bandwidth lost) a check of ``limit`` catches, given the
    log margin beyond the limit: time checks move time up, bandwidth checks move it down."""
    if worse_when > 0:
        time_factor = (1 + limit) * math.exp(margin)
    else:
        time_factor = 1 / ((1 - limit) * math.exp(-margin))
    return 1 - 1 / time_factor


def insensitive(limit: float, worse_when: int, margin: float | None) -> bool:
    """True when the margin the samples need beyond the limit is larger than the limit
    itself (the row could not see even a slowdown of about twice its limit), or when no
    margin can be reached at all."""
    if margin is None:
        return True
    moved = math.exp(margin) - 1 if worse_when > 0 else 1 - math.exp(-margin)
    return moved > limit
