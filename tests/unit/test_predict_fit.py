"""The fit recovers the parameters that generated the times, drops the point that does not
fit (the issue's all_gather at 2 ranks reading 2/3 of the link rate), and every prediction's
interval is what docs/predict.md defines: it grows away from the measured points."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from colbench.commands.predict import data, engine, models
from colbench.commands.predict.models import (
    OUTLIER_FLOOR,
    RING,
    Parameters,
    Point,
    fit,
    t_quantile,
    terms,
)
from colbench.errors import UsageError
from colbench.results.series import load_runs
from tests.unit.predict_runs import SIZES, TRUE, model_run

EIGHT_MIB = 8 << 20
Scale = Callable[[int, int], float]


def _points(
    op: str, worlds: list[int], params: Parameters = TRUE, scale: Scale | None = None
) -> list[Point]:
    out = []
    for n in worlds:
        for size in SIZES:
            t = terms(op, RING, n, 1, size)
            time = params.time_us(t) * (scale(n, size) if scale else 1.0)
            out.append(Point("r", n, 1, size, time, t))
    return out


def test_exact_times_give_back_the_parameters() -> None:
    f = fit("all_gather", RING, _points("all_gather", [2, 3, 4]))
    got = f.params
    assert got.overhead_us == pytest.approx(300.0, rel=1e-6)
    assert got.alpha_us == pytest.approx(120.0, rel=1e-6)
    assert got.beta_us_per_byte == pytest.approx(0.05, rel=1e-9)
    # all_gather reduces nothing: gamma has no column to fit.
    assert got.gamma_us_per_byte == 0 and 3 not in f.free
    assert f.residual_max < 1e-9 and not f.dropped


def test_gamma_folds_into_beta_when_the_points_cannot_separate_them() -> None:
    # Ring all_reduce sends 2(N-1)/N*S and reduces half of that: every point has the same
    # ratio, so only beta + gamma/2 is identified: 0.05 + 0.0005/2 = 0.05025 us/B.
    f = fit("all_reduce", RING, _points("all_reduce", [2, 3, 4]))
    assert f.params.beta_us_per_byte == pytest.approx(0.05025, rel=1e-9)
    assert f.params.gamma_us_per_byte == 0
    assert any("folded into beta" in note for note in f.notes)
    # ...which predicts the ring all_reduce at 8 ranks exactly.
    t8 = terms("all_reduce", RING, 8, 1, 1 << 20)
    assert f.predict(t8).time_us == pytest.approx(TRUE.time_us(t8), rel=1e-9)


def test_a_point_at_two_thirds_of_the_link_rate_is_dropped_and_named() -> None:
    # all_gather at 2 ranks, 8 MiB reads 2/3 of the link rate: its bandwidth term is 1.5x.
    def slow(n: int, size: int) -> float:
        if n != 2 or size != EIGHT_MIB:
            return 1.0
        t = terms("all_gather", RING, 2, 1, size)
        normal = TRUE.time_us(t)
        return (normal + 0.5 * t.link_bytes * TRUE.beta_us_per_byte) / normal

    f = fit("all_gather", RING, _points("all_gather", [2, 3, 4], scale=slow))
    assert [(d.point.world_size, d.point.size_bytes) for d in f.dropped] == [(2, EIGHT_MIB)]
    # Residual (measured - model) / measured of a 1.5x bandwidth term at 8 MiB, 2 ranks:
    # model = 300 + 120 + 4 MiB * 0.05 = 210135.2 us; measured adds half the 209715.2 us
    # transfer: 314992.8 us; (314992.8 - 210135.2) / 314992.8 = 0.3329.
    assert f.dropped[0].residual == pytest.approx(0.3329, abs=1e-3)
    assert f.params.beta_us_per_byte == pytest.approx(0.05, rel=1e-6)
    assert len(f.kept) == 3 * len(SIZES) - 1


def test_noise_within_the_floor_is_never_dropped() -> None:
    rng = random.Random(7)
    wobble = {(n, s): 1 + rng.uniform(-0.8, 0.8) * OUTLIER_FLOOR for n in (2, 3, 4) for s in SIZES}
    f = fit("all_gather", RING, _points("all_gather", [2, 3, 4], scale=lambda n, s: wobble[n, s]))
    assert not f.dropped


def test_the_interval_covers_the_truth_and_widens_away_from_the_measured_points() -> None:
    rng = random.Random(3)
    noise = {(n, s): rng.gauss(1.0, 0.02) for n in (2, 3, 4) for s in SIZES}
    f = fit("all_gather", RING, _points("all_gather", [2, 3, 4], scale=lambda n, s: noise[n, s]))
    relative_width = []
    for n in (4, 8, 64, 4096):
        t = terms("all_gather", RING, n, 1, 64 << 10)
        p = f.predict(t)
        assert p.low_us <= TRUE.time_us(t) <= p.high_us
        relative_width.append((p.high_us - p.low_us) / p.time_us)
    assert relative_width == sorted(relative_width) and relative_width[-1] > 2 * relative_width[0]
    # The floor: even at a measured point the half-width is at least q * rms * time.
    p = f.predict(terms("all_gather", RING, 3, 1, 64 << 10))
    assert (p.high_us - p.time_us) >= t_quantile(f.dof) * f.residual_rms * p.time_us - 1e-9


def test_the_interval_by_hand_for_a_two_parameter_fit() -> None:
    # Points exactly on time = 100 + 1*steps... with one point off, by hand: the half-width
    # at x0 is q * sqrt(x0' C x0 + (s t0)^2); check the formula against numpy directly.
    pts = _points("all_gather", [2, 3], scale=lambda n, s: 1.03 if s == SIZES[3] else 1.0)
    f = fit("all_gather", RING, pts)
    design = np.array([[1.0, p.terms.steps, p.terms.link_bytes] for p in pts])
    time = np.array([p.time_us for p in pts])
    a = design / time[:, None]
    params, *_ = np.linalg.lstsq(a, np.ones(len(pts)), rcond=None)
    resid = 1 - a @ params
    s2 = resid @ resid / (len(pts) - 3)
    x0 = np.array([1.0, 7, 7 / 8 * 65536])
    t0 = x0 @ params
    half = t_quantile(len(pts) - 3) * np.sqrt(x0 @ (s2 * np.linalg.inv(a.T @ a)) @ x0 + s2 * t0**2)
    p = f.predict(terms("all_gather", RING, 8, 1, 65536))
    assert p.time_us == pytest.approx(t0, rel=1e-9)
    assert p.high_us - p.time_us == pytest.approx(half, rel=1e-6)


@pytest.mark.parametrize(
    ("dof", "quantile"), [(1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042)]
)
def test_t_quantile_matches_the_tables(dof: int, quantile: float) -> None:
    assert t_quantile(dof) == pytest.approx(quantile, abs=4e-3)


def _measured(tmp_path: Path, worlds: list[int], **kw: Any) -> list[data.Measured]:
    runs = [model_run(tmp_path / f"r{n}", n, **kw) for n in worlds]
    return data.measured_of(load_runs(runs), None, [])


def test_one_world_size_is_refused_saying_what_to_measure(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"one world size only \(4 ranks\).*second world size"):
        engine.fit_all(_measured(tmp_path, [4]))


def test_too_few_sizes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"2 size\(s\).*at least 3"):
        engine.fit_all(_measured(tmp_path, [2, 3], sizes=SIZES[:2]))


def test_single_node_runs_do_not_predict_several_nodes(tmp_path: Path) -> None:
    fits = engine.fit_all(_measured(tmp_path, [2, 4], nnodes=1))
    # 8 ranks at 4 per node: 2 nodes, never measured.
    with pytest.raises(UsageError, match=r"one node only.*span 2 nodes.*at least two nodes"):
        engine.predict_one(fits, "all_reduce", RING, 8, 4, 1 << 20)
    # 8 ranks on one node of 8 stay inside what was measured.
    assert engine.predict_one(fits, "all_reduce", RING, 8, 8, 1 << 20) is not None


def test_tree_predictions_from_ring_runs_say_so(tmp_path: Path) -> None:
    fits = engine.fit_all(_measured(tmp_path, [2, 3, 4]))
    p = engine.predict_one(fits, "all_reduce", models.DOUBLE_TREE, 64, 1, 1 << 20)
    assert p is not None and p.basis == "ring runs' link parameters"
    # With the ring all_reduce fit (beta folded: 0.05025 us/B): N=64, G=1, M=64, depth 6:
    # 300 + 12*120 + 2 MiB * 0.05025 = 300 + 1440 + 105381.3 = 107121.3 us.
    assert p.time_us == pytest.approx(300 + 1440 + 2 * 1048576 * 0.05025, rel=1e-6)
    assert engine.predict_one(fits, "all_gather", models.TREE, 64, 1, 1 << 20) is None
