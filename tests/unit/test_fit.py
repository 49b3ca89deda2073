"""The alpha-beta fit recovers known models, shrugs off noisy small sizes, finds crossovers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from colbench.cli import main
from colbench.commands.fit.model import (
    Model,
    approx_size,
    crossovers,
    fit_lines,
    fit_time,
    report,
    uncertainty,
)
from colbench.results.series import lines, load_runs
from tests.unit.rows import SIZES, alpha_beta, row, write_run

SIZES_WIDE = 2.0 ** np.arange(3, 31)  # 8 B .. 1 G


def test_exact_model_is_recovered() -> None:
    model = fit_time(SIZES_WIDE, 25.0 + SIZES_WIDE / 12.5e3)
    assert model.alpha_us == pytest.approx(25.0, rel=1e-9)
    assert model.beta_gbps == pytest.approx(12.5, rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_noisy_rows_with_outliers_at_small_sizes_within_five_percent(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = 25.0 + SIZES_WIDE / 12.5e3
    noisy = truth * np.exp(rng.normal(0, 0.03, len(truth)))
    # A shared machine: three of the eight smallest sizes are hit 2-20x.
    hit = rng.choice(8, 3, replace=False)
    noisy[hit] *= rng.uniform(2, 20, 3)
    model = fit_time(SIZES_WIDE, noisy)
    assert model.alpha_us == pytest.approx(25.0, rel=0.05)
    assert model.beta_gbps == pytest.approx(12.5, rel=0.05)


def test_outliers_get_no_weight_where_plain_least_squares_is_pulled_off() -> None:
    # Guards the test above: an absolute least-squares fit of the same kind of data
    # misses alpha by far more than 5%; the reweighted fit ignores the outliers.
    truth = 25.0 + SIZES_WIDE / 12.5e3
    noisy = truth.copy()
    noisy[[0, 2, 5]] *= 15
    design = np.column_stack([np.ones_like(SIZES_WIDE), SIZES_WIDE])
    (alpha, _), *_ = np.linalg.lstsq(design, noisy, rcond=None)
    assert abs(alpha / 25 - 1) > 0.5
    model = fit_time(SIZES_WIDE, noisy)
    assert model.alpha_us == pytest.approx(25.0, rel=1e-6)
    assert model.beta_gbps == pytest.approx(12.5, rel=1e-6)


def test_time_flat_in_size_is_a_pure_latency_model() -> None:
    model = fit_time([1024, 2048, 4096], [50.0, 50.0, 50.0])
    assert model.alpha_us == pytest.approx(50.0) and math.isinf(model.beta_gbps)


def test_no_reweighting_once_the_weighted_points_are_no_more_than_the_parameters() -> None:
    # Where fit's and predict's robust fitters disagreed: fit went on reweighting with
    # as few weighted points as parameters. Two sizes whose time falls give a pure
    # latency: the plain relative least squares, (1/200 + 1/150) / (1/200^2 + 1/150^2)
    # = 168 us; reweighting the scatter of two points moved it to 167.7.
    model = fit_time([1024, 1 << 20], [200.0, 150.0])
    assert math.isinf(model.beta_gbps)
    assert model.alpha_us == pytest.approx(168.0, rel=1e-12)


def test_fit_states_the_intervals_predict_would_and_none_where_its_points_cannot() -> None:
    # fit and predict compute a relative fit's covariance in one place (stats.noise).
    # Where their copies differed: a design whose columns are proportional (one size)
    # cannot tell latency from bandwidth; fit states no intervals for it rather than a
    # pseudo-inverse's. Elsewhere the standard errors are the textbook s^2 (A'A)^-1.
    assert uncertainty(np.full(4, 1024.0), np.full(4, 2.0), Model(2.0, math.inf)) is None
    sizes = np.array(SIZES, dtype=float)
    times = (200.0 + sizes / 1e3) * np.exp(np.random.default_rng(7).normal(0, 0.1, len(sizes)))
    model = fit_time(sizes, times)
    spread = uncertainty(sizes, times, model)
    assert spread is not None
    design = np.column_stack([1.0 / times, sizes / times])
    residuals = 1.0 - design @ np.array([model.alpha_us, spread.slope_us_per_byte])
    by_hand = residuals @ residuals / (len(sizes) - 2) * np.linalg.inv(design.T @ design)
    assert spread.alpha_se_us == pytest.approx(math.sqrt(by_hand[0, 0]), rel=1e-9)
    assert spread.slope_se == pytest.approx(math.sqrt(by_hand[1, 1]), rel=1e-9)


def test_one_size_cannot_be_fitted() -> None:
    with pytest.raises(ValueError, match="two distinct sizes"):
        fit_time([1024, 1024], [5.0, 6.0])


def _two_variant_run(tmp_path: Path) -> Path:
    ring, tree = alpha_beta(40.0, 20.0), alpha_beta(10.0, 10.0)
    rows = [row("all_reduce", s, ring(s), variant="NCCL_ALGO=Ring") for s in SIZES]
    rows += [row("all_reduce", s, tree(s), variant="NCCL_ALGO=Tree") for s in SIZES]
    return write_run(tmp_path / "run", rows)


def test_crossover_between_two_variants(tmp_path: Path) -> None:
    results = fit_lines(lines(load_runs([_two_variant_run(tmp_path)])[0]))
    assert [r.label for r in results] == ["NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    found = crossovers(results)
    assert len(found) == 1
    # 40 + s/20e3 = 10 + s/10e3  ->  s = 30 * 20e3 = 600000 bytes.
    assert found[0].size_bytes == pytest.approx(600000, rel=1e-6)
    assert found[0].faster_below.label == "NCCL_ALGO=Tree" and found[0].in_range
    bus = results[0].bus_beta_gbps
    assert bus == pytest.approx(20.0 * 1.5, rel=1e-6)  # all_reduce at 4 ranks
    text = report(results, found)
    # The CSV keeps six significant digits, so the size is 600000 give or take a byte.
    assert re.search(
        r"crossover at 586K \((?:600000|599999) B\): NCCL_ALGO=Tree is faster below", text
    )


def test_cli_fit_prints_alpha_beta_and_crossover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _two_variant_run(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["fit", str(run)])
    out = capsys.readouterr().out
    assert info.value.code == 0
    ring_line = next(line for line in out.splitlines() if line.strip().startswith("NCCL_ALGO=Ring"))
    # alpha, its 95% interval, beta, its interval: exact points, so a tight one.
    assert ring_line.split()[1:5] == ["40.00", "40-40", "20", "20-20"]
    assert "crossover at 586K" in out and "noise could explain" not in out
    assert "warning" not in out


def test_approx_size() -> None:
    assert approx_size(600000) == "586K"
    assert approx_size(1.5 * 1024**3) == "1.5G"
    assert approx_size(12) == "12"
    # From 1000 of a unit up to the next: whole numbers, never 1e+03K (a 6-rank all_gather
    # of 1M measures 1048512 B).
    assert approx_size(1000) == "1000"
    assert approx_size(1048512) == "1024K"
    assert approx_size(1000 * 1024**2) == "1000M"
    assert approx_size(999.4) == "999"


def test_the_intervals_hold_the_true_parameters_about_as_often_as_they_say() -> None:
    # 200 noisy runs (10% lognormal noise) of one model: a 95% interval that held the
    # truth far less often would understate the noise it is there to show.
    sizes = np.array(SIZES, dtype=float)
    held_alpha = held_beta = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        times = (200.0 + sizes / 1e3) * np.exp(rng.normal(0, 0.1, len(sizes)))
        spread = uncertainty(sizes, times, fit_time(sizes, times))
        assert spread is not None
        low, high = spread.alpha_interval
        held_alpha += low <= 200.0 <= high
        low, high = spread.beta_interval
        held_beta += low <= 1.0 <= high
    assert held_alpha >= 0.85 * 200 and held_beta >= 0.85 * 200


def test_a_crossover_of_noise_is_said_to_be_noise(
    tmp_path: Path,
) -> None:
    # gloo, where NCCL_ALGO changes nothing: two variants of one model, each with its
    # own 30% noise, still get two betas and cross somewhere. The fit must say that
    # noise could explain it, and flag the poor fits, instead of reporting a finding.
    rng = np.random.default_rng(2)  # a draw whose two fits cross
    model = alpha_beta(200.0, 1.0)
    rows = [
        row("all_reduce", s, model(s) * math.exp(rng.normal(0, 0.3)), variant=f"NCCL_ALGO={v}")
        for v in ("Ring", "Tree")
        for s in SIZES
    ]
    results = fit_lines(lines(load_runs([write_run(tmp_path / "noisy", rows)])[0]))
    assert all(r.spread is not None for r in results)
    found = crossovers(results)
    text = report(results, found)
    assert found and all(c.within_noise for c in found)
    assert "noise could explain it: the two fits do not differ beyond their 95% intervals" in text
    poor = [r for r in results if r.rel_rms is not None and r.rel_rms > 0.25]
    assert text.count("# warning: ") == len(poor)


def test_two_models_apart_beyond_their_noise_cross_for_real(tmp_path: Path) -> None:
    results = fit_lines(lines(load_runs([_two_variant_run(tmp_path)])[0]))
    (found,) = crossovers(results)
    assert not found.within_noise
    assert "noise could explain" not in report(results, [found])
