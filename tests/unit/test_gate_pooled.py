"""The pooled test (colbench.commands.gate.pooled): its exact p, its false alarms at the
limit, its stated power, and the gate that carries a verdict no row can give alone.

The statistics are checked against counting every split of small samples and against
simulated lognormal rows of known spread; the gate is then run on run directories
written the way a sweep writes them (tests/unit/gate_runs.py)."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from colbench.commands.gate import pooled
from colbench.commands.gate import report as gate_report
from colbench.commands.gate.verdict import Verdict
from colbench.stats import power, rank_tests
from colbench.stats.holm import holm
from tests.unit.gate_runs import KiB, run_gate, scaled, write_run

BANDWIDTH = -1


def _brute_force_p(strata: Sequence[pooled.Stratum]) -> float:
    """P(S >= observed) by listing every split of every row's pooled values."""
    observed = sum(s.doubled_u for s in strata)
    per_row = []
    for s in strata:
        values, n = [*s.current, *s.moved], len(s.current)
        splits = []
        for chosen in itertools.combinations(range(len(values)), n):
            cur = tuple(values[i] for i in chosen)
            moved = tuple(values[i] for i in range(len(values)) if i not in chosen)
            splits.append(pooled.Stratum(moved, cur).doubled_u)
        per_row.append(splits)
    hits = total = 0
    for combo in itertools.product(*per_row):
        total += 1
        hits += sum(combo) >= observed
    return hits / total


def test_exact_p_counts_every_split_ties_included() -> None:
    strata = [
        pooled.Stratum((1.0, 2.0, 3.0), (2.5, 3.5)),
        pooled.Stratum((0.5, 1.0, 1.0), (1.0, 2.0, 0.7)),  # ties with the moved baseline
        pooled.Stratum((4.0, 5.0), (6.0, 7.0)),
    ]
    assert pooled.pooled_p(strata) == pytest.approx(_brute_force_p(strata))
    # One row is the row's own rank test.
    one = strata[:1]
    test = rank_tests.mann_whitney_u(one[0].current, one[0].moved, "greater")
    assert pooled.pooled_p(one) == pytest.approx(test.p_value)
    # Every current sample beyond every moved one in 3 rows of 3 against 3: 1/20 cubed.
    apart = [pooled.Stratum((0.0, 0.1, 0.2), (1.0, 1.1, 1.2))] * 3
    assert pooled.pooled_p(apart) == pytest.approx(0.05**3)
    assert pooled.smallest_p([(3, 3)] * 3) == pytest.approx(0.05**3)


def test_the_test_and_its_power_figure_read_one_tail_at_an_exact_level() -> None:
    # Three rows of 3 against 3 whose U are 9, 9 and 5: P(S >= observed) is 80 / 8000,
    # 0.01 exactly. The test rejected such a run at 0.01 while the power figure, its
    # tail summed another way (0.010000000000000002), counted it as not caught and
    # stated a larger figure; both read rank_tests.upper_tail now.
    strata = [pooled.Stratum((0.0, 0.1, 0.2), (1.0, 1.1, 1.2))] * 2
    strata.append(pooled.Stratum((0.0, 1.05, 1.25), (1.0, 1.1, 1.2)))
    assert [s.doubled_u for s in strata] == [18, 18, 10]
    assert _brute_force_p(strata) == 0.01
    assert pooled.pooled_p(strata) == 0.01
    # The figure at 0.01 uses that critical sum: the same as just above 0.01, not below.
    figure = pooled.uniform_margin([(0.1, 3, 3)] * 3, 0.01, 0.8)
    assert figure == pooled.uniform_margin([(0.1, 3, 3)] * 3, 0.0100001, 0.8)
    assert figure != pooled.uniform_margin([(0.1, 3, 3)] * 3, 0.0099999, 0.8)


def test_normal_approximation_for_many_samples_agrees_with_the_exact_count() -> None:
    rng = np.random.default_rng(2)
    strata = [
        pooled.Stratum(tuple(rng.normal(0, 1, 40)), tuple(rng.normal(0.3, 1, 30))) for _ in range(3)
    ]
    exact = pooled.pooled_p(strata)
    saved = pooled.EXACT_MAX_N
    pooled.EXACT_MAX_N = 10
    try:
        approximate = pooled.pooled_p(strata)
    finally:
        pooled.EXACT_MAX_N = saved
    assert 0.001 < exact < 0.5
    assert approximate == pytest.approx(exact, rel=0.1)


def _lognormal(rng: np.random.Generator, n: int, sigma: float, scale: float = 1.0) -> list[float]:
    return list(scale * np.exp(rng.normal(0.0, sigma, n)))


def _gate_p(rng: np.random.Generator, rows: int, n: int, sigma: float, factor: float) -> float:
    """The pooled p of ``rows`` rows of bandwidths: n samples a side, the current run's
    at ``factor`` times the baseline's, a -15% check."""
    strata = [
        pooled.Stratum.of(
            _lognormal(rng, n, sigma), _lognormal(rng, n, sigma, factor), BANDWIDTH, 0.15
        )
        for _ in range(rows)
    ]
    return pooled.pooled_p(strata)


