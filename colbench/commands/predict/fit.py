"""Fitting the link parameters of one (op, algorithm) over every measured (N, size) point.

The fit minimises relative residuals (measured - model) / measured, as ``colbench fit``
does and for the same reason: sizes span many orders of magnitude, and an absolute fit
would let the largest size decide everything. Points that do not fit are found by
the one robust fit (:mod:`colbench.stats.noise`: Huber weights, then Tukey's bisquare)
and dropped when their residual is beyond the bisquare's cut-off
and above ``OUTLIER_FLOOR``; the final parameters are the plain relative least squares
over the points kept, so their covariance has its textbook form.

Uncertainty of a prediction (docs/predict.md): with A the design over the kept points
(rows x_i / t_i), s^2 = sum r_i^2 / (n - p) the residual variance and C = s^2 (A'A)^-1
the parameters' covariance, a prediction t0 = x0 . p at a new design point x0 has the
half-width  q * sqrt(x0' C x0 + (s * t0)^2),  q the two-sided 95% Student-t quantile at
n - p degrees of freedom. The first term is the parameters' uncertainty carried to x0:
it grows with the distance of x0 (its steps and bytes) from the measured points; the
second is the scatter a single new measurement has around the model (the residual rms
as a floor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from colbench.commands.predict.models import PARAMETERS, Parameters, Terms
from colbench.stats import noise

#: A point is never dropped for being within this relative distance of the model.
OUTLIER_FLOOR = 0.05
_LEVEL = 0.95


class Unidentifiable(ValueError):
    """The points cannot tell a parameter apart from the others; the message says why."""


@dataclass(frozen=True)
class Point:
    """One measured time: a median over the run's repeats at one (N, size)."""

    run: str
    world_size: int
    ranks_per_node: int
    size_bytes: float
    time_us: float
    terms: Terms


@dataclass(frozen=True)
class Dropped:
    point: Point
    residual: float
    """(measured - model) / measured, against the fit without this point's weight."""


@dataclass(frozen=True)
class Prediction:
    time_us: float
    low_us: float
    high_us: float


@dataclass(frozen=True)
class Fit:
    """Fitted parameters of one (op, algorithm) and how well they fit."""

    op: str
    algo: str
    params: Parameters
    free: tuple[int, ...]
    """Indices (into PARAMETERS) of the parameters fitted; the others are held at 0."""
    covariance: np.ndarray
    """Covariance of the free parameters (us^2, us^2/B...)."""
    residual_rms: float
    residual_max: float
    dof: int
    kept: tuple[Point, ...]
    dropped: tuple[Dropped, ...]
    notes: tuple[str, ...]

    @property
    def world_sizes(self) -> tuple[int, ...]:
        return tuple(sorted({p.world_size for p in self.kept}))

    def predict(self, t: Terms) -> Prediction:
        """The time at ``t`` with its 95% prediction interval (see the module doc)."""
        x = t.vector()[list(self.free)]
        time = float(t.vector() @ self.params.vector())
        spread = float(x @ self.covariance @ x) + (self.residual_rms * time) ** 2
        half = t_quantile(self.dof) * math.sqrt(max(spread, 0.0))
        return Prediction(time, max(time - half, 0.0), time + half)


def t_quantile(dof: int, level: float = _LEVEL) -> float:
    """Two-sided Student-t quantile of the prediction intervals."""
    return noise.t_two_sided(level, dof)


def _design(points: Sequence[Point]) -> tuple[np.ndarray, np.ndarray]:
    design = np.array([p.terms.vector() for p in points])
    time = np.array([p.time_us for p in points])
    return design, time


def _identifiable(design: np.ndarray, time: np.ndarray) -> tuple[list[int], list[int]]:
    """Columns that add information over the earlier ones, and those that do not."""
    relative = design / time[:, None]
    scale = np.linalg.norm(relative, axis=0)
    free: list[int] = []
    dependent: list[int] = []
    for column in range(design.shape[1]):
        if scale[column] == 0:
            continue
        trial = [*free, column]
        block = relative[:, trial] / scale[trial]
        if np.linalg.matrix_rank(block, tol=1e-8) == len(trial):
            free.append(column)
        else:
            dependent.append(column)
    return free, dependent


def _outliers(relative: np.ndarray, free: Sequence[int]) -> np.ndarray:
    """A mask of the points the robust fit gives no weight and that miss by more than
    OUTLIER_FLOOR."""
    params, weights = noise.reweighted(relative, free)
    residuals = 1.0 - relative @ params
    return (weights == 0) & (np.abs(residuals) > OUTLIER_FLOOR)


def fit(op: str, algo: str, points: Sequence[Point]) -> Fit:
    """Fit (overhead, alpha, beta, gamma) of ``op`` by ``algo``; raises Unidentifiable."""
    design, time = _design(points)
    free, dependent = _identifiable(design, time)
    notes = []
    if 1 in dependent:
        raise Unidentifiable("latency")
    if 2 in dependent:
        raise Unidentifiable("sizes")
    if 3 in dependent:
        notes.append(
            "gamma (reduction) cannot be told from beta on these points (reduced bytes "
            "are proportional to sent bytes): folded into beta"
        )
    relative = design / time[:, None]
    out = _outliers(relative, free)
    keep = ~out
    params = noise.solve(relative[keep], np.ones(int(keep.sum())), free)
    held = [c for c in free if params[c] == 0]
    if held:
        notes.append(
            "held at 0 (a negative value fitted better): " + ", ".join(PARAMETERS[c] for c in held)
        )
    active = tuple(c for c in free if c not in held)
    residuals = 1.0 - relative @ params
    kept_res = residuals[keep]
    dof = int(keep.sum()) - len(active)
    if dof < 1:
        raise Unidentifiable("points")
    variance, covariance = noise.covariance(relative[keep][:, list(active)], kept_res, dof)
    return Fit(
        op=op,
        algo=algo,
        params=Parameters(*(float(v) for v in params)),
        free=active,
        covariance=covariance,
        residual_rms=math.sqrt(variance),
        residual_max=float(np.max(np.abs(kept_res))),
        dof=dof,
        kept=tuple(p for p, k in zip(points, keep, strict=True) if k),
        dropped=tuple(
            Dropped(p, float(r)) for p, r, o in zip(points, residuals, out, strict=True) if o
        ),
        notes=tuple(notes),
    )
