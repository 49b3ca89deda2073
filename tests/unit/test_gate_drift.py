"""The drift test against a rolling baseline: known distributions, then the real gate.

The statistics (colbench.stats.drift) are checked against Student-t quantiles from the
tables and against simulated lognormal runs of known between-run spread: an unchanged
run fails at most alpha of the time, a run slowed by the stated detectable change fails
about as often as the stated power. The gate is then run on run directories written the
way a sweep writes them and pooled with --update-baseline, as CI keeps its window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from colbench.commands.gate import report as gate_report
from colbench.commands.gate.checks import DEFAULT_MIN_BASELINE_RUNS
from colbench.commands.gate.command import run as gate_run
from colbench.commands.gate.command import update_baseline
from colbench.commands.gate.options import GateOptions
from colbench.commands.gate.verdict import Verdict
from colbench.stats import drift, power
from tests.unit.gate_runs import BIG, GATHER, KiB, run_gate, write_run

BANDWIDTH = -1


@pytest.mark.parametrize(
    ("level", "dof", "table"),
    [(0.05, 9, 1.833), (0.025, 4, 2.776), (0.005, 4, 4.604), (0.001, 4, 7.173), (0.05, 2, 2.920)],
)
def test_t_quantiles_match_the_tables(level: float, dof: int, table: float) -> None:
    assert drift.t_critical(level, dof) == pytest.approx(table, abs=0.002)


def test_noncentral_power_matches_a_simulation() -> None:
    # The noncentrality the figures come from, checked against draws of (Z + ncp) / W.
    rng = np.random.default_rng(5)
    dof, level = 7, 0.01
    ncp = drift.margin_in_scales(level, 0.8, dof)
    z = rng.standard_normal(200_000)
    w = np.sqrt(rng.chisquare(dof, 200_000) / dof)
    caught = float(((z + ncp) / w > drift.t_critical(level, dof)).mean())
    assert caught == pytest.approx(0.8, abs=0.006)


def _runs(rng: np.random.Generator, trials: int, k: int, sigma: float) -> np.ndarray:
    return rng.normal(0.0, sigma, (trials, k))


def test_row_test_keeps_alpha_and_catches_the_stated_change_at_the_stated_power() -> None:
    # K = 8 runs whose log medians drift with a known SD; a 25% bandwidth check at the
    # level of one row among 8 under weighted Holm (0.05 / 16).
    rng = np.random.default_rng(11)
    k, sigma, limit, level, trials = 8, 0.12, 0.25, 0.05 / 16, 1000
    spread_true = drift.RunSpread(0.0, sigma, k)
    margin = drift.detectable_margin(spread_true, level, 0.8)
    at_limit = math.log(1 - limit)  # the hardest unchanged case: exactly at the limit
    false_alarms = caught = 0
    for base in _runs(rng, trials, k, sigma):
        spread = drift.spread_of(list(base))
        assert spread is not None
        edge = drift.judge(spread, at_limit + rng.normal(0, sigma), BANDWIDTH, limit)
        slow = drift.judge(spread, at_limit - margin + rng.normal(0, sigma), BANDWIDTH, limit)
        false_alarms += edge.direction > 0 and edge.p_value is not None and edge.p_value <= level
        caught += slow.direction > 0 and slow.p_value is not None and slow.p_value <= level
    # Binomial: 3 standard errors around the level and around the power.
    assert false_alarms / trials <= level + 3 * math.sqrt(level / trials)
    assert 0.8 - 3 * 0.0127 <= caught / trials <= 0.8 + 3 * 0.0127
    # The stated slowdown is the limit moved by that margin.
    stated = power.detectable_slowdown(limit, BANDWIDTH, margin)
    assert stated == pytest.approx(1 - (1 - limit) * math.exp(-margin))


def test_overall_statistic_keeps_alpha_and_states_its_power() -> None:
    # 12 rows, a common drift of SD 0.10 per run and a row's own SD 0.05: pooling the rows
    # removes the rows' own part, not the drift.
    rng = np.random.default_rng(17)
    k, rows, trials, limit, level = 10, 12, 600, 0.25, 0.025
    common, own = 0.10, 0.05

    def run_logs(n: int) -> np.ndarray:  # rows x n runs
        return rng.normal(0, common, (1, n)) + rng.normal(0, own, (rows, n))

    alarms, caught, sds = 0, 0, []
    stated_margin = drift.margin_in_scales(level, 0.8, k - 1)
    true_sd = math.sqrt(common**2 + own**2 * math.pi / (2 * rows))
    shift = stated_margin * true_sd * math.sqrt(1 + 1 / k) - math.log(1 - limit)
    for _ in range(trials):
        base = run_logs(k).tolist()
        spread = drift.overall_spread(base)
        assert spread is not None
        sds.append(spread.sd_log)
        same = drift.overall_current(base, list(run_logs(1)[:, 0]))
        slow = drift.overall_current(base, list(run_logs(1)[:, 0] - shift))
        for value, is_slow in ((same, False), (slow, True)):
            j = drift.judge(spread, value, BANDWIDTH, limit)
            hit = j.direction > 0 and j.p_value is not None and j.p_value <= level
            caught += hit and is_slow
            alarms += hit and not is_slow
    assert float(np.mean(sds)) == pytest.approx(true_sd, rel=0.15)
    assert alarms / trials <= level
    assert 0.7 <= caught / trials <= 0.9


KEYS = (BIG, GATHER, ("all_reduce", 256 * KiB, "out"), ("broadcast", 64 * KiB, "in"))


def _run(path: Path, factor: float, rng: np.random.Generator) -> Path:
    """A run whose rows all move by ``factor`` (the runner's mood) and a little each."""
    times: dict[tuple[str, int, str], Sequence[float]] = {}
    for key in KEYS:
        row = factor * math.exp(rng.normal(0, 0.02))
        times[key] = [100.0 * row * math.exp(rng.normal(0, 0.03)) for _ in range(5)]
    return write_run(path, times)


def _window(tmp_path: Path, runs: int, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    baseline = tmp_path / "baseline"
    for i in range(runs):
        mood = math.exp(rng.normal(0, 0.05))
        update_baseline(_run(tmp_path / f"base{i}", mood, rng), baseline, keep=runs)
    return baseline


def test_gate_judges_on_drift_with_enough_baseline_runs(tmp_path: Path) -> None:
    baseline = _window(tmp_path, 6)
    rng = np.random.default_rng(99)
    same = run_gate(tmp_path, baseline, _run(tmp_path / "same", 1.0, rng), "busbw_gbps:-25%")
    assert same.drift is not None and same.drift.runs == 6 and same.passed
    line = gate_report.summary_line(same)
    assert "(between-run drift of 6 baseline runs); overall >= " in line
    assert "over 4 rows" in line and "within-run" not in line
    overall = same.drift.overall[0]
    assert overall.rows == 4 and overall.verdict is Verdict.SAME
    assert overall.detectable is not None and 0.25 < overall.detectable < 0.6
    # Twice as slow: every row and the overall statistic are worse; the gate fails.
    slow = run_gate(tmp_path, baseline, _run(tmp_path / "slow", 2.0, rng), "busbw_gbps:-25%")
    assert not slow.passed and slow.drift is not None
    assert slow.drift.overall[0].verdict is Verdict.WORSE
    assert {r.verdict for r in slow.rows} == {Verdict.WORSE}
    assert any(r.rule == "drift test" for row in slow.rows for r in row.checks)
    lines = gate_report.console_lines(slow)
    assert any(line.startswith("# overall busbw_gbps: worse, median change -5") for line in lines)
    assert 'classname="colbench.gate.overall"' in gate_report.junit_xml(slow)


def test_too_few_baseline_runs_keep_the_rank_test_and_say_so(tmp_path: Path) -> None:
    baseline = _window(tmp_path, 3)
    cur = _run(tmp_path / "cur", 1.0, np.random.default_rng(3))
    result = run_gate(tmp_path, baseline, cur, "busbw_gbps:-25%")
    assert result.drift is None and result.baseline_runs == 3
    line = gate_report.summary_line(result)
    assert line.endswith(
        "within-run spread only: a baseline of 3 run(s) (the drift test needs 5) cannot tell "
        "a slowdown from a busy machine; gate variants run interleaved for that "
        "(--variant-a/--variant-b)"
    )
    # The minimum is a flag: 3 runs are enough when asked.
    asked = run_gate(tmp_path, baseline, cur, "busbw_gbps:-25%", min_runs=3)
    assert asked.drift is not None and asked.drift.runs == 3


def test_fail_inconclusive_is_opt_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cur = _run(tmp_path / "cur", 1.0, np.random.default_rng(4))
    missing = str(tmp_path / "no-baseline-yet")
    plain = GateOptions(check=["busbw_gbps:-25%"], missing_baseline_ok=True)
    assert gate_run(missing, [str(cur)], plain) == 0
    strict = GateOptions(
        check=["busbw_gbps:-25%"], missing_baseline_ok=True, fail_inconclusive=True
    )
    assert gate_run(missing, [str(cur)], strict) == 5
    assert "PASS on correctness and presence only" in capsys.readouterr().out
    # A gate that judged performance passes with 0 under the flag too.
    baseline = _window(tmp_path, 6)
    assert gate_run(str(baseline), [str(cur)], GateOptions(
        check=["busbw_gbps:-25%"], fail_inconclusive=True
    )) == 0  # fmt: skip


def test_ci_keeps_enough_runs_for_the_drift_test() -> None:
    # scripts/ci-gate.sh's window and the workflow's must reach the gate's minimum, or CI
    # would never judge on drift.
    repo = Path(__file__).resolve().parents[2]
    script = (repo / "scripts" / "ci-gate.sh").read_text()
    default = re.search(r"keep=\$\{KEEP:-(\d+)\}", script)
    assert default is not None and int(default.group(1)) >= 2 * DEFAULT_MIN_BASELINE_RUNS
    workflow = (repo / ".github" / "workflows" / "colbench-gate.yml").read_text()
    assert f'KEEP: "{default.group(1)}"' in workflow
    # `make gate-baseline` measures as many runs as CI keeps, so a re-measured baseline is
    # judged on drift from its first use.
    makefile = (repo / "Makefile").read_text()
    assert f"BASELINE_RUNS ?= {default.group(1)}" in makefile


def test_too_small_a_minimum_is_a_usage_error(tmp_path: Path) -> None:
    from colbench.errors import UsageError

    cur = _run(tmp_path / "cur", 1.0, np.random.default_rng(6))
    flags = GateOptions(check=["busbw_gbps:-25%"], min_baseline_runs=2)
    with pytest.raises(UsageError, match="--min-baseline-runs must be >= 3, got 2"):
        gate_run(str(cur), [str(cur)], flags)
