"""The one robust fit: relative least squares, reweighted Huber first, then bisquare.

``fit`` and ``predict`` fit times spanning six orders of magnitude, so they minimise
*relative* residuals: ``relative`` is the design divided row by row by the measured
time, and a point's residual is ``1 - relative @ params``. Small sizes on a shared
machine are noisy, so residuals are reweighted on their median absolute deviation:
Huber first for a stable start, then Tukey's bisquare, which gives gross outliers zero
weight. Parameters are never negative (a latency or a time per byte). The fitted
parameters' covariance (:func:`covariance`) is the one both fit's intervals and
predict's stand on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
