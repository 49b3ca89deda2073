"""``colbench fit``: the latency-bandwidth (alpha-beta) model per measured line, time_us =
alpha_us + size_bytes / (beta_gbps * 1e3), and where two lines' models cross.

The fit is the one robust fit (:mod:`colbench.stats.noise`): relative residuals,
because message sizes span six or more orders of magnitude and an absolute fit would
leave alpha as noise; Huber-then-bisquare reweighting, because small sizes on a shared
machine are noisy (gloo calls wander between 0.3 and 3 ms here).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from colbench import text
from colbench.bench import ops
from colbench.errors import ExitCode, UsageError
from colbench.results import series
from colbench.results.series import Line, labels
from colbench.stats import noise
from colbench.text import Column


@dataclass(frozen=True)
class Model:
    alpha_us: float
    """Latency: the time of a call that moves no data, in microseconds."""
    beta_gbps: float
    """Asymptotic algorithm bandwidth in GB/s; ``inf`` when time does not grow with size."""

    def time_us(self, size_bytes: np.ndarray | float) -> np.ndarray:
        slope = 0.0 if math.isinf(self.beta_gbps) else 1.0 / (self.beta_gbps * 1e3)
        return np.asarray(self.alpha_us + slope * np.asarray(size_bytes, dtype=float))

    def algbw_gbps(self, size_bytes: np.ndarray | float) -> np.ndarray:
        size = np.asarray(size_bytes, dtype=float)
        return size / self.time_us(size) / 1e3


def fit_time(
    size_bytes: Sequence[float] | np.ndarray, time_us: Sequence[float] | np.ndarray
) -> Model:
    """Fit time = alpha + size / beta to (size, time) points; needs two distinct sizes."""
    size, time = np.asarray(size_bytes, dtype=float), np.asarray(time_us, dtype=float)
    keep = np.isfinite(size) & np.isfinite(time) & (time > 0) & (size >= 0)
    size, time = size[keep], time[keep]
    if len(np.unique(size)) < 2:
        raise ValueError("a latency-bandwidth fit needs at least two distinct sizes")
    (alpha, slope), _ = noise.reweighted(np.column_stack([1.0 / time, size / time]), (0, 1))
    beta = math.inf if slope == 0 else 1.0 / slope / 1e3
    return Model(alpha_us=float(alpha), beta_gbps=beta)


@dataclass(frozen=True)
class Uncertainty:
    """Standard errors of a fit's parameters, from the scatter of its points about it
    (least squares of relative residuals, as fitted), and their 95% intervals."""

    alpha_us: float
    alpha_se_us: float
    slope_us_per_byte: float
    slope_se: float
    dof: int

    @property
    def alpha_interval(self) -> tuple[float, float]:
        return noise.interval(self.alpha_us, self.alpha_se_us, self.dof)

    @property
    def beta_interval(self) -> tuple[float, float]:
        """beta's interval: the slope's, inverted (a slope that may be 0 leaves beta
        unbounded above)."""
        low, high = noise.interval(self.slope_us_per_byte, self.slope_se, self.dof)
        return (
            1.0 / high / 1e3 if high > 0 else math.inf,
            1.0 / low / 1e3 if low > 0 else math.inf,
        )

    def differs(self, other: Uncertainty) -> bool:
        """True when the two fits differ beyond noise: in latency or in slope, by more
        than the 95% half-width of the difference."""
        t = noise.t_two_sided(noise.LEVEL, min(self.dof, other.dof))
        return abs(self.alpha_us - other.alpha_us) > t * math.hypot(
            self.alpha_se_us, other.alpha_se_us
        ) or abs(self.slope_us_per_byte - other.slope_us_per_byte) > t * math.hypot(
            self.slope_se, other.slope_se
        )


def uncertainty(size_bytes: np.ndarray, time_us: np.ndarray, model: Model) -> Uncertainty | None:
    """The intervals of ``model`` fitted to these points; None with two points or fewer
    (no scatter to tell it by)."""
    size, time = np.asarray(size_bytes, dtype=float), np.asarray(time_us, dtype=float)
    keep = np.isfinite(size) & np.isfinite(time) & (time > 0)
    size, time = size[keep], time[keep]
    dof = len(size) - 2
    if dof < 1:
        return None
    slope = 0.0 if math.isinf(model.beta_gbps) else 1.0 / (model.beta_gbps * 1e3)
    design = np.column_stack([1.0 / time, size / time])
    if np.linalg.matrix_rank(design) < 2:
        return None  # one size: latency and bandwidth cannot be told apart
    residuals = 1.0 - design @ np.array([model.alpha_us, slope])
    _, covariance = noise.covariance(design, residuals, dof)
    errors = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    return Uncertainty(model.alpha_us, float(errors[0]), slope, float(errors[1]), dof)


@dataclass(frozen=True)
class FitResult:
    line: Line
    label: str
    model: Model | None
    """None when the line has fewer than two sizes."""
    rel_rms: float | None
    """Root-mean-square relative error of the model over the line's points."""
    spread: Uncertainty | None = None
    """The parameters' 95% intervals; None with too few points."""

    @property
    def bus_beta_gbps(self) -> float | None:
        if self.model is None:
            return None
        return self.model.beta_gbps * ops.get(self.line.op).busbw_factor(self.line.world_size)


