"""The p2p heatmap: bandwidth and latency side by side, every cell annotated, node
boundaries drawn. Headless (matplotlib's Agg backend)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from colbench.store import writing

Matrix = dict[tuple[int, int], float]


def short(value: float) -> str:
    """Three significant digits, without an exponent for latencies in the thousands."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def grid(values: Matrix, ranks: list[int]) -> list[list[float]]:
    return [[values.get((s, d), math.nan) for d in ranks] for s in ranks]


def boundaries(ranks: list[int], nodes: dict[int, str]) -> list[float]:
    """Cell edges between consecutive ranks of different nodes."""
    return [i + 0.5 for i in range(len(ranks) - 1) if nodes[ranks[i]] != nodes[ranks[i + 1]]]


def panel(ax: Any, cells: list[list[float]], ranks: list[int], title: str, cmap: str) -> Any:
    """One annotated matrix of ranks (a p2p panel, or health's pair matrix)."""
    import numpy as np

    data = np.ma.masked_invalid(np.array(cells, dtype=float))
    image = ax.imshow(data, cmap=cmap, aspect="equal")
    finite = [v for row in cells for v in row if not math.isnan(v)]
    middle = (min(finite) + max(finite)) / 2 if finite else 0.0
    # Annotations only while they fit: past 16 ranks the colours carry it.
    if len(ranks) <= 16:
        for i, row in enumerate(cells):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    dark = (value < middle) == (cmap == "viridis")
                    ax.text(j, i, short(value), ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_xlabel("dst rank")
    ax.set_ylabel("src rank")
    ax.set_title(title)
    return image


def write_heatmap(
    path: Path, bw_gbps: Matrix, latency_us: Matrix, nodes: dict[int, str], frame: Any
) -> Path:
    from colbench.report.figures import pyplot

    plt = pyplot()
    ranks = sorted(nodes)
    size = int(frame["size_bytes"].iloc[0])
    small = int(frame["latency_bytes"].iloc[0])
    side = max(4.0, 0.45 * len(ranks) + 2)
    fig, axes = plt.subplots(1, 2, figsize=(2 * side + 1, side))
    try:
        panels = (
            (bw_gbps, f"bandwidth at {size} B (GB/s)", "viridis"),
            (latency_us, f"latency at {small} B (us)", "magma_r"),
        )
        for ax, (values, title, cmap) in zip(axes, panels, strict=True):
            image = panel(ax, grid(values, ranks), ranks, title, cmap)
            fig.colorbar(image, ax=ax, shrink=0.8)
            for edge in boundaries(ranks, nodes):
                ax.axhline(edge, color="red", linewidth=1.5)
                ax.axvline(edge, color="red", linewidth=1.5)
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
