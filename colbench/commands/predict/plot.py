"""predict.png: predicted time against size per target N (one panel per op, the 95%
interval shaded), and the tree/ring crossover size against N."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench.commands.predict.data import Measured
from colbench.commands.predict.engine import CrossRow, Predicted
from colbench.results.reporters.figures import format_size_tick, pyplot, save, size_axis

_STYLES = {"ring": "-", "tree": ":", "double_tree": "--"}


def _time_panel(
    ax: Any, op: str, predicted: Sequence[Predicted], measured: Sequence[Measured]
) -> None:
    rows = [p for p in predicted if p.op == op]
    points = [m for m in measured if m.op == op]
    worlds = sorted({p.world_size for p in rows} | {m.world_size for m in points})
    colors = {n: f"C{i % 10}" for i, n in enumerate(worlds)}
    for key in dict.fromkeys((p.algo, p.world_size) for p in rows):
        line = [p for p in rows if (p.algo, p.world_size) == key]
        line.sort(key=lambda p: p.size_bytes)
        sizes = [p.size_bytes for p in line]
        color = colors[key[1]]
        ax.plot(
            sizes, [p.time_us for p in line], _STYLES.get(key[0], "-"), color=color,
            label=f"{key[0]}, {key[1]} ranks",
        )  # fmt: skip
        ax.fill_between(
            sizes, [p.time_low_us for p in line], [p.time_high_us for p in line],
            color=color, alpha=0.12, linewidth=0,
        )  # fmt: skip
    # What the fit was made from (and checked against): a prediction far from them is
    # an extrapolation, which the reader should see.
    for m in points:
        ax.plot(
            m.size_bytes, m.time_us, "o", markersize=3.5, color=colors[m.world_size],
            markerfacecolor="none", label=f"measured, {m.world_size} ranks ({m.algo})",
        )  # fmt: skip
    spanned = [float(p.size_bytes) for p in rows] + [float(s) for m in points for s in m.size_bytes]
    size_axis(ax, max(1.0, min(spanned)), max(spanned))
    ax.set_yscale("log")
    ax.set_ylabel("time per call (us), 95% interval shaded")
    ax.set_title(f"{op}: predicted time vs size")
    ax.legend(fontsize="x-small")


def _crossover_panel(ax: Any, rows: Sequence[CrossRow]) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.set_title("tree vs ring crossover")
    ax.set_xlabel("ranks")
    ax.set_ylabel("crossover size")
    for algo in dict.fromkeys(r.tree_algo for r in rows):
        found = [r for r in rows if r.tree_algo == algo and r.crossing.size_bytes is not None]
        if not found:
            continue
        below = found[0].crossing.faster_below
        ax.plot(
            [r.world_size for r in found], [r.crossing.size_bytes for r in found], "o-",
            label=f"{algo} vs ring ({algo if below != 'ring' else 'ring'} faster below)",
        )  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(format_size_tick))
    ax.legend(fontsize="x-small")


def plot_predictions(
    directory: Path,
    predicted: Sequence[Predicted],
    crossings: Sequence[CrossRow],
    measured: Sequence[Measured] = (),
) -> Path:
    """Write predict.png (:func:`figure`) into ``directory``; its path."""
    return save(figure(predicted, crossings, measured), directory / "predict.png")


def figure(
    predicted: Sequence[Predicted], crossings: Sequence[CrossRow], measured: Sequence[Measured]
) -> Any:
    """A panel per op (the predictions, and the ``measured`` points they come from), and
    the crossover against N only where a crossover was found: an empty panel would read
    as a finding."""
    plt = pyplot()
    op_names = list(dict.fromkeys(p.op for p in predicted))
    crossed = [r for r in crossings if r.crossing.size_bytes is not None]
    panels = len(op_names) + bool(crossed)
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5), squeeze=False)
    for ax, op in zip(axes[0], op_names, strict=False):
        _time_panel(ax, op, predicted, measured)
    if crossed:
        _crossover_panel(axes[0][-1], crossed)
    elif crossings:
        fig.suptitle("no tree/ring crossover at these N", fontsize="small")
    fig.tight_layout()
    return fig
