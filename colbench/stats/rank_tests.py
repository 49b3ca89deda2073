"""The rank tests every verdict uses, with medians and spread: Mann-Whitney for two
samples (the gate's rows, p2p's and health's links, the pooled test's strata) and the
Wilcoxon signed-rank test for pairs (the paired gate).

The gate compares a handful of samples per row (``sweep --repeat R``), so the rank tests
are exact: a p-value is counted over every way of splitting the pooled ranks (or every
sign pattern of the pairs), ties included (mid-ranks), rather than read off a normal
curve that is wrong at R = 3..10. Only large samples fall back to the normal
approximation.
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


def pooled_sd(groups: Sequence[Sequence[float]]) -> float | None:
    """The pooled standard deviation of groups, each about its own mean; None without a
    degree of freedom (no group of two)."""
    squares, dof = 0.0, 0
    for group in groups:
        if len(group) < 2:
            continue
        mean = sum(group) / len(group)
        squares += sum((x - mean) ** 2 for x in group)
        dof += len(group) - 1
    return math.sqrt(squares / dof) if dof else None


def midranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    _, group, counts = np.unique(
        np.asarray(values, dtype=np.float64), return_inverse=True, return_counts=True
    )
    # A group of c ties ending at rank e spans e - c + 1 .. e: its mean is e - (c - 1) / 2.
    shared = np.cumsum(counts) - (counts - 1) / 2
    return [float(r) for r in shared[group.reshape(-1)]]


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
    exact = n + m <= EXACT_MAX_N
    if exact:
        p_greater, p_less = _exact_tails(ranks, n, rank_sum_x)
    else:
        p_greater, p_less = _normal_tails(ranks, n, m, u)
    two_sided = min(1.0, 2 * min(p_greater, p_less))
    p = {"greater": p_greater, "less": p_less}.get(alternative, two_sided)
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


def u_variance(ranks: Sequence[float], n: int, m: int) -> float:
    """The null variance of U for n against m samples with these mid-ranks (ties
    corrected); its mean is n m / 2."""
    big_n = n + m
    tie_term = float(sum(t**3 - t for t in Counter(ranks).values()))
    return n * m / 12 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)))


def u_null(ranks: Sequence[float], n: int, m: int) -> np.ndarray:
    """P(2 U = k), k = 0 .. 2 n m, for the n of n + m samples with these mid-ranks."""
    counts = rank_sum_counts(ranks, n, np.float64)
    offset = n * (n + 1)
    pmf = counts[offset : offset + 2 * n * m + 1]
    return pmf / pmf.sum()


def upper_tail(null: np.ndarray) -> np.ndarray:
    """P(statistic >= k) for every k, from its null counts or probabilities: the one tail
    a test's p-value and its power figure's critical value are both read from, so that
    the two agree at a level the tail reaches exactly."""
    return np.cumsum(null[::-1])[::-1] / null.sum()


def _normal_tails(ranks: Sequence[float], n: int, m: int, u: float) -> tuple[float, float]:
    """Normal approximation with the tie correction and a continuity correction of 1/2."""
    variance = u_variance(ranks, n, m)
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


#: Above this many pairs the signed-rank distribution is approximated by a normal one.
EXACT_MAX_PAIRS = 60


def signed_rank_counts(doubled_ranks: Sequence[int]) -> np.ndarray:
    """How many of the 2^n sign patterns give each doubled W+ (the doubled ranks of the
    positive differences summed): dynamic programming on the doubled ranks."""
    total = sum(doubled_ranks)
    ways = np.zeros(total + 1, dtype=np.float64)
    ways[0] = 1.0
    for r in doubled_ranks:
        ways[r:] = ways[r:] + ways[: total + 1 - r].copy()
    return ways


def signed_rank_p_greater(diffs: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value that ``diffs`` are centred above 0.

    Zeros are dropped (Wilcoxon's convention); ties share mid-ranks. Exact (all 2^n sign
    patterns counted) up to :data:`EXACT_MAX_PAIRS`, normal with tie and continuity
    corrections beyond.
    """
    values = [float(d) for d in diffs if d != 0]
    n = len(values)
    if n == 0:
        return 1.0
    ranks = midranks([abs(v) for v in values])
    w_plus = sum(r for r, v in zip(ranks, values, strict=True) if v > 0)
    if n <= EXACT_MAX_PAIRS:
        ways = signed_rank_counts([round(2 * r) for r in ranks])
        return float(ways[round(2 * w_plus) :].sum() / ways.sum())
    mean = n * (n + 1) / 4
    ties = sum(t**3 - t for t in Counter(ranks).values())
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties / 48)
    z = (w_plus - mean - 0.5) / sd
    return 0.5 * math.erfc(z / math.sqrt(2))
