"""The gate's power: detectable slowdowns against known distributions, Holm's control."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from colbench.commands.gate import report as gate_report
from colbench.commands.gate.verdict import Verdict, judge
from colbench.stats import power, rank_tests
from colbench.stats.holm import holm
from tests.unit.gate_runs import BIG, STEADY, KiB, run_gate, scaled, write_run


def _lognormal(rng: random.Random, n: int, sigma: float, scale: float = 1.0) -> list[float]:
    return [scale * math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


def test_log_spread_estimates_the_lognormal_sigma() -> None:
    rng = random.Random(7)
    a, b = _lognormal(rng, 400, 0.2), _lognormal(rng, 400, 0.2, scale=3.0)
    # Each side about its own mean: a shift between the sides is not spread.
    assert power.log_spread(a, b) == pytest.approx(0.2, rel=0.06)
    assert power.log_spread([1.0], [2.0]) is None
    assert power.log_spread([1.0, 0.0], [2.0, 3.0]) is None


def test_detectable_change_matches_the_analytic_figure_at_large_samples() -> None:
    # 40 against 40 at alpha 0.05: the exact test is close to its normal approximation,
    # so the figure computed from lognormal samples of known sigma must be the analytic
    # one (normal power with the rank test's efficiency 3/pi) within the sampling error.
    rng = random.Random(11)
    sigma, limit = 0.1, 0.15
    base, cur = _lognormal(rng, 40, sigma), _lognormal(rng, 40, sigma)
    margin = power.shift_margin(power.log_spread(base, cur) or 0, 40, 40, 0.05)
    assert margin is not None
    analytic = power.normal_margin(sigma, 40, 40, 0.05)
    assert margin == pytest.approx(analytic, rel=0.12)
    stated = power.detectable_slowdown(limit, -1, margin)
    expected = 1 - (1 - limit) * math.exp(-analytic)
    assert stated == pytest.approx(expected, abs=0.01)
    # A time check states the same slowdown for the same margin.
    assert power.detectable_slowdown(limit / (1 - limit), +1, margin) == pytest.approx(stated)


def test_a_slowdown_beyond_the_stated_figure_is_caught_at_the_stated_power() -> None:
    # The gate's situation: a pooled baseline of 15, a run of 5, Holm's level over 10 rows.
    rng = random.Random(3)
    sigma, limit, level, n_b, n_c = 0.08, 0.15, 0.005, 15, 5
    margin = power.shift_margin(sigma, n_b, n_c, level)
    assert margin is not None
    stated = power.detectable_slowdown(limit, -1, margin)
    trials, caught, false_alarms = 400, 0, 0
    for _ in range(trials):
        base = _lognormal(rng, n_b, sigma)
        slower = _lognormal(rng, n_c, sigma, scale=1 - stated * 1.02)
        same = _lognormal(rng, n_c, sigma)
        caught += judge(base, slower, -1, limit, level).verdict is Verdict.WORSE
        false_alarms += judge(base, same, -1, limit, level).verdict is Verdict.WORSE
    # 80% power; three binomial standard errors (0.02 each) below it still fails the test.
    assert caught / trials >= 0.80 - 0.06
    assert false_alarms == 0
    # And the figure is not idly pessimistic: a slowdown well below it is mostly missed.
    missed = sum(
        judge(
            _lognormal(rng, n_b, sigma),
            _lognormal(rng, n_c, sigma, scale=1 - limit),
            -1,
            limit,
            level,
        ).verdict
        is not Verdict.WORSE
        for _ in range(200)
    )
    assert missed >= 180


def test_unreachable_levels_state_nothing() -> None:
    # 3 against 3 can give p = 0.05 at best: no power at all at 0.01.
    assert power.shift_margin(0.05, 3, 3, 0.01) is None
    assert power.insensitive(0.15, -1, None)
    assert not power.insensitive(0.15, -1, 0.1)
    assert power.insensitive(0.15, -1, 0.2)


def _holm(p_values: list[float], alpha: float) -> list[bool]:
    return holm(p_values, alpha).rejected


def test_holm_step_down() -> None:
    assert _holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert _holm([0.01, 0.02, 0.03], 0.05) == [True, True, True]
    assert _holm([], 0.05) == []


def test_holm_keeps_the_family_wise_rate_where_single_tests_do_not() -> None:
    # 20 rows of an unchanged run, each tested at 0.05 on 8 against 8 samples: some row
    # fails in most families unless Holm controls them.
    rng = random.Random(5)
    families, any_single, any_holm = 200, 0, 0
    for _ in range(families):
        p_values = [
            rank_tests.mann_whitney_u(
                _lognormal(rng, 8, 0.1), _lognormal(rng, 8, 0.1), "less"
            ).p_value
            for _ in range(20)
        ]
        any_single += any(p <= 0.05 for p in p_values)
        any_holm += any(_holm(p_values, 0.05))
    assert any_single / families > 0.4
    assert any_holm / families <= 0.05 + 0.03


def _rows(slow: list[float]) -> dict[tuple[str, int, str], list[float]]:
    rows = {("all_reduce", KiB << i, "in"): STEADY for i in range(11)}
    rows[BIG] = slow
    return rows


def test_the_gate_demotes_what_holm_does_not_back(tmp_path: Path) -> None:
    # One current sample inside the moved baseline: p = 4/252 = 0.016, below alpha but
    # not below alpha/11.
    base = write_run(tmp_path / "base", _rows(STEADY))
    slow = [*scaled(STEADY[:4], 1.5), 117.9]
    cur = write_run(tmp_path / "cur", _rows(slow))
    held = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
    (row,) = [r for r in held.rows if r.key["size_bytes"] == BIG[1]]
    assert row.verdict is Verdict.NOISY
    note = "not significant after weighted Holm over 11 rows and the pooled test"
    assert any(note in n for n in row.notes), row.notes
    assert held.passed and held.family == 11
    alone = run_gate(tmp_path, base, cur, "busbw_gbps:-15%", fwer="none")
    assert not alone.passed


def test_noisy_rows_are_insensitive_and_too_few_is_inconclusive(tmp_path: Path) -> None:
    wild = [100.0, 180.0, 60.0, 140.0, 90.0]
    base = write_run(tmp_path / "base", {BIG: wild, ("all_gather", BIG[1], "out"): STEADY})
    result = run_gate(tmp_path, base, base, "busbw_gbps:-15%", min_judged=2)
    verdicts = {r.key["op"]: r.verdict for r in result.rows}
    assert verdicts == {"all_reduce": Verdict.INSENSITIVE, "all_gather": Verdict.SAME}
    assert result.passed and result.inconclusive
    line = gate_report.summary_line(result)
    assert line.startswith("colbench gate: PASS on correctness and presence only")
    # A slowdown every row shows alike must show in the wild row too: pooling it with the
    # steady one cannot see twice the limit, so the pooled test does not count either.
    pattern = r"sensitive to slowdowns >= 17% on 1 row; pooled >= \d+% over 2 rows, too noisy"
    assert re.search(pattern + " to judge; 1 row too noisy to judge", line), line
    assert "performance inconclusive" in line
    enough = run_gate(tmp_path, base, base, "busbw_gbps:-15%", min_judged=1)
    assert not enough.inconclusive
    assert gate_report.summary_line(enough).startswith("colbench gate: PASS: ")