def fit_lines(curves: Sequence[Line]) -> list[FitResult]:
    results = []
    for curve, label in zip(curves, labels(curves), strict=True):
        size, time = curve.size_bytes, curve.time_us
        try:
            model = fit_time(size, time)
        except ValueError:
            results.append(FitResult(curve, label, None, None))
            continue
        spread = uncertainty(size, time, model)
        results.append(FitResult(curve, label, model, relative_rms(size, time, model), spread))
    return results


def relative_rms(size_bytes: np.ndarray, time_us: np.ndarray, model: Model) -> float:
    """Root-mean-square relative error of ``model`` over the points."""
    predicted = model.time_us(size_bytes)
    return float(np.sqrt(np.mean(((time_us - predicted) / time_us) ** 2)))


@dataclass(frozen=True)
class Crossover:
    """Two curves of one collective whose models are equally fast at ``size_bytes``."""

    first: FitResult
    second: FitResult
    size_bytes: float
    faster_below: FitResult
    in_range: bool
    within_noise: bool = False
    """The two fits do not differ beyond their 95% intervals: noise could make them cross."""


def crossovers(results: Sequence[FitResult]) -> list[Crossover]:
    """Sizes where two curves of the same (op, dtype, redop, world) swap places."""
    found: list[Crossover] = []
    fitted = [r for r in results if r.model is not None]
    for a, b in itertools.combinations(fitted, 2):
        la, lb = a.line, b.line
        if (la.op, la.dtype, la.redop, la.world_size) != (lb.op, lb.dtype, lb.redop, lb.world_size):
            continue
        assert a.model is not None and b.model is not None
        slope_a = float(a.model.time_us(1.0) - a.model.alpha_us)
        slope_b = float(b.model.time_us(1.0) - b.model.alpha_us)
        if slope_a == slope_b:
            continue
        size = (b.model.alpha_us - a.model.alpha_us) / (slope_a - slope_b)
        if size <= 0:
            continue
        low = max(la.size_bytes.min(), lb.size_bytes.min())
        high = min(la.size_bytes.max(), lb.size_bytes.max())
        faster_below = a if a.model.alpha_us < b.model.alpha_us else b
        same = a.spread is None or b.spread is None or not a.spread.differs(b.spread)
        found.append(Crossover(a, b, float(size), faster_below, bool(low <= size <= high), same))
    return found


