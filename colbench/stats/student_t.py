"""Student's t, central and noncentral, without scipy: one copy for every caller.

The gate's drift test needs the noncentral t (its detectable change at a stated power)
and the central quantile (its critical value), at 2-9 degrees of freedom where a normal
approximation promises power the t test lacks; ``predict`` needs the two-sided quantile
of its prediction intervals, from 1 degree of freedom. Both read them here.

T = (Z + ncp) / W with W = sqrt(V / dof), V chi-square with ``dof`` degrees of freedom,
so P(T > t) = E[Phi(ncp - t W)] over the distribution of W: one integral over a fixed
grid of W, exact to about 1e-4, which is all a p-value or an interval width needs. At 1
and 2 degrees of freedom the central quantile has a closed form (Cauchy at 1), used
there because the heavy tail puts the 97.5% point where the grid is coarsest.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

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
