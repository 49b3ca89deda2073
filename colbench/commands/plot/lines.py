"""Figures of measured lines: bandwidth or time against message size; ``colbench plot`` and
the figures ``sweep --plot`` leaves in a run directory; headless (Agg: a node has no display).

Both draw one small panel per collective by default (:func:`plot_panels`), so
``busbw.png`` in a run folder means one thing whoever wrote it; ``plot --one-chart`` draws
every line on one chart (:func:`plot_lines`) into ``<metric>-one-chart.png``, so neither
figure replaces the other.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from colbench.errors import UsageError
from colbench.results.reporters.figures import (
    Metric,
    metric,
    metric_key,
    out_dir,
    pyplot,
    run_folder,
    save,
    size_axis,
    unused_path,
)
from colbench.results.rundir import RunDir
from colbench.results.series import PLACEMENT_NAMES, Line, Run, labels, lines, load_runs
from colbench.stats import noise


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


def size_span(curves: Sequence[Line]) -> tuple[float, float]:
    sizes = np.concatenate([c.size_bytes for c in curves])
    return float(sizes.min()), float(sizes.max())


def plotted(curves: Sequence[Line], metric_name: str, peak_gbps: float | None = None) -> Metric:
    """The metric to draw, once there is something to draw it of (and --peak fits it)."""
    chosen = metric(metric_name)
    if not curves:
        raise UsageError("nothing to plot: no rows with a size above 0 bytes")
    if peak_gbps is not None and chosen.column == "time_us":
        raise UsageError("--peak is a bandwidth: use it with --metric busbw or algbw")
    return chosen


def plot_lines(
    curves: Sequence[Line],
    metric_name: str = "busbw",
    *,
    peak_gbps: float | None = None,
    fit: bool = False,
) -> Any:
    """One figure of ``metric_name`` against size; returns the matplotlib Figure."""
    chosen = plotted(curves, metric_name, peak_gbps)
    fig, ax = pyplot().subplots(figsize=(9, 5.2), layout="constrained")
    draw_lines(ax, curves, metric_name, peak_gbps=peak_gbps, fit=fit)
    ax.set_title(f"{chosen.title} vs message size: {context(curves)}")
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
        look = {"marker": marker, "markersize": 4, "linewidth": 1.6, "linestyle": style}
        ax.plot(curve.size_bytes, curve.values(chosen.column), color=color, label=label, **look)
    if peak_gbps is not None:
        peak = f"rated peak {peak_gbps:g} GB/s"
        ax.axhline(peak_gbps, color="black", linestyle="--", linewidth=1.2, alpha=0.7, label=peak)
    size_axis(ax, *size_span(curves))
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

        model = "model: alpha + size / beta"
        handles.append(Line2D([], [], color="gray", linestyle=":", linewidth=2, label=model))
    # Many lines: the legend goes beside the chart, where it hides none of them.
    where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1)} if len(handles) > 10 else {}
    ax.legend(handles=handles, fontsize="small", **({"loc": "best"} | where))


_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D")


def styles(curves: Sequence[Line]) -> list[tuple[str, str, str]]:
    """(color, linestyle, marker) per curve. With several ops *and* a few variants or runs, color
    says which op and the line style which variant/run, so the eye can pair up a collective's
    curves; otherwise every curve gets its own color."""
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
    from colbench.bench import ops
    from colbench.commands.fit import model as fit

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


#: The stem ``plot --one-chart`` adds to the metric, so its file never takes the name of
#: the panels that ``sweep --plot`` and ``plot RUN`` write.
ONE_CHART = "one-chart"


def plot_runs(
    paths: Sequence[str | os.PathLike[str]],
    metric_name: str = "busbw",
    *,
    out: str | os.PathLike[str] | None = None,
    peak_gbps: float | None = None,
    fit: bool = False,
    one_chart: bool = False,
) -> tuple[Path, list[str]]:
    """``colbench plot``: load runs, draw one figure (a panel per collective, as ``sweep
    --plot``; with ``one_chart`` every line on one chart), write it into ``out`` (a
    directory; default: the last run's folder); returns the file written and warnings
    about it (with ``fit``: each fit that does not describe its curve)."""
    metric_name = metric_key(metric_name)
    if peak_gbps is not None and not (math.isfinite(peak_gbps) and peak_gbps > 0):
        raise UsageError(f"--peak must be a bandwidth above 0 GB/s, got {peak_gbps:g}")
    runs = load_runs(paths)
    curves = [c for run in runs for c in lines(run)]
    draw, kind = (
        (plot_lines, f"{metric_name}-{ONE_CHART}") if one_chart else (plot_panels, metric_name)
    )
    fig = draw(curves, metric_name, peak_gbps=peak_gbps, fit=fit)
    path = save(fig, figure_path(runs, kind, out))
    if not fit:
        return path, []
    from colbench.commands.fit.model import fit_lines

    return path, [
        f"plot --fit: {noise.poor_fit_warning(r.label, r.rel_rms)}"
        for r in fit_lines(curves)
        if r.rel_rms is not None and noise.poor_fit(r.rel_rms)
    ]


def figure_path(runs: Sequence[Run], kind: str, out: str | os.PathLike[str] | None = None) -> Path:
    """Where plot's figure goes: in ``--out`` (a directory), else in the last run's own
    folder. One run: ``<kind>.png`` (``busbw.png`` in its folder is the figure sweep
    --plot writes, drawn the same); several: a new file named after the runs
    (:func:`unused_path`). ``kind`` is the metric, or ``<metric>-one-chart``."""
    directory = out_dir(out, run_folder(runs[-1].path))
    if len(runs) == 1:
        return directory / RunDir(directory).figure_path(kind).name
    return unused_path(kind, [run.label for run in runs], directory)


def write_run_plots(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The figures ``sweep --plot`` leaves in a run directory: busbw.png and time.png,
    one small panel per collective (:func:`plot_panels`)."""
    runs = load_runs([run_dir])
    curves = lines(runs[0])
    return [save(plot_panels(curves, n), RunDir(run_dir).figure_path(n)) for n in ("busbw", "time")]


#: Panels side by side before a new row starts: ten collectives make two rows of five.
_PANEL_COLUMNS = 5


def plot_panels(
    curves: Sequence[Line], metric_name: str, *, peak_gbps: float | None = None, fit: bool = False
) -> Any:
    """One small panel per collective, titled with the collective and the placement
    drawn, each with its own value axis: ten collectives on one chart are a tangle
    whose legend hides points, and a broadcast at 3 GB/s flattens a gather at 0.3.
    Curves that share a collective (variants, dtypes, runs) are told apart by colour,
    named once in a legend beside the panels, where it covers nothing. ``peak_gbps``
    is drawn in every panel, ``fit`` overlays each curve's model (dotted)."""
    chosen = plotted(curves, metric_name, peak_gbps)
    ops = list(dict.fromkeys(c.op for c in curves))
    columns = min(len(ops), _PANEL_COLUMNS)
    rows = math.ceil(len(ops) / columns)
    fig, axes = pyplot().subplots(
        rows, columns, figsize=(max(6.5, 2.9 * columns + 1.2), 2.5 * rows + 1.3),
        squeeze=False, sharex=True, layout="constrained",
    )  # fmt: skip
    low, high = size_span(curves)
    colours: dict[str, str] = {}
    for ax, op in zip(axes.flat, ops, strict=False):
        mine = [c for c in curves if c.op == op]
        _draw_panel(ax, op, mine, chosen, colours, peak_gbps=peak_gbps, fit=fit)
        size_axis(ax, low, high, max_ticks=6)
        ax.set_xlabel("")
        _value_axis(ax, chosen)
        ax.set_ylabel("")
        ax.tick_params(which="both", labelsize=7)
    for ax in list(axes.flat)[len(ops) :]:
        ax.set_visible(False)
    fig.supxlabel("message size (binary units, 1K = 1024 B)", fontsize=9)
    fig.supylabel(chosen.axis_label, fontsize=9)
    fig.suptitle(
        f"{chosen.title} vs message size: {context(curves)}\n"
        "each panel one collective, out-of-place where measured, else in-place",
        fontsize=10,
    )
    _panels_legend(fig, colours, peak_gbps=peak_gbps, fit=fit)
    return fig


def _draw_panel(
    ax: Any,
    op: str,
    mine: Sequence[Line],
    chosen: Metric,
    colours: dict[str, str],
    *,
    peak_gbps: float | None,
    fit: bool,
) -> None:
    """One collective's curves in its panel; ``colours`` (label -> colour) is shared by
    every panel, so a variant keeps its colour across them."""
    # Within one collective the labels name only what differs (variant, dtype...).
    names = labels(mine) if len(mine) > 1 else [""] * len(mine)
    for curve, name in zip(mine, names, strict=True):
        colour = colours.setdefault(name, f"C{len(colours) % 10}")
        if fit:
            _draw_fit(ax, curve, chosen, colour)
        ax.plot(curve.size_bytes, curve.values(chosen.column), marker="o", markersize=3,
                linewidth=1.4, color=colour, label=name or "_one")  # fmt: skip
    if peak_gbps is not None:
        ax.axhline(peak_gbps, color="black", linestyle="--", linewidth=1.0, alpha=0.7,
                   label=f"rated peak {peak_gbps:g} GB/s")  # fmt: skip
    placements = sorted({PLACEMENT_NAMES[c.in_place] for c in mine})
    ax.set_title(f"{op} ({', '.join(placements)})", fontsize=9)


def _panels_legend(
    fig: Any, colours: dict[str, str], *, peak_gbps: float | None, fit: bool
) -> None:
    """One legend beside the panels, where it covers no point."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", markersize=3, label=n)
               for n, c in colours.items() if n]  # fmt: skip
    if peak_gbps is not None:
        handles.append(Line2D([], [], color="black", linestyle="--",
                              label=f"rated peak {peak_gbps:g} GB/s"))  # fmt: skip
    if fit:
        handles.append(Line2D([], [], color="grey", linestyle=":", label="model (fit)"))
    if handles:
        fig.legend(handles=handles, loc="outside right center", fontsize="small")
