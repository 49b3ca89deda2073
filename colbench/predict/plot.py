"""predict.png: predicted time against size per target N (one panel per op, the 95%
interval shaded), and the tree/ring crossover size against N."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.predict.engine import CrossRow, Predicted
from colbench.report.plots import pyplot

_STYLES = {"ring": "-", "tree": ":", "double_tree": "--"}


def _time_panel(ax: Any, op: str, predicted: Sequence[Predicted]) -> None:
    rows = [p for p in predicted if p.op == op]
    worlds = sorted({p.world_size for p in rows})
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
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("predicted time (us)")
    ax.set_title(f"{op}: time vs size")
    ax.legend(fontsize="x-small")


def _crossover_panel(ax: Any, rows: Sequence[CrossRow]) -> None:
    ax.set_title("tree vs ring crossover")
    ax.set_xlabel("ranks")
    ax.set_ylabel("crossover size (bytes)")
    drawn = False
    for algo in dict.fromkeys(r.tree_algo for r in rows):
        found = [r for r in rows if r.tree_algo == algo and r.crossing.size_bytes is not None]
        if not found:
            continue
        below = found[0].crossing.faster_below
        ax.plot(
            [r.world_size for r in found], [r.crossing.size_bytes for r in found], "o-",
            label=f"{algo} vs ring ({algo if below != 'ring' else 'ring'} faster below)",
        )  # fmt: skip
        drawn = True
    if not drawn:
        # Nothing crosses at a positive size: a log axis would have no data to span.
        ax.text(0.5, 0.5, "no crossover at these N", ha="center", transform=ax.transAxes)
        return
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.legend(fontsize="x-small")


def plot_predictions(
    directory: Path, predicted: Sequence[Predicted], crossings: Sequence[CrossRow]
) -> Path:
    """Write predict.png into ``directory``; its path."""
    plt = pyplot()
    op_names = list(dict.fromkeys(p.op for p in predicted))
    panels = len(op_names) + 1
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5), squeeze=False)
    for ax, op in zip(axes[0], op_names, strict=False):
        _time_panel(ax, op, predicted)
    _crossover_panel(axes[0][-1], crossings)
    fig.tight_layout()
    path = directory / "predict.png"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
    return path
