"""When noise could explain a figure: the one set of thresholds compare, fit, plot --fit
and predict judge their figures by.

A shared machine's numbers move 5-45% within a run. A ratio, a fitted latency or
bandwidth, or a crossover of two fits is a result only where it stands out of that
noise, so each comes with its uncertainty and a word when noise could explain it:

- a fit whose relative rms error exceeds :data:`POOR_FIT_RMS` does not describe its
  points (predict's warning, first; docs/predict-validation.md: good fits stay within
  6-15%), and its parameters carry 95% intervals (:func:`interval`);
- a ratio of two rows is within noise when it is within :data:`BAND_SDS` combined
  relative spreads (coefficients of variation, :class:`Spread`) of 1
  (:func:`ratio_within_noise`);
- a summary ratio over sizes carries the 95% interval of its geometric mean
  (:func:`geometric_interval`), and noise could explain it when that holds 1.

Student's t, central and noncentral, without scipy, is here too, one copy for every caller
(these intervals, predict's, the gate's drift test at 2-9 degrees of freedom, where a normal
approximation promises power the t test lacks): T = (Z + ncp) / W, W = sqrt(V / dof) with V
chi-square, so P(T > t) = E[Phi(ncp - t W)], one integral over a fixed grid of W, exact to
about 1e-4. At 1 and 2 degrees of freedom the central quantile has a closed form (Cauchy at
1): the heavy tail puts the 97.5% point where the grid is coarsest.

The one robust fit is here as well, for fit's and predict's figures (:func:`reweighted`):
times spanning six orders of magnitude are fitted by *relative* residuals (``relative``
is the design divided row by row by the measured time; a point's residual is
``1 - relative @ params``). Small sizes on a shared machine are noisy, so residuals are
reweighted on their median absolute deviation: Huber first for a stable start, then
Tukey's bisquare, which gives gross outliers zero weight. Parameters are never negative
(a latency or a time per byte); their covariance (:func:`covariance`) is the one both
fit's intervals and predict's stand on.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from colbench.stats import rank_tests

#: A fitted model whose relative rms residual exceeds this does not describe its points.
POOR_FIT_RMS = 0.25
#: The level of every interval shown.
LEVEL = 0.95
#: A ratio within this many combined relative spreads of 1 could be noise (about 95%).
BAND_SDS = 2.0


#: Points of the grid the integrals run over: the figures are exact to about 1e-4.
_GRID = 6000
#: W = s / sigma, the sample SD in units of the true one, stays below this
#: (P(W > 6) < 1e-15 at 2 degrees of freedom, less at more).
_W_MAX = 6.0

_erf = np.frompyfunc(math.erf, 1, 1)


@functools.cache
def _w_grid(dof: int) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints of W = sqrt(V / dof), V ~ chi-square(dof), and their probabilities."""
    step = _W_MAX / _GRID
    w = (np.arange(_GRID) + 0.5) * step
    v = dof * w * w
    half = dof / 2
    # log density of V, then the change of variable dv = 2 dof w dw.
    log_f = (half - 1) * np.log(v) - v / 2 - half * math.log(2) - math.lgamma(half)
    weights = np.exp(log_f + np.log(2 * dof * w)) * step
    return w, weights / weights.sum()


def t_tail(t: float, dof: int, ncp: float = 0.0) -> float:
    """P(T > t) for Student-t (``ncp`` 0) or noncentral t with ``dof`` degrees of freedom."""
    if dof < 1:
        raise ValueError(f"Student-t needs at least 1 degree of freedom, not {dof}")
    w, weights = _w_grid(dof)
    x = (ncp - t * w) / math.sqrt(2)
    phi = 0.5 * (1 + np.asarray(_erf(x), dtype=float))
    return float(np.dot(phi, weights))


def solve_monotone(
    f: Callable[[float], float], target: float, low: float, high: float, falling: bool
) -> float:
    """Bisection for f(x) = target on [low, high], f monotone (falling or rising)."""
    for _ in range(60):
        mid = (low + high) / 2
        above = f(mid) > target
        if above == falling:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@functools.lru_cache(maxsize=256)
def t_upper(tail: float, dof: int) -> float:
    """The t with P(T > t) = ``tail`` for the central Student-t with ``dof``."""
    if not 0 < tail < 1:
        raise ValueError(f"a tail probability lies strictly between 0 and 1, not {tail}")
    p = 1 - tail
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    return solve_monotone(lambda t: t_tail(t, dof), tail, -50.0, 1000.0, falling=True)


def t_two_sided(level: float, dof: int) -> float:
    """The half-width, in standard errors, of a two-sided interval of ``level``."""
    # Rounded so that 0.95 and 0.025 reach the same cached quantile.
    return t_upper(round((1 - level) / 2, 12), dof)


def poor_fit(rel_rms: float | None) -> bool:
    return rel_rms is not None and rel_rms > POOR_FIT_RMS


def poor_fit_warning(what: str, rel_rms: float) -> str:
    """The one sentence for a fit that does not describe its points."""
    return (
        f"{what}: rms error {100 * rel_rms:.0f}% (over {POOR_FIT_RMS:.0%}): the model does "
        "not describe these points (noise, or a shape it lacks); its numbers are unreliable"
    )


