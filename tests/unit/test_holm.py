"""colbench.stats.holm: the one Holm procedure (weighted), its decisions and adjusted p."""

from __future__ import annotations

import random

import pytest

from colbench.stats.holm import holm


def test_a_p_exactly_at_holms_level_is_rejected() -> None:
    # The case where the paired gate's adjusted p-values (11 * p < alpha) and the
    # threshold form (p <= alpha / 11) disagreed: in floats 11 * (0.05 / 11) > 0.05.
    # Holm's rule is p <= alpha / m, so it is rejected.
    assert 11 * (0.05 / 11) > 0.05
    result = holm([0.05 / 11] + [0.5] * 10, 0.05)
    assert result.rejected == [True] + [False] * 10
    assert result.adjusted[0] == pytest.approx(0.05)


@pytest.mark.parametrize(
    "p_values", [[0.01, 0.04, 0.03, 0.5], [0.001] * 5, [0.2, 0.0125, 0.013, 0.02], [1.0]]
)
def test_adjusted_p_values_agree_with_the_decisions(p_values: list[float]) -> None:
    for alpha in (0.01, 0.05, 0.1):
        result = holm(p_values, alpha)
        assert all(a >= p for a, p in zip(result.adjusted, p_values, strict=True))
        assert [a <= alpha for a in result.adjusted] == result.rejected


def test_step_down_stops_at_the_first_kept() -> None:
    # Sorted 0.01 <= 0.05/4, 0.03 > 0.05/3: only the first is rejected, although
    # 0.04 <= 0.05/2 would pass at its own step.
    assert holm([0.01, 0.04, 0.03, 0.5], 0.05).rejected == [True, False, False, False]
    assert holm([0.01, 0.012, 0.02, 0.5], 0.05).adjusted == pytest.approx([0.04, 0.04, 0.04, 0.5])


def test_weighted() -> None:
    # Smallest p / w first: the row at 0.001 <= 0.05 * 0.25 / 1, then the overall
    # hypothesis at 0.02 <= 0.05 * 0.5 / 0.75; the last row then has all of alpha left,
    # and 0.06 > 0.05 keeps it.
    weights = [0.5, 0.25, 0.25]
    assert holm([0.02, 0.06, 0.001], 0.05, weights).rejected == [True, False, True]
    assert holm([0.02, 0.04, 0.001], 0.05, weights).rejected == [True] * 3
    # Step one needs p <= alpha * w: 0.04 > 0.025 stops everything.
    assert holm([0.04, 0.9], 0.05, [0.5, 0.5]).rejected == [False, False]
    # Weight 0: out of the family, never rejected.
    result = holm([0.001, 0.001], 0.05, [0.5, 0.0])
    assert result.rejected == [True, False] and result.adjusted[1] == 1.0


def test_family_wise_rate_under_the_null() -> None:
    # Uniform p-values of 8 true hypotheses: any rejection at most alpha of the time.
    rng = random.Random(7)
    trials = 4000
    false = sum(any(holm([rng.random() for _ in range(8)], 0.05).rejected) for _ in range(trials))
    assert false / trials <= 0.05 + 3 * (0.05 * 0.95 / trials) ** 0.5