def test_a_run_at_the_limit_fails_at_most_alpha_of_the_time() -> None:
    rng = np.random.default_rng(7)
    trials = 600
    at_limit = sum(_gate_p(rng, 6, 3, 0.1, 0.85) <= 0.05 for _ in range(trials))
    same = sum(_gate_p(rng, 6, 3, 0.1, 1.0) <= 0.05 for _ in range(trials))
    # alpha plus three binomial standard errors (0.009 each).
    assert at_limit / trials <= 0.05 + 0.027
    assert same == 0


def test_a_uniform_slowdown_beyond_the_stated_figure_is_caught_at_the_stated_power() -> None:
    # The README's recipe: 3 rows of 3 against 3, every row slowed alike.
    rng = np.random.default_rng(3)
    sigma, limit, level = 0.06, 0.15, 0.05
    margin = pooled.uniform_margin([(sigma, 3, 3)] * 3, level, 0.8)
    assert margin is not None
    stated = power.detectable_slowdown(limit, BANDWIDTH, margin)
    assert 0.15 < stated < 0.35
    trials = 400
    caught = sum(_gate_p(rng, 3, 3, sigma, 1 - stated * 1.02) <= level for _ in range(trials))
    assert caught / trials >= 0.80 - 0.06
    # Not idly pessimistic: halfway between the limit and the figure, mostly missed.
    halfway = 1 - (limit + stated) / 2
    missed = sum(_gate_p(rng, 3, 3, sigma, halfway) > level for _ in range(200))
    assert missed >= 0.4 * 200
    # Pooling is what makes the figure: one row of 3 against 3 states none at this level.
    assert power.shift_margin(sigma, 3, 3, level / 2) is None
    assert pooled.uniform_margin([(sigma, 3, 3)] * 3, 1e-5, 0.8) is None


def _rows(count: int, size: int = 1024 * KiB) -> list[tuple[str, int, str]]:
    return [("all_gather", size << i, "out") for i in range(count)]


# Bus bandwidth is what the check reads; times set it (busbw = bytes / time).
QUIET = [100.0, 102.0, 98.0]


def test_a_slowdown_every_row_shows_fails_the_default_gate(tmp_path: Path) -> None:
    # Issue 21's case: 3 rows of 3 samples, every current sample 30% below every
    # baseline one; no row can be judged alone (p >= 0.05 > 0.05 / 6).
    rows = _rows(3)
    base = write_run(tmp_path / "base", dict.fromkeys(rows, QUIET))
    slow = write_run(tmp_path / "slow", dict.fromkeys(rows, scaled(QUIET, 1 / 0.7)))
    result = run_gate(tmp_path, base, slow, "busbw_gbps:-15%")
    assert not result.passed and result.failures == 1
    assert {r.verdict for r in result.rows} == {Verdict.NOISY}
    (overall,) = result.overall
    assert overall.verdict is Verdict.WORSE and overall.rows == 3
    assert overall.p_value == pytest.approx(0.05**3)
    assert overall.change == pytest.approx(-0.3, abs=1e-4)
    assert result.pooled is not None and result.pooled.alone == 3
    # Every row left the family, so the pooled test had all of alpha.
    assert result.pooled.overall_level == pytest.approx(0.05)
    line = gate_report.summary_line(result)
    assert line.startswith("colbench gate: FAIL (1 failure(s)): 3 rows: 3 noisy; ")
    assert "no row can be judged alone (3/3 samples: p >= 0.05 > 0.0083)" in line
    assert re.search(r"pooled >= \d+% over 3 rows \(worse: median change -30.0%", line), line
    assert line.endswith("cannot tell a slowdown from a busy machine; gate variants run "
                         "interleaved for that (--variant-a/--variant-b)")  # fmt: skip
    lines = gate_report.console_lines(result)
    assert any(x.startswith("# pooled busbw_gbps: worse, median change -30.0%") for x in lines)
    junit = ET.fromstring(gate_report.junit_xml(result))
    pooled_case = junit.find(".//testcase[@classname='colbench.gate.pooled']")
    assert pooled_case is not None and pooled_case.find("failure") is not None
    # Each row alone (--fwer none) is still only as good as 3 samples: p = 0.05.
    alone = run_gate(tmp_path, base, slow, "busbw_gbps:-15%", fwer="none")
    assert {r.verdict for r in alone.rows} == {Verdict.WORSE}


def test_an_honest_rerun_and_the_run_itself_pass(tmp_path: Path) -> None:
    rows = _rows(3)
    base = write_run(tmp_path / "base", dict.fromkeys(rows, QUIET))
    rerun = write_run(tmp_path / "rerun", {key: [101.0, 97.0, 104.0] for key in rows})
    # A slowdown within the limit, every sample below the baseline's: not a failure.
    within = write_run(tmp_path / "within", dict.fromkeys(rows, scaled(QUIET, 1 / 0.9)))
    for cur in (base, rerun, within):
        result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
        assert result.passed and not result.inconclusive, gate_report.summary_line(result)
        assert result.overall[0].verdict is Verdict.SAME