def interval(estimate: float, standard_error: float, dof: int) -> tuple[float, float]:
    """The two-sided :data:`LEVEL` interval of an estimate (Student's t, ``dof``)."""
    if dof < 1 or not math.isfinite(standard_error):
        return -math.inf, math.inf
    half = t_two_sided(LEVEL, dof) * standard_error
    return estimate - half, estimate + half


@dataclass(frozen=True)
class Spread:
    """How a row's samples spread: their count and coefficient of variation."""

    samples: int
    cv: float | None
    """None with one sample: its noise is unknown."""

    def text(self) -> str:
        return "1 sample" if self.cv is None else f"±{100 * self.cv:.0f}%"


def spread(values: Sequence[float]) -> Spread:
    return Spread(len(values), rank_tests.coefficient_of_variation(values))


def band_factor(a: Spread, b: Spread) -> float | None:
    """How far from 1 noise alone could move B / A, as a factor: :data:`BAND_SDS`
    combined relative spreads; None when a side has one sample."""
    if a.cv is None or b.cv is None:
        return None
    return math.exp(BAND_SDS * math.hypot(a.cv, b.cv))


def ratio_within_noise(ratio: float, a: Spread, b: Spread) -> bool | None:
    """True when noise could explain ``ratio`` (B / A of two rows' medians): within
    :func:`band_factor` of 1; None when a side has one sample."""
    factor = band_factor(a, b)
    if factor is None or not ratio > 0:
        return None
    return 1 / factor <= ratio <= factor


@dataclass(frozen=True)
class GeometricMean:
    """The geometric mean of ratios over sizes, with its :data:`LEVEL` interval."""

    value: float
    low: float
    high: float

    @property
    def within_noise(self) -> bool:
        """The interval holds 1: noise alone could give this mean."""
        return self.low <= 1.0 <= self.high


def geometric_interval(ratios: Sequence[float]) -> GeometricMean:
    """The geometric mean of ``ratios`` and its Student-t interval on their logs (the
    sizes' ratios as samples of one ratio; unbounded with a single size)."""
    logs = np.log(np.asarray(ratios, dtype=float))
    mean = float(logs.mean())
    if len(logs) < 2:
        return GeometricMean(math.exp(mean), 0.0, math.inf)
    error = float(logs.std(ddof=1)) / math.sqrt(len(logs))
    low, high = interval(mean, error, len(logs) - 1)
    return GeometricMean(math.exp(mean), math.exp(low), math.exp(high))


HUBER_K = 1.345
BISQUARE_K = 4.685
_ITERATIONS = 30


def robust_weights(residuals: np.ndarray, k: float, bisquare: bool) -> np.ndarray:
    """Huber (``bisquare`` False) or Tukey bisquare weights of residuals, scaled by their
    median absolute deviation; the bisquare gives gross outliers zero weight."""
    spread = np.median(np.abs(residuals - np.median(residuals))) * 1.4826
    scale = max(float(spread), 1e-9)
    u = np.abs(residuals) / (k * scale)
    if bisquare:
        return np.where(u < 1, (1 - u**2) ** 2, 0.0)
    return np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-12))


def solve(relative: np.ndarray, weights: np.ndarray, free: Sequence[int]) -> np.ndarray:
    """Weighted least squares of relative residuals over the ``free`` columns, every
    parameter >= 0: the most negative is held at 0 and the rest refitted, until none is."""
    active = list(free)
    root_w = np.sqrt(weights)
    while True:
        params = np.zeros(relative.shape[1])
        if active:
            block = relative[:, active] * root_w[:, None]
            solution, *_ = np.linalg.lstsq(block, root_w, rcond=None)
            params[active] = solution
        negative = [c for c in active if params[c] < 0]
        if not negative:
            return params
        active.remove(min(negative, key=lambda c: params[c]))


def reweighted(relative: np.ndarray, free: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The robust fit's parameters and the points' last weights (0: an outlier).

    It stops reweighting before the weighted points are no more than the parameters: a
    fit through as many points as it has parameters passes through them exactly and
    leaves no scatter to tell an outlier by.
    """
    weights = np.ones(relative.shape[0])
    params = solve(relative, weights, free)
    for iteration in range(_ITERATIONS):
        residuals = 1.0 - relative @ params
        bisquare = iteration >= _ITERATIONS // 3
        weights = robust_weights(residuals, BISQUARE_K if bisquare else HUBER_K, bisquare)
        if np.count_nonzero(weights) <= len(free):
            break
        new = solve(relative, weights, free)
        done = np.allclose(new, params, rtol=1e-10, atol=0)
        params = new
        if done and bisquare:
            break
    return params, weights


def covariance(relative: np.ndarray, residuals: np.ndarray, dof: int) -> tuple[float, np.ndarray]:
    """The residual variance s^2 = sum r^2 / dof of a relative least-squares fit and its
    parameters' covariance s^2 (A'A)^-1, A the relative design of the fitted columns. A
    pseudo-inverse: whether the design tells its parameters apart is the caller's check."""
    variance = float(np.sum(residuals**2)) / dof
    return variance, variance * np.linalg.pinv(relative.T @ relative)
