"""Figures: bandwidth or time against message size, one line per (op, variant, run).

Headless (matplotlib's Agg backend), so plots work on a cluster node without a
display. The x-axis is log2 with binary size labels (1K, 1M, 1G), matching how sizes
are given on the command line.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from colbench.analysis import noise
from colbench.analysis.series import Line, Run, labels, lines, load_runs
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.store.rundir import RunDir


@dataclass(frozen=True)
class Metric:
    column: str
    axis_label: str
    title: str
    log_y: bool


METRICS: dict[str, Metric] = {
    "busbw": Metric("busbw_gbps", "bus bandwidth (GB/s)", "Bus bandwidth", False),
    "algbw": Metric("algbw_gbps", "algorithm bandwidth (GB/s)", "Algorithm bandwidth", False),
    "time": Metric("time_us", "time per call (µs)", "Time per call", True),
}
#: Most labelled ticks on the size axis before they are thinned to every 2nd, 5th... power.
_MAX_SIZE_TICKS = 11


def metric(name: str) -> Metric:
    if name not in METRICS:
        raise UsageError(f"bad --metric {name!r}: choose {', '.join(METRICS)}")
    return METRICS[name]


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def size_ticks(low_bytes: float, high_bytes: float) -> list[float]:
    """Powers of two spanning [low, high], at most ~11 of them.

    When they must be thinned, every 2nd, 5th or 10th power is kept: those steps divide
    10, so the labels still land on 1K, 1M and 1G.
    """
    first = math.floor(math.log2(max(low_bytes, 1)))
    last = math.ceil(math.log2(max(high_bytes, 1)))
    step = next((s for s in (1, 2, 5, 10) if (last - first) // s + 1 <= _MAX_SIZE_TICKS), 20)
    start = first - first % step
    return [2.0**e for e in range(start, last + 1, step)]


def format_size_tick(value: float, _pos: Any = None) -> str:
    size = round(value)
    return format_size(size) if size >= 1 and abs(value - size) < 1e-6 * value else ""


def context(curves: Sequence[Line]) -> str:
    """What the figure measured: backend, world size and hosts (several when runs differ)."""

    def joined(values: set[str]) -> str:
        return "/".join(sorted(values, key=lambda v: (len(v), v)))

    backends = joined({c.backend for c in curves})
    worlds = joined({str(c.world_size) for c in curves})
    hosts = {str(c.nnodes) for c in curves if c.nnodes is not None}
    text = f"{backends}, {worlds} ranks"
    if hosts:
        text += f" on {joined(hosts)} host{'s' if hosts != {'1'} else ''}"
    return text


def plot_lines(
    curves: Sequence[Line],
    metric_name: str = "busbw",
    *,
    peak_gbps: float | None = None,
    fit: bool = False,
    title: str | None = None,
) -> Any:
    """One figure of ``metric_name`` against size; returns the matplotlib Figure."""
    chosen = metric(metric_name)
    if not curves:
        raise UsageError("nothing to plot: no rows with a size above 0 bytes")
    if peak_gbps is not None and chosen.column == "time_us":
        raise UsageError("--peak is a bandwidth: use it with --metric busbw or algbw")
    fig, ax = pyplot().subplots(figsize=(9, 5.2), layout="constrained")
    draw_lines(ax, curves, metric_name, peak_gbps=peak_gbps, fit=fit)
    ax.set_title(title or f"{chosen.title} vs message size: {context(curves)}")
    return fig


def draw_lines(
    ax: Any,
    curves: Sequence[Line],
    metric_name: str,
    *,
    peak_gbps: float | None = None,
    fit: bool = False,
) -> None:
    """Draw the curves on ``ax`` with the size axis, labels and legend set up."""
    chosen = metric(metric_name)
    for curve, label, (color, style, marker) in zip(
        curves, labels(curves), styles(curves), strict=True
    ):
        rms = _draw_fit(ax, curve, chosen, color) if fit else None
        if rms is not None:
            # The fit's uncertainty beside its line: a curve the model misses says so.
            label += f" (fit rms {rms:.0%}{', poor fit' if noise.poor_fit(rms) else ''})"
        ax.plot(
            curve.size_bytes,
            curve.values(chosen.column),
            marker=marker,
            markersize=4,
            linewidth=1.6,
            linestyle=style,
            color=color,
            label=label,
        )
    if peak_gbps is not None:
        ax.axhline(
            peak_gbps,
            color="black",
            linestyle="--",
            linewidth=1.2,
            alpha=0.7,
            label=f"rated peak {peak_gbps:g} GB/s",
        )
    low = min(float(c.size_bytes.min()) for c in curves)
    high = max(float(c.size_bytes.max()) for c in curves)
    size_axis(ax, low, high)
    _value_axis(ax, chosen)
    _legend(ax, fit)


def _value_axis(ax: Any, chosen: Metric) -> None:
    from matplotlib.ticker import FuncFormatter, LogFormatter

    if chosen.log_y:
        ax.set_yscale("log")
        # Plain numbers (300, 1000, 2000) read faster than 3x10^2 on a time axis.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        # Minor labels (200, 300, 500) only when few decades leave room for them.
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    else:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(chosen.axis_label)
    ax.grid(True, which="major", alpha=0.3)


def _legend(ax: Any, fit: bool) -> None:
    handles, _ = ax.get_legend_handles_labels()
    if fit:
        from matplotlib.lines import Line2D

        handles.append(
            Line2D(
                [], [], color="gray", linestyle=":", linewidth=2, label="model: alpha + size / beta"
            )
        )
    if len(handles) > 10:
        ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    else:
        ax.legend(handles=handles, fontsize="small", loc="best")


def size_axis(ax: Any, low_bytes: float, high_bytes: float) -> None:
    """A log2 x-axis labelled 1K, 4K, 1M... from low to high."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(size_ticks(low_bytes, high_bytes)))
    ax.xaxis.set_major_formatter(FuncFormatter(format_size_tick))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(low_bytes / 1.25, high_bytes * 1.25)
    ax.set_xlabel("message size (binary units, 1K = 1024 B)")


