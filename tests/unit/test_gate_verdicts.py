"""The gate's verdict rule on one row's samples: direction, limit, rank test, small samples."""

from __future__ import annotations

import pytest

from colbench.commands.gate.verdict import Verdict, judge
from tests.unit.gate_runs import (
    STEADY,
    scaled,
)

# --- the verdict rule ----------------------------------------------------------------


def test_direction_a_faster_run_never_fails_a_time_check() -> None:
    fast = judge(STEADY, scaled(STEADY, 0.5), worse_when=+1, threshold=0.1)
    assert fast.verdict is Verdict.BETTER and fast.change == pytest.approx(-0.5)
    slow = judge(STEADY, scaled(STEADY, 1.5), worse_when=+1, threshold=0.1)
    assert slow.verdict is Verdict.WORSE and slow.p_value == pytest.approx(1 / 252)


def test_direction_bandwidth_fails_on_a_drop_only() -> None:
    assert judge(STEADY, scaled(STEADY, 0.6), -1, 0.15).verdict is Verdict.WORSE
    assert judge(STEADY, scaled(STEADY, 1.4), -1, 0.15).verdict is Verdict.BETTER


def test_within_the_limit_is_same_even_when_significant() -> None:
    result = judge(STEADY, scaled(STEADY, 1.05), +1, 0.10)
    assert result.verdict is Verdict.SAME and result.p_value is None


def test_a_change_beyond_the_limit_must_be_real_beyond_the_limit() -> None:
    # The medians moved 20% against a 15% limit, but the samples overlap the baseline
    # moved by 15%: the extra 5% is not shown real.
    base = [100.0, 90.0, 110.0, 95.0, 105.0]
    cur = [120.0, 105.0, 135.0, 112.0, 128.0]
    result = judge(base, cur, +1, 0.15)
    assert result.change == pytest.approx(0.20)
    assert result.verdict is Verdict.NOISY and result.p_value is not None
    assert result.p_value > 0.05


def test_noisy_big_change() -> None:
    base = [100.0, 300.0, 120.0]
    cur = [110.0, 400.0, 250.0]
    assert judge(base, cur, +1, 0.25).verdict is Verdict.NOISY


def test_small_sample_rule_needs_twice_the_limit_and_no_overlap() -> None:
    # One sample a side: the rank test can never reach alpha.
    assert judge([100.0], [125.0], +1, 0.15).verdict is Verdict.NOISY
    worse = judge([100.0], [131.0], +1, 0.15)
    assert worse.verdict is Verdict.WORSE and worse.rule == "small-sample rule"
    assert worse.p_value is None
    # Two a side: the medians moved 40%, but one current sample lies inside the moved range.
    assert judge([100.0, 110.0], [126.0, 160.0], +1, 0.15).verdict is Verdict.NOISY
    assert judge([100.0, 110.0], [130.0, 160.0], +1, 0.15).verdict is Verdict.WORSE


def test_three_a_side_use_the_rank_test_when_it_can_reach_alpha() -> None:
    base, cur = [100.0, 101.0, 99.0], [125.0, 126.0, 124.0]
    result = judge(base, cur, +1, 0.15)
    assert result.rule == "rank test" and result.p_value == pytest.approx(0.05)
    assert result.verdict is Verdict.WORSE
    # At alpha 0.01 three a side are too few: the small-sample rule wants a 30% change.
    strict = judge(base, cur, +1, 0.15, alpha=0.01)
    assert (strict.rule, strict.verdict) == ("small-sample rule", Verdict.NOISY)
