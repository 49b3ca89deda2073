"""The one Student-t of colbench (stats.noise) against printed tables."""

from __future__ import annotations

import numpy as np
import pytest

from colbench.commands.predict.models import t_quantile
from colbench.stats import noise
from colbench.stats.drift import t_critical

# Two-sided 95% points of Student's t (any printed table).
TWO_SIDED_95 = [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (8, 2.306)]
TWO_SIDED_95 += [(10, 2.228), (20, 2.086), (30, 2.042), (120, 1.980)]


@pytest.mark.parametrize(("dof", "table"), TWO_SIDED_95)
def test_two_sided_95_matches_the_table(dof: int, table: float) -> None:
    assert noise.t_two_sided(0.95, dof) == pytest.approx(table, abs=2e-3)


@pytest.mark.parametrize(("dof", "table"), [(1, 6.314), (2, 2.920), (4, 2.132), (9, 1.833)])
def test_one_sided_95_matches_the_table(dof: int, table: float) -> None:
    assert noise.t_upper(0.05, dof) == pytest.approx(table, abs=2e-3)


@pytest.mark.parametrize("dof", [1, 2, 3, 7, 25])
def test_the_quantile_inverts_the_tail(dof: int) -> None:
    # The closed forms at 1 and 2 dof and the integral agree: one distribution.
    for tail in (0.4, 0.1, 0.025):
        assert noise.t_tail(noise.t_upper(tail, dof), dof) == pytest.approx(tail, abs=1e-3)


def test_the_tail_matches_simulation_with_and_without_noncentrality() -> None:
    rng = np.random.default_rng(7)
    dof, n = 4, 400_000
    w = np.sqrt(rng.chisquare(dof, n) / dof)
    z = rng.standard_normal(n)
    for t, ncp in ((1.0, 0.0), (2.5, 0.0), (1.0, 2.0), (3.0, 1.5)):
        simulated = float(((z + ncp) / w > t).mean())
        assert noise.t_tail(t, dof, ncp) == pytest.approx(simulated, abs=3e-3)


def test_gate_and_predict_read_the_same_quantiles() -> None:
    for dof in (2, 5, 9):
        assert t_critical(0.025, dof) == noise.t_upper(0.025, dof)
        assert t_quantile(dof) == noise.t_upper(0.025, dof)


@pytest.mark.parametrize(("tail", "dof"), [(0.0, 3), (1.0, 3), (0.05, 0)])
def test_out_of_range_arguments_are_refused(tail: float, dof: int) -> None:
    with pytest.raises(ValueError):
        if dof == 0:
            noise.t_tail(1.0, dof)
        else:
            noise.t_upper(tail, dof)
