"""What ``colbench predict --out DIR`` writes: predict.csv, against.csv and meta.json; and
what ``--plot`` draws, predict.png: predicted time against size per target N (one panel
per op, the 95% interval shaded), and the tree/ring crossover size against N.

The two tables are declared once as typed rows (colbench.results.tables), like results.csv.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.commands.predict.data import Measured
from colbench.commands.predict.engine import Checked, CrossRow, Predicted
from colbench.commands.predict.models import PARAMETERS, Fit, describe
from colbench.errors import UsageError
from colbench.results import tables
from colbench.results.reporters.figures import format_size_tick, pyplot, save, size_axis
from colbench.results.tables import Table, TableRow, TableWriter

#: Version of predict.csv and predict's meta.json (2: predict.csv's requested_bytes;
#: meta.json's crossovers may say faster_below "same").
PREDICT_VERSION = 2
#: Version of against.csv.
AGAINST_VERSION = 2


PREDICT_TABLE = Table(
    "predict.csv",
    Predicted,
    PREDICT_VERSION,
    {
        1: "first release.",
        2: "requested_bytes; size_bytes is what a sweep at the target's ranks would report.",
    },
)
AGAINST_TABLE = Table(
    "against.csv",
    Checked,
    AGAINST_VERSION,
    {
        1: "first release.",
        2: "requested_bytes: --min-size judges the size asked for, as the sweep's was.",
    },
)


def _fit_meta(f: Fit) -> dict[str, Any]:
    return {
        "op": f.op,
        "algo": f.algo,
        "model": describe(f.op, f.algo),
        "parameters": dict(zip(PARAMETERS, f.params.vector().tolist(), strict=True)),
        "fitted": [PARAMETERS[i] for i in f.free],
        "residual_rms": f.residual_rms,
        "residual_max": f.residual_max,
        "points": len(f.kept),
        "world_sizes": list(f.world_sizes),
        "dropped": [
            {
                "run": d.point.run,
                "world_size": d.point.world_size,
                "size_bytes": d.point.size_bytes,
                "time_us": d.point.time_us,
                "residual": d.residual,
            }
            for d in f.dropped
        ],
        "notes": list(f.notes),
    }


def _write_table(directory: Path, table: Table, rows: Sequence[TableRow]) -> None:
    path = directory / table.file_name
    path.unlink(missing_ok=True)
    with TableWriter(path, table) as writer:
        writer.write_all(rows)


def write_outputs(
    out: str | os.PathLike[str], runs: Sequence[str], against_runs: Sequence[str],
    fits: Sequence[Fit], predicted: Sequence[Predicted], checked: Sequence[Checked],
    crossings: Sequence[CrossRow],
) -> Path:  # fmt: skip
    """Write the tables and meta.json into ``out`` (created if missing); the directory."""
    directory = Path(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_table(directory, PREDICT_TABLE, predicted)
        if checked:
            _write_table(directory, AGAINST_TABLE, checked)
        meta = {
            "schema_version": PREDICT_VERSION,
            "colbench": __version__,
            "runs": list(runs),
            "against": list(against_runs),
            "fits": [_fit_meta(f) for f in fits],
            "crossovers": [
                dict(op=r.op, world_size=r.world_size, tree_algo=r.tree_algo, **vars(r.crossing))
                for r in crossings
            ],
        }
        tables.replace_text(directory / "meta.json", json.dumps(meta, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write into {directory}: {exc.strerror}") from None
    return directory


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
