"""What a p2p run shows when it is done: the matrices, the heatmap, the verdict (last).

The heatmap, p2p.png: bandwidth and latency side by side, every cell annotated, node
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
import sys
from pathlib import Path
from typing import Any

from colbench import text
from colbench.commands.p2p import results
from colbench.commands.p2p.budget import Plan
from colbench.commands.p2p.config import P2PConfig
from colbench.commands.p2p.links import Samples, judge, short
from colbench.errors import ExitCode, UsageError
from colbench.results import tables
from colbench.results.rundir import RunDir
from colbench.text import Column

#: Exit status when --fail-below finds a link below its limit (as a failed gate).
FAIL_BELOW_EXIT = int(ExitCode.DATA_ERROR)


def matrices(frame: Any) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """(src, dst) -> bandwidth in GB/s, and -> latency in microseconds: with --repeat, the
    median over the passes (one pass that met a busy host does not make a pair slow)."""
    bw, lat = samples_of(frame)
    return _medians(bw), _medians(lat)


def _medians(samples: Samples) -> dict[tuple[int, int], float]:
    return {pair: statistics.median(values) for pair, values in samples.items()}


def samples_of(frame: Any) -> tuple[Samples, Samples]:
    """(src, dst) -> bandwidth in GB/s, and -> latency in microseconds: one value per
    pass, in pass order (what the verdict judges)."""
    bw: dict[tuple[int, int], list[float]] = {}
    lat: dict[tuple[int, int], list[float]] = {}
    for (src, dst), rows in frame.sort_values("repeat").groupby(["src_rank", "dst_rank"]):
        bw[(int(src), int(dst))] = [float(v) for v in rows["bw_gbps"]]
        lat[(int(src), int(dst))] = [float(v) for v in rows["latency_us"]]
    return bw, lat


def node_of(frame: Any) -> dict[int, str]:
    nodes = {int(r.src_rank): str(r.src_node) for r in frame.itertuples()}
    nodes.update({int(r.dst_rank): str(r.dst_node) for r in frame.itertuples()})
    return nodes


def matrix_text(values: dict[tuple[int, int], float], nodes: dict[int, str], title: str) -> str:
    """A src x dst table; ``-`` where nothing was measured (the diagonal, idle pairs)."""
    ranks = sorted(nodes)
    # 4 significant digits fit in 9 characters ("0.0003988"), plus a space between.
    width = max(10, *(len(str(r)) + 1 for r in ranks))
    columns = [Column("src", width, gap=""), *(Column(str(r), width, gap="") for r in ranks)]
    columns.append(Column("node", gap="  "))
    lines = [f"# {title} (rows: src rank, columns: dst rank)"]
    lines.append(text.line([c.title for c in columns], columns, lead=""))
    for src in ranks:
        cells = [f"{values[(src, dst)]:.4g}" if (src, dst) in values else "-" for dst in ranks]
        lines.append(text.line([src, *cells, nodes[src]], columns, lead=""))
    return "\n".join(lines)


def report(run_dir: Path, cfg: P2PConfig) -> int:
    frame = results.load(run_dir)
    if frame.empty:
        raise UsageError(f"{run_dir / results.FILE_NAME} holds no rows: no pair was measured")
    bw, lat = matrices(frame)
    nodes = node_of(frame)
    verdict = judge(*samples_of(frame), nodes, cfg.bw_pct, cfg.latency_pct, cfg.fail_below_pct)
    passes = int(frame["repeat"].max()) + 1
    print(
        f"colbench: {len(bw)} ordered pairs x {passes} pass(es) in {run_dir / results.FILE_NAME}",
        file=sys.stderr,
    )
    if cfg.plot:
        path = write_heatmap(run_dir / "p2p.png", bw, lat, nodes, frame)
        print(f"colbench: heatmap: {path}", file=sys.stderr)
    sys.stderr.flush()
    size, small = (int(frame[name].iloc[0]) for name in ("size_bytes", "latency_bytes"))
    of = f", median of {passes} passes" if passes > 1 else ""
    print(matrix_text(bw, nodes, f"bandwidth at {size} B, GB/s{of}"))
    print(matrix_text(lat, nodes, f"latency at {small} B, us{of}"))
    meta = RunDir(run_dir).meta_or_none() or {}
    lines = [*verdict.lines, *cut_lines(meta.get("plan"))]
    print("\n".join(lines), flush=True)
    results.record_verdicts(run_dir, verdict.per_link)
    if meta:
        meta["verdict"] = {
            "judged": verdict.judged,
            "lines": lines,
            "slow_nodes": list(verdict.slow_nodes),
            "slow_links": [list(pair) for pair in verdict.slow_links],
            "failing_links": [[link.low, link.high] for link in verdict.failing],
        }
        RunDir(run_dir).write_meta(meta)
    return FAIL_BELOW_EXIT if verdict.failing else int(ExitCode.OK)


def cut_lines(plan: Any) -> list[str]:
    """The verdict's word on a plan cut to keep to --max-time (meta.json's ``plan``; none
    in files of runs before it, or when nothing was cut)."""
    if not isinstance(plan, dict) or not plan.get("cut"):
        return []
    asked, ran = Plan(**plan["asked"]), Plan(**plan["ran"])
    return [
        f"verdict: measured {ran.text()}, cut from {asked.text()} to keep to --max-time "
        f"{plan['max_time_s']:g} s ({', '.join(plan['cut'])}; meta.json's plan)"
    ]


Matrix = dict[tuple[int, int], float]

#: The colour scale spans at least the median / this to the median x this: noise of a
#: few percent stays near the middle colour, and a link the verdict would call slow
#: (25% below in bandwidth) is already off it.
MIN_SPAN_FACTOR = 2.0


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
    cells = [[values.get((s, d), math.nan) for d in ranks] for s in ranks]
    image = panel(ax, cells, ranks, title, cmap, norm)
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.8)
    if norm is not None:
        median_ticks(bar, norm, unit)
    # Cell edges between consecutive ranks of different nodes.
    for i in range(len(ranks) - 1):
        if nodes[ranks[i]] != nodes[ranks[i + 1]]:
            ax.axhline(i + 0.5, color="red", linewidth=1.5)
            ax.axvline(i + 0.5, color="red", linewidth=1.5)


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
    return save_figure(fig, path, f"colbench p2p ({frame['backend'].iloc[0]}); nodes {labels}")


def save_figure(fig: Any, path: Path, title: str) -> Path:
    """A heatmap (p2p's, health's) titled and written; the figure closed either way."""
    from colbench.results.reporters.figures import pyplot

    try:
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        with tables.checked(path):
            fig.savefig(path, dpi=110)
    finally:
        pyplot().close(fig)
    return path