def approx_size(size_bytes: float) -> str:
    """A size in binary units with three significant digits: 1.46M, 640K, 12; whole
    numbers from 1000 of a unit up to the next (1020K, 1000), never 1e+03K."""
    units = (("G", 1024**3), ("M", 1024**2), ("K", 1024))
    suffix, unit = next(((s, u) for s, u in units if size_bytes >= u), ("", 1))
    value = size_bytes / unit
    return (f"{value:.0f}" if value >= 999.5 else f"{value:.3g}") + suffix


def _number(value: float | None, spec: str) -> str:
    """``value`` in ``spec`` (``.2f``), or n/a, or inf."""
    if value is None:
        return "n/a"
    return "inf" if math.isinf(value) else format(value, spec)


def _short(value: float) -> str:
    """Three significant digits, never an exponent below a million (1110, 0.255, inf)."""
    if math.isinf(value):
        return "inf"
    return f"{value:.0f}" if 999.5 <= abs(value) < 1e6 else f"{value:.3g}"


def _range(bounds: tuple[float, float] | None) -> str:
    """A 95% interval as ``low-high`` (``-`` without one); parameters are not negative."""
    return "-" if bounds is None else f"{_short(max(bounds[0], 0.0))}-{_short(bounds[1])}"


def report(results: Sequence[FitResult], found: Sequence[Crossover]) -> str:
    """The fit as text: one line per curve with its parameters' 95% intervals, a warning
    for each poor fit, then the crossovers (said when noise could explain one)."""
    line = Column("line", max([len(r.label) for r in results] + [5]), "<")
    sizes_column = Column("sizes", 6)
    columns = (
        line, Column("alpha(us)", 10), Column("alpha 95%", 17), Column("beta(GB/s)", 11),
        Column("beta 95%", 17), Column("bus beta", 9), Column("rms err", 8), sizes_column,
    )  # fmt: skip
    lines = [
        "# time = alpha + size / beta, fitted per line on relative error, outliers down-weighted",
        "# alpha: latency (us); beta: algorithm bandwidth (GB/s, 1e9 B/s); "
        "bus beta = beta * the op's busbw factor; 95% intervals from the points' scatter",
        text.header(columns),
    ]
    warnings = []
    for r in results:
        sizes = len(r.line.size_bytes)
        if r.model is None:
            short = (line, Column("", 40), sizes_column)
            lines.append(text.line((r.label, "not enough sizes to fit", sizes), short))
            continue
        spread = r.spread
        rms = None if r.rel_rms is None else 100 * r.rel_rms
        cells = (
            r.label, _number(r.model.alpha_us, ".2f"),
            _range(spread.alpha_interval if spread else None),
            _number(r.model.beta_gbps, ".4g"), _range(spread.beta_interval if spread else None),
            _number(r.bus_beta_gbps, ".4g"), _number(rms, ".1f") + "%", sizes,
        )  # fmt: skip
        lines.append(text.line(cells, columns))
        if noise.poor_fit(r.rel_rms):
            assert r.rel_rms is not None
            warnings.append(f"# warning: {noise.poor_fit_warning(r.label, r.rel_rms)}")
    lines += warnings
    for c in found:
        other = c.second if c.faster_below is c.first else c.first
        where = "" if c.in_range else " (outside the measured sizes: extrapolated)"
        noisy = "; noise could explain it: the two fits do not differ beyond their 95% intervals"
        lines.append(
            f"# crossover at {approx_size(c.size_bytes)} ({c.size_bytes:.0f} B){where}: "
            f"{c.faster_below.label} is faster below, {other.label} above"
            + (noisy if c.within_noise else "")
        )
    if len(results) > 1 and not found:
        lines.append("# no crossover: no two curves of one collective swap places at any size")
    return "\n".join(lines)


def run(runs: Sequence[str]) -> int:
    """Fit time = alpha + size / beta per (op, variant) of ``runs``; the exit code."""
    curves = [c for loaded in series.load_runs(runs) for c in series.lines(loaded)]
    if not curves:
        raise UsageError("nothing to fit: no rows with a size above 0 bytes")
    results = fit_lines(curves)
    print(report(results, crossovers(results)))
    return int(ExitCode.OK)
