"""Small, dependency-free statistics for the regression gate: medians, spread, a rank test.

The gate compares a handful of samples per row (``sweep --repeat R``), so the rank test
is exact: the Mann-Whitney U p-value is counted over every way of splitting the pooled
ranks, ties included (mid-ranks), rather than read off a normal curve that is wrong at
R = 3..10. Only large samples fall back to the normal approximation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Alternative = Literal["greater", "less", "two-sided"]

#: Pooled sample sizes up to this are counted exactly. The subset counts stay below
#: 2**63 (C(60, 30) is about 1.2e17), and the counting is a few thousand numpy adds.
EXACT_MAX_N = 60


def median(values: Sequence[float]) -> float:
    if len(values) == 0:
        raise ValueError("median of nothing")
    return float(np.median(np.asarray(values, dtype=np.float64)))


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean; None when it says nothing (n < 2, mean 0)."""
    if len(values) < 2:
        return None
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    if mean == 0:
        return None
    return float(data.std(ddof=1)) / abs(mean)


def midranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1
        for i in range(start, end + 1):
            ranks[order[i]] = shared
        start = end + 1
    return ranks


@dataclass(frozen=True)
class RankTest:
    """Result of a Mann-Whitney U test of sample x against sample y."""

    #: Pairs (x_i, y_j) with x_i > y_j, ties counting one half.
    u: float
    p_value: float
    #: True when the p-value was counted exactly, False for the normal approximation.
    exact: bool


def mann_whitney_u(
    x: Sequence[float], y: Sequence[float], alternative: Alternative = "two-sided"
) -> RankTest:
    """Mann-Whitney U test; ``greater`` asks whether x tends to be larger than y."""
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        raise ValueError("the rank test needs at least one value on each side")
    pooled = [*map(float, x), *map(float, y)]
    if any(math.isnan(v) for v in pooled):
        raise ValueError("the rank test got NaN")
    ranks = midranks(pooled)
    rank_sum_x = sum(ranks[:n])
    u = rank_sum_x - n * (n + 1) / 2
    if n + m <= EXACT_MAX_N:
        p_greater, p_less = _exact_tails(ranks, n, rank_sum_x)
        exact = True
    else:
        p_greater, p_less = _normal_tails(ranks, n, m, u)
        exact = False
    if alternative == "greater":
        p = p_greater
    elif alternative == "less":
        p = p_less
    else:
        p = min(1.0, 2 * min(p_greater, p_less))
    return RankTest(u=u, p_value=p, exact=exact)


def rank_sum_counts(ranks: Sequence[float], n: int, dtype: type = np.int64) -> np.ndarray:
    """How many of the C(N, n) equally likely splits give each doubled rank sum of n.

    Mid-ranks are multiples of 1/2: doubled, they are integers and index the result, so
    ties are counted exactly. int64 counts are exact up to :data:`EXACT_MAX_N`; float64
    counts (``dtype=np.float64``) serve larger samples as a distribution.
    """
    doubled = [round(2 * r) for r in ranks]
    total = sum(doubled)
    # ways[k, s]: subsets of k of the ranks seen so far whose doubled ranks sum to s.
    ways: np.ndarray = np.zeros((n + 1, total + 1), dtype=dtype)
    ways[0, 0] = 1
    for seen, r in enumerate(doubled, start=1):
        for k in range(min(seen, n), 0, -1):
            ways[k, r:] += ways[k - 1, : total + 1 - r]
    return ways[n]


def _exact_tails(ranks: Sequence[float], n: int, rank_sum_x: float) -> tuple[float, float]:
    """P(rank sum >= observed) and P(<= observed) over all C(N, n) equally likely splits."""
    counts = rank_sum_counts(ranks, n)
    observed = round(2 * rank_sum_x)
    splits = float(counts.sum())
    return float(counts[observed:].sum()) / splits, float(counts[: observed + 1].sum()) / splits


def _normal_tails(ranks: Sequence[float], n: int, m: int, u: float) -> tuple[float, float]:
    """Normal approximation with the tie correction and a continuity correction of 1/2."""
    big_n = n + m
    # Counted in one pass: list.count per distinct value made this quadratic, seconds
    # for health's rank-by-rank links at 16 nodes of 8 ranks.
    tie_term = float(sum(t**3 - t for t in Counter(ranks).values()))
    variance = n * m / 12 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)))
    if variance <= 0:
        return 1.0, 1.0
    sd = math.sqrt(variance)
    mean = n * m / 2
    z_greater = (u - mean - 0.5) / sd
    z_less = (u - mean + 0.5) / sd
    return 0.5 * math.erfc(z_greater / math.sqrt(2)), 0.5 * math.erfc(-z_less / math.sqrt(2))


def smallest_one_sided_p(n: int, m: int) -> float:
    """The smallest one-sided p-value an exact rank test of n against m samples can give.

    It is reached only when every sample of one side beats every sample of the other:
    1 / C(n + m, n). At 3 against 3 that is 0.05; at 2 against 2 it is 1/6, so no
    alpha below that can ever be reached and the gate must use another rule.
    """
    try:
        return 1.0 / math.comb(n + m, n)
    except OverflowError:
        # C(n + m, n) past a float's range (some 1030 samples in all, as health's rank
        # by rank links at 16 nodes of 8 ranks): the p is 0 to any precision asked of it.
        return 0.0
