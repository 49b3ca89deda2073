"""colbench.stats.rank_tests: the exact rank test is checked against brute-force enumeration."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from colbench.stats import rank_tests


def brute_force_p(x: list[float], y: list[float], alternative: str) -> float:
    """Every split of the pooled values into |x| and |y|, counted by the U it gives."""
    pooled = x + y
    n = len(x)

    def u_of(first: list[float], second: list[float]) -> float:
        return sum((a > b) + 0.5 * (a == b) for a in first for b in second)

    observed = u_of(x, y)
    splits = list(itertools.combinations(range(len(pooled)), n))
    us = []
    for idx in splits:
        chosen = set(idx)
        us.append(
            u_of(
                [pooled[i] for i in idx], [pooled[i] for i in range(len(pooled)) if i not in chosen]
            )
        )
    greater = sum(u >= observed - 1e-9 for u in us) / len(us)
    less = sum(u <= observed + 1e-9 for u in us) / len(us)
    if alternative == "greater":
        return greater
    if alternative == "less":
        return less
    return min(1.0, 2 * min(greater, less))


def test_midranks_share_ties() -> None:
    assert rank_tests.midranks([10.0, 20.0, 10.0, 30.0, 20.0, 20.0]) == [
        1.5,
        4.0,
        1.5,
        6.0,
        4.0,
        4.0,
    ]


def test_separated_samples_reach_the_smallest_p() -> None:
    slow = [5.0, 6.0, 7.0]
    fast = [1.0, 2.0, 3.0]
    test = rank_tests.mann_whitney_u(slow, fast, "greater")
    assert test.exact and test.u == 9
    assert test.p_value == pytest.approx(1 / 20)
    assert rank_tests.mann_whitney_u(slow, fast, "less").p_value == pytest.approx(1.0)
    assert rank_tests.mann_whitney_u(slow, fast).p_value == pytest.approx(2 / 20)


def test_a_sample_against_itself_is_not_significant() -> None:
    values = [3.0, 1.0, 2.0, 5.0, 4.0]
    for alternative in ("greater", "less", "two-sided"):
        assert rank_tests.mann_whitney_u(values, values, alternative).p_value > 0.5  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(12))
def test_exact_p_matches_brute_force_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n, m = rng.randint(1, 6), rng.randint(1, 6)
    # Few distinct values, so ties are common.
    x = [float(rng.randint(0, 4)) for _ in range(n)]
    y = [float(rng.randint(1, 5)) for _ in range(m)]
    for alternative in ("greater", "less", "two-sided"):
        got = rank_tests.mann_whitney_u(x, y, alternative).p_value  # type: ignore[arg-type]
        assert got == pytest.approx(brute_force_p(x, y, alternative)), (x, y, alternative)


def test_normal_approximation_agrees_with_exact_near_the_switch() -> None:
    rng = random.Random(7)
    x = [rng.gauss(0.3, 1) for _ in range(30)]
    y = [rng.gauss(0.0, 1) for _ in range(30)]
    exact = rank_tests.mann_whitney_u(x, y, "greater")
    approx = rank_tests.mann_whitney_u([*x, 10.0], y, "greater")
    assert exact.exact and not approx.exact
    # One extra, large x barely moves the answer; both methods must agree on it.
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.03)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        rank_tests.mann_whitney_u([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        rank_tests.mann_whitney_u([math.nan], [1.0])
    with pytest.raises(ValueError, match="nothing"):
        rank_tests.median([])


def test_smallest_one_sided_p() -> None:
    assert rank_tests.smallest_one_sided_p(1, 1) == 0.5
    assert rank_tests.smallest_one_sided_p(2, 2) == pytest.approx(1 / 6)
    assert rank_tests.smallest_one_sided_p(3, 3) == pytest.approx(0.05)
    assert rank_tests.smallest_one_sided_p(5, 5) == pytest.approx(1 / 252)


def test_coefficient_of_variation() -> None:
    assert rank_tests.coefficient_of_variation([1.0]) is None
    assert rank_tests.coefficient_of_variation([0.0, 0.0]) is None
    assert rank_tests.coefficient_of_variation([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)
    assert rank_tests.median([3.0, 1.0, 2.0, 10.0]) == 2.5
