"""The p2p heatmap: bandwidth and latency side by side, every cell annotated, node
boundaries drawn. Headless (matplotlib's Agg backend).

Each panel's colours are relative to the fabric's median (:func:`centred_norm`): the
median is the middle colour, and the scale spans at least from half of it to twice it,
so a uniform fabric reads uniform (a scale from its own minimum to its maximum would
paint 1.10 and 1.25 GB/s as opposite ends) and a link at a quarter of the others stands
out in the colour of trouble (red) whichever the metric.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from colbench.results import tables as writing

Matrix = dict[tuple[int, int], float]

#: The colour scale spans at least the median / this to the median x this: noise of a
#: few percent stays near the middle colour, and a link the verdict would call slow
#: (25% below in bandwidth) is already off it.
MIN_SPAN_FACTOR = 2.0


def short(value: float) -> str:
    """Three significant digits, without an exponent for latencies in the thousands."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def grid(values: Matrix, ranks: list[int]) -> list[list[float]]:
    return [[values.get((s, d), math.nan) for d in ranks] for s in ranks]


def boundaries(ranks: list[int], nodes: dict[int, str]) -> list[float]:
    """Cell edges between consecutive ranks of different nodes."""
    return [i + 0.5 for i in range(len(ranks) - 1) if nodes[ranks[i]] != nodes[ranks[i + 1]]]


def centred_norm(values: Matrix) -> Any:
    """A log colour scale with the values' median in the middle, spanning the farthest
    value's ratio to it and at least :data:`MIN_SPAN_FACTOR` either way (None: no
    positive value to centre on)."""
    from matplotlib.colors import LogNorm

    positive = [v for v in values.values() if v > 0 and math.isfinite(v)]
    if not positive:
        return None
    median = statistics.median(positive)
    factor = max(MIN_SPAN_FACTOR, *(max(v / median, median / v) for v in positive))
    return LogNorm(vmin=median / factor, vmax=median * factor)


def panel(
    ax: Any,
    cells: list[list[float]],
    ranks: list[int],
    title: str,
    cmap: str,
    norm: Any = None,
) -> Any:
    """One annotated matrix of ranks (a p2p panel, or health's pair matrix); ``norm``
    None scales the colours from the smallest value to the largest."""
    import numpy as np

    data = np.ma.masked_invalid(np.array(cells, dtype=float))
    image = ax.imshow(data, cmap=cmap, norm=norm, aspect="equal")
    # Annotations only while they fit: past 16 ranks the colours carry it.
    if len(ranks) <= 16:
        for i, row in enumerate(cells):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    # White on a dark cell, black on a light one, by the cell's luminance.
                    red, green, blue, _ = image.cmap(image.norm(value))
                    dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
                    ax.text(j, i, short(value), ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_xlabel("dst rank")
    ax.set_ylabel("src rank")
    ax.set_title(title)
    return image


def median_ticks(bar: Any, norm: Any, unit: str) -> None:
    """The colour bar's ticks at the scale's ends and its middle, the fabric's median."""
    from matplotlib.ticker import NullLocator

    median = math.sqrt(norm.vmin * norm.vmax)
    bar.set_ticks([norm.vmin, median, norm.vmax])
    bar.set_ticklabels([short(norm.vmin), f"{short(median)}\nmedian", short(norm.vmax)])
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.set_label(f"{unit}, log scale centred on the median")


def matrix_panel(
    ax: Any, values: Matrix, ranks: list[int], nodes: dict[int, str], look: tuple[str, str, str]
) -> None:
    """One matrix of pairs on ``ax``, coloured around its median (``look``: title, colour
    map, unit), a red line between nodes."""
    title, cmap, unit = look
    norm = centred_norm(values)
    image = panel(ax, grid(values, ranks), ranks, title, cmap, norm)
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.8)
    if norm is not None:
        median_ticks(bar, norm, unit)
    for edge in boundaries(ranks, nodes):
        ax.axhline(edge, color="red", linewidth=1.5)
        ax.axvline(edge, color="red", linewidth=1.5)


def write_heatmap(
    path: Path, bw_gbps: Matrix, latency_us: Matrix, nodes: dict[int, str], frame: Any
) -> Path:
    from colbench.results.reporters.figures import pyplot

    plt = pyplot()
    ranks = sorted(nodes)
    size = int(frame["size_bytes"].iloc[0])
    small = int(frame["latency_bytes"].iloc[0])
    side = max(4.0, 0.45 * len(ranks) + 2)
    fig, axes = plt.subplots(1, 2, figsize=(2 * side + 1, side))
    try:
        # Red is trouble in both: low bandwidth, high latency.
        panels = (
            (bw_gbps, f"bandwidth at {size} B (GB/s)", "RdYlGn", "GB/s"),
            (latency_us, f"latency at {small} B (us)", "RdYlGn_r", "us"),
        )
        for ax, (values, title, cmap, unit) in zip(axes, panels, strict=True):
            matrix_panel(ax, values, ranks, nodes, (title, cmap, unit))
        labels = ", ".join(
            f"{label}: {','.join(str(r) for r in ranks if nodes[r] == label)}"
            for label in dict.fromkeys(nodes[r] for r in ranks)
        )
        fig.suptitle(f"colbench p2p ({frame['backend'].iloc[0]}); nodes {labels}", fontsize=9)
        fig.tight_layout()
        with writing.checked(path):
            fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path
