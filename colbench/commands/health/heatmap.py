"""health.png: every node's checks as a heatmap of figure over the fleet's, the verdicts
marked, and beside it the pair sendrecv matrix as p2p draws its own. Headless.

The colour is a node's figure over the fleet's: the other nodes' median the judge
asked it against (``fleet_gbps``), or, for a check not judged, their median here. 1 is
the fleet and red runs toward 0, one scale for every check, so a node's row reads at a
glance whatever each check's size.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench.commands.health.judge import CRITICAL, FLEET, WARN, Finding, Samples, link_medians
from colbench.config.sizes import format_size
from colbench.output import plural

#: Verdict marks in a cell, after the ratio.
MARKS = {CRITICAL: "C", WARN: "W"}
#: Nodes past this many: the cells carry colour alone.
ANNOTATED_NODES = 24


def ratios(findings: Sequence[Finding]) -> tuple[list[str], list[str], list[list[float]]]:
    """(nodes, columns ``check size``, each node's figure over the others' median)."""
    rows = [f for f in findings if f.node != FLEET and f.busbw_gbps > 0]
    nodes = sorted({f.node for f in rows})
    keys = sorted({(f.check, f.size_bytes) for f in rows})
    by = {(f.node, f.check, f.size_bytes): f for f in rows}
    cells = []
    for node in nodes:
        line = []
        for check, size in keys:
            mine = by.get((node, check, size))
            others = [by[(n, check, size)].busbw_gbps for n in nodes if (n, check, size) in by
                      and n != node]  # fmt: skip
            reference = (mine.fleet_gbps if mine else None) or (
                statistics.median(others) if others else None
            )
            line.append(mine.busbw_gbps / reference if mine and reference else math.nan)
        cells.append(line)
    return nodes, [f"{c} {format_size(s)}" for c, s in keys], cells


def nothing_to_draw(findings: Sequence[Finding], samples: Samples) -> str | None:
    """Why health.png would be an empty frame, or None when it has something to show:
    a node against the others needs two nodes, and the pair matrix a pair of them."""
    _, _, cells = ratios(findings)
    if any(not math.isnan(v) for row in cells for v in row) or _pair_links(samples):
        return None
    nodes = len({f.node for f in findings if f.node != FLEET})
    return (
        f"no heatmap: health.png draws each node against the others and pairs of nodes, "
        f"and this run has {plural(nodes, 'node')}"
    )


def _pair_links(samples: Samples) -> Any:
    return next((v for (c, _), v in sorted(samples.by_check.items()) if c == "pair"), {})


def write_heatmap(path: Path, findings: Sequence[Finding], samples: Samples) -> Path:
    """health.png; call only when :func:`nothing_to_draw` finds something to draw."""
    from colbench.commands.p2p.report import matrix_panel, save_figure
    from colbench.results.reporters.figures import pyplot

    plt = pyplot()
    nodes, columns, cells = ratios(findings)
    links = _pair_links(samples)
    ranks = sorted({r for pair in links for r in pair})
    # Past some 40 rows the cells shrink rather than the figure growing without end.
    side = min(20.0, max(4.0, 0.45 * max(len(nodes), len(ranks)) + 2))
    panels = 2 if ranks else 1
    fig, axes = plt.subplots(1, panels, figsize=(panels * side + 2, side), squeeze=False)
    _node_panel(axes[0][0], nodes, columns, cells, findings)
    if ranks:
        values = link_medians(samples, links)
        names = {r: samples.names[r] for r in ranks}
        # Coloured as p2p colours its matrix: around the median, red the slow pairs.
        look = ("pair sendrecv (GB/s)", "RdYlGn", "GB/s")
        matrix_panel(axes[0][1], values, ranks, names, look)
    title = f"colbench health: {plural(len(nodes), 'node')}"
    if ranks and len(ranks) <= 16:
        title += "; ranks " + ", ".join(f"{r}: {samples.names[r]}" for r in ranks)
    return save_figure(fig, path, title)


def _node_panel(
    ax: Any,
    nodes: list[str],
    columns: list[str],
    cells: list[list[float]],
    findings: Sequence[Finding],
) -> None:
    import numpy as np

    data = np.ma.masked_invalid(np.array(cells, dtype=float))
    image = ax.imshow(data, cmap="RdYlGn", vmin=0.0, vmax=1.5, aspect="auto")
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="figure / the fleet's median")
    verdicts = {(f.node, f"{f.check} {format_size(f.size_bytes)}"): f.verdict for f in findings}
    if len(nodes) <= ANNOTATED_NODES:
        for i, node in enumerate(nodes):
            for j, column in enumerate(columns):
                if not math.isnan(cells[i][j]):
                    mark = MARKS.get(verdicts.get((node, column), ""), "")
                    ax.text(j, i, f"{cells[i][j]:.2f}{' ' + mark if mark else ''}",
                            ha="center", va="center", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_title("each node against the fleet (C: CRITICAL, W: WARN)")