def test_rows_that_can_reach_their_level_stay_in_the_family(tmp_path: Path) -> None:
    # 5 against 5 reach p = 1/252 = 0.004: in a family of 6 rows and the pooled test
    # (0.05 / 12 = 0.0042 each) a row can be judged alone; with 7 rows (0.0036) none can.
    five = [100.0, 101.0, 99.0, 100.5, 99.5]
    for count, alone in ((6, 0), (7, 7)):
        rows = _rows(count, 64 * KiB)
        base = write_run(tmp_path / f"b{count}", dict.fromkeys(rows, five))
        cur = dict.fromkeys(rows, five)
        cur[rows[0]] = scaled(five, 2.0)  # one row half as fast, the rest unchanged
        result = run_gate(tmp_path, base, write_run(tmp_path / f"c{count}", cur),
                          "busbw_gbps:-15%")  # fmt: skip
        assert result.pooled is not None and result.pooled.alone == alone
        assert result.pooled.nominal_row_level == pytest.approx(0.025 / count)
        verdicts = [r.verdict for r in result.rows if r.key["size_bytes"] == rows[0][1]]
        assert verdicts == [Verdict.WORSE if alone == 0 else Verdict.NOISY]
        # One slow row of many does not move the pooled test.
        assert result.overall[0].verdict is not Verdict.WORSE


def test_a_rejected_pooled_test_passes_its_share_to_the_rows(tmp_path: Path) -> None:
    # 6 rows of 5 against 5, all half as fast: the pooled test is rejected first, and
    # then every row reaches Holm's plain levels (0.05 / 6 >= 0.004).
    five = [100.0, 101.0, 99.0, 100.5, 99.5]
    rows = _rows(6, 64 * KiB)
    base = write_run(tmp_path / "base", dict.fromkeys(rows, five))
    slow = write_run(tmp_path / "slow", dict.fromkeys(rows, scaled(five, 2.0)))
    result = run_gate(tmp_path, base, slow, "busbw_gbps:-15%")
    assert {r.verdict for r in result.rows} == {Verdict.WORSE}
    assert result.failures == 7


def test_the_figures_state_each_ones_level(tmp_path: Path) -> None:
    five = [100.0, 103.0, 97.0, 101.5, 98.5]
    rows = _rows(4, 64 * KiB)
    base = write_run(tmp_path / "base", dict.fromkeys(rows, five))
    result = run_gate(tmp_path, base, base, "busbw_gbps:-15%")
    summary = result.pooled
    assert summary is not None and summary.alone == 0
    # Weights 1/2 for the pooled test, 1/8 for each row.
    assert (summary.row_level, summary.overall_level) == pytest.approx((0.05 / 8, 0.025))
    sigma = power.log_spread(five, five) or 0.0
    row_margin = power.shift_margin(sigma, 5, 5, 0.05 / 8)
    assert row_margin is not None
    assert result.rows[0].detectable == pytest.approx(
        power.detectable_slowdown(0.15, BANDWIDTH, row_margin), rel=1e-3
    )
    pooled_margin = pooled.uniform_margin([(sigma, 5, 5)] * 4, 0.025, 0.8)
    assert pooled_margin is not None and pooled_margin < row_margin
    assert result.overall[0].detectable == pytest.approx(
        power.detectable_slowdown(0.15, BANDWIDTH, pooled_margin), rel=1e-2
    )
    text = gate_report.console_lines(result)
    assert any("rows at >= 0.0063, pooled at >= 0.025" in x for x in text), text


def test_the_weighted_family_keeps_alpha_for_unchanged_runs() -> None:
    # 12 rows of 5 against 5 drawn alike (a run against an honest rerun with no drift
    # between them): any failure, rows or pooled, in at most alpha of the families.
    rng = np.random.default_rng(13)
    families, failed = 300, 0
    for _ in range(families):
        strata = [
            pooled.Stratum.of(_lognormal(rng, 5, 0.1), _lognormal(rng, 5, 0.1, 0.85), -1, 0.15)
            for _ in range(12)
        ]
        rows = [rank_tests.mann_whitney_u(s.current, s.moved, "greater").p_value for s in strata]
        p_all = pooled.pooled_p(strata)
        failed += any(holm([*rows, p_all], 0.05, [1 / 24] * 12 + [0.5]).rejected)
    assert failed / families <= 0.05 + 0.038


def test_a_pooled_check_of_few_samples_states_what_it_could_see(tmp_path: Path) -> None:
    # Two samples a side: no row test at all (the small-sample rule), but the pooled
    # test of 8 rows reaches (1/6)^8.
    rows = _rows(8, 64 * KiB)
    two = [100.0, 101.0]
    base = write_run(tmp_path / "base", dict.fromkeys(rows, two))
    result = run_gate(tmp_path, base, base, "busbw_gbps:-15%")
    assert result.overall[0].detectable is not None
    assert math.isclose(pooled.smallest_p([(2, 2)] * 8), (1 / 6) ** 8)