_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D")


def styles(curves: Sequence[Line]) -> list[tuple[str, str, str]]:
    """(color, linestyle, marker) per curve.

    With several ops *and* a few variants or runs, color says which op and the line
    style which variant/run, so the eye can pair up a collective's curves; otherwise
    every curve gets its own color.
    """
    colors = [f"C{i}" for i in range(10)]
    op_index = {op: i for i, op in enumerate(dict.fromkeys(c.op for c in curves))}
    other_keys = [(c.variant, c.run, c.world_size, c.dtype) for c in curves]
    other_index = {k: i for i, k in enumerate(dict.fromkeys(other_keys))}
    if len(op_index) > 1 and 1 < len(other_index) <= len(_STYLES):
        return [
            (
                colors[op_index[c.op] % len(colors)],
                _STYLES[other_index[k]],
                _MARKERS[other_index[k]],
            )
            for c, k in zip(curves, other_keys, strict=True)
        ]
    return [
        (colors[i % len(colors)], _STYLES[(i // len(colors)) % 4], _MARKERS[0])
        for i in range(len(curves))
    ]


def _draw_fit(ax: Any, curve: Line, chosen: Metric, color: str) -> float | None:
    """Draw the curve's alpha-beta model; its relative rms error (None: no fit)."""
    from colbench import ops
    from colbench.analysis import fit

    try:
        model = fit.fit_time(curve.size_bytes, curve.time_us)
    except ValueError:
        return None
    grid = np.geomspace(curve.size_bytes.min(), curve.size_bytes.max(), 200)
    if chosen.column == "time_us":
        values = model.time_us(grid)
    else:
        values = model.algbw_gbps(grid)
        if chosen.column == "busbw_gbps":
            values = values * ops.get(curve.op).busbw_factor(curve.world_size)
    ax.plot(grid, values, linestyle=":", linewidth=2, color=color, alpha=0.8, label="_model")
    return fit.relative_rms(curve.size_bytes, curve.time_us, model)


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--out {out}: use a .png, .svg or .pdf file name")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
    finally:
        pyplot().close(fig)
    return out


def plot_runs(
    paths: Sequence[str | os.PathLike[str]],
    metric_name: str = "busbw",
    *,
    out: str | os.PathLike[str] | None = None,
    peak_gbps: float | None = None,
    fit: bool = False,
) -> tuple[Path, list[str]]:
    """``colbench plot``: load runs, draw one figure, write it; returns the file written
    and warnings about it (with ``fit``: each fit that does not describe its curve)."""
    metric(metric_name)
    if peak_gbps is not None and not (math.isfinite(peak_gbps) and peak_gbps > 0):
        raise UsageError(f"--peak must be a bandwidth above 0 GB/s, got {peak_gbps:g}")
    runs = load_runs(paths)
    curves = [c for run in runs for c in lines(run)]
    fig = plot_lines(curves, metric_name, peak_gbps=peak_gbps, fit=fit)
    path = save(fig, out if out is not None else default_out(runs, metric_name))
    return path, (_poor_fits(curves) if fit else [])


def _poor_fits(curves: Sequence[Line]) -> list[str]:
    from colbench.analysis.fit import fit_lines

    return [
        f"plot --fit: {noise.poor_fit_warning(r.label, r.rel_rms)}"
        for r in fit_lines(curves)
        if r.rel_rms is not None and noise.poor_fit(r.rel_rms)
    ]


def default_out(runs: Sequence[Run], metric_name: str) -> Path:
    """One run directory: ``<run>/<metric>.png`` (the run's own figure, as sweep --plot
    writes it); else a new file here named after the runs (:func:`unused_path`)."""
    if len(runs) == 1 and runs[0].path.is_dir():
        return RunDir(runs[0].path).figure_path(metric_name)
    return unused_path(metric_name, [run.label for run in runs])


def unused_path(kind: str, labels: Sequence[str], suffix: str = ".png") -> Path:
    """``<kind>-<A>-vs-<B>.png`` in the current directory (``<A>-and-N-more`` for many),
    stepping aside to ``-2``, ``-3``... from a file already there: a default name never
    overwrites an earlier figure (an explicit --out does)."""
    safe = [re.sub(r"[^A-Za-z0-9._+=-]+", "_", label).strip("_") or "run" for label in labels]
    named = "-vs-".join(safe) if len(safe) <= 2 else f"{safe[0]}-and-{len(safe) - 1}-more"
    stem = f"{kind}-{named}"[:120]
    for attempt in range(1, 1000):
        path = Path(f"{stem}{'' if attempt == 1 else f'-{attempt}'}{suffix}")
        if not path.exists():
            return path
    raise UsageError(f"no free file name like {stem}{suffix} here: give --out")


def write_run_plots(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The figures ``sweep --plot`` leaves in a run directory: busbw.png and time.png."""
    runs = load_runs([run_dir])
    curves = lines(runs[0])
    written = []
    for name in ("busbw", "time"):
        written.append(save(plot_lines(curves, name), RunDir(run_dir).figure_path(name)))
    return written
