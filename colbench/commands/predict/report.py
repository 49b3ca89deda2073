"""``colbench predict``'s report: the console text (models, fits, predictions, crossovers,
checks), what ``--out DIR`` writes (predict.csv, against.csv and meta.json; the two tables
declared once as typed rows, colbench.results.tables, like results.csv) and what ``--plot``
draws, predict.png: predicted time against size per target N (one panel per op, the 95%
interval shaded), and the tree/ring crossover size against N.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench import __version__, text
from colbench.commands.predict.data import Measured
from colbench.commands.predict.engine import (
    Checked,
    CrossRow,
    Predicted,
    laid_out_bytes,
    largest_errors,
    size_text,
)
from colbench.commands.predict.models import PARAMETERS, RING, SAME, Fit, describe, rate_gbps
from colbench.errors import UsageError
from colbench.results import tables
from colbench.results.reporters.figures import format_size_tick, pyplot, size_axis
from colbench.results.tables import Table, TableRow, TableWriter
from colbench.stats import noise
from colbench.text import Column

GAMMA = PARAMETERS.index("gamma_us_per_byte")
_OP, _ALGO = Column("op", 14, "<"), Column("algo", 11, "<")
_FITS = (
    _OP, _ALGO, Column("overhead_us", 11), Column("alpha_us", 9), Column("link_GB/s", 10),
    Column("reduce_GB/s", 11), Column("rms", 6), Column("max", 6), Column("points", 6),
    Column("ranks", gap="  "),
)  # fmt: skip
_PREDICTIONS = (
    _OP, _ALGO, Column("ranks", 6), Column("nodes", 5), Column("size", 6),
    Column("time_us", 11), Column("low_us", 11), Column("high_us", 11),
    Column("busbw_GB/s", 10), Column("basis", gap="  "),
)  # fmt: skip
_CHECKED = (
    _OP, _ALGO, Column("ranks", 6), Column("size", 6), Column("predicted_us", 12),
    Column("measured_us", 12), Column("error", 8),
)  # fmt: skip


def _rate(us_per_byte: float) -> str:
    rate = rate_gbps(us_per_byte)
    return "inf" if math.isinf(rate) else f"{rate:.4g}"


def fit_lines(fits: Sequence[Fit]) -> list[str]:
    """Which model each (op, algo) uses, its parameters and its residuals."""
    out = [
        "# time = overhead + steps*alpha + link_bytes*beta + reduced_bytes*gamma, fitted on "
        "relative residuals over every (N, size); beta and gamma shown as rates (GB/s)",
        "# models (N ranks, G per node, M nodes, S bytes):",
    ]
    out += [f"#   {f.op} {f.algo}: {describe(f.op, f.algo)}" for f in fits]
    out.append(text.header(_FITS))
    for f in fits:
        p = f.params
        worlds = ",".join(str(n) for n in f.world_sizes)
        # gamma not fitted: the op reduces nothing, or it is folded into beta (see notes).
        gamma = _rate(p.gamma_us_per_byte) if GAMMA in f.free else "-"
        cells = (
            f.op, f.algo, f"{p.overhead_us:.1f}", f"{p.alpha_us:.2f}", _rate(p.beta_us_per_byte),
            gamma, f"{100 * f.residual_rms:.1f}%", f"{100 * f.residual_max:.1f}%", len(f.kept),
            worlds,
        )  # fmt: skip
        out.append(text.line(cells, _FITS))
        out.extend(f"#   {f.op} {f.algo}: {note}" for note in f.notes)
        if noise.poor_fit(f.residual_rms):
            out.append(
                f"#   warning: {f.op} {f.algo}: residual rms {100 * f.residual_rms:.0f}%: the "
                "model does not describe these runs (a CPU-bound or loaded machine?); "
                "predictions from it are unreliable (docs/predict.md)"
            )
        for d in f.dropped:
            pt = d.point
            out.append(
                f"#   dropped {f.op} {f.algo} {pt.world_size} ranks {size_text(pt.size_bytes)}"
                f" ({pt.run}): measured {pt.time_us:.1f} us, residual {100 * d.residual:+.1f}% "
                "(beyond the robust cut-off)"
            )
    return out


def prediction_lines(predicted: Sequence[Predicted], ranks_per_node: int | None) -> list[str]:
    where = "each target on one node, as the fitted runs"
    if ranks_per_node is not None:
        where = f"{ranks_per_node} ranks per node"
    out = [
        f"# predictions ({where}): time_us with its 95% prediction interval (docs/predict.md)",
        text.header(_PREDICTIONS),
    ]
    for p in predicted:
        cells = (
            p.op, p.algo, p.world_size, p.nnodes, size_text(p.size_bytes), f"{p.time_us:.1f}",
            f"{p.time_low_us:.1f}", f"{p.time_high_us:.1f}", f"{p.busbw_gbps:.4g}", p.basis,
        )  # fmt: skip
        out.append(text.line(cells, _PREDICTIONS))
    if any(p.algo != RING and p.basis.startswith(RING) for p in predicted):
        out.append(
            "# tree predictions above use the ring runs' link parameters: no measured tree "
            "checks them (gloo runs rings only); the models are checked against "
            "hand-computed values"
        )
    return out


def skipped_lines(
    op_sizes: dict[str, list[int]], targets: Sequence[int], elem_bytes: dict[str, int | None]
) -> list[str]:
    """Sizes a sweep at a target could not measure, said once per (op, target, reason)
    and not predicted: less than one element, or (ops split by rank, as all_gather of 4K
    on 512 ranks) no whole 16-byte chunk per rank."""
    out = []
    for world_size in targets:
        for op, sizes in op_sizes.items():
            e = elem_bytes.get(op)
            lost = [s for s in sizes if laid_out_bytes(op, s, e, world_size) <= 0]
            tiny = [s for s in lost if e is not None and s < e]
            split = [s for s in lost if s not in tiny]
            for group, why in ((tiny, "less than one element"),
                               (split, "no whole 16-byte chunk per rank")):  # fmt: skip
                if group:
                    out.append(
                        f"# {op} at {world_size} ranks: {', '.join(size_text(s) for s in group)} "
                        f"leave(s) {why} (a sweep skips them): not predicted"
                    )
    return out


def crossover_lines(rows: Sequence[CrossRow]) -> list[str]:
    out = ["# tree vs ring crossover per target N (from the two fitted lines in the size)"]
    for r in rows:
        c = r.crossing
        # Crossing names the tree family TREE; show the algorithm this row compares.
        below = RING if c.faster_below == RING else r.tree_algo
        above = r.tree_algo if below == RING else RING
        if c.faster_below == SAME:
            text = "ring and tree take the same time at every size"
        elif c.size_bytes is None:
            text = f"{below} faster at every size (no crossover)"
        else:
            text = (
                f"{below} faster below {size_text(c.size_bytes)} "
                f"({c.size_bytes:.0f} B), {above} above"
            )
            if not r.clear:
                text += (
                    "; noise could explain it: the two predictions' 95% intervals overlap "
                    "4x below and above it"
                )
        out.append(f"  {r.op} {r.tree_algo} vs ring, {r.world_size} ranks: {text}")
    return out


def against_lines(
    checked: Sequence[Checked], min_size: int, elem_bytes: dict[str, int | None]
) -> list[str]:
    out = [
        "# against measured runs: error = (predicted - measured) / measured",
        text.header(_CHECKED),
    ]
    for c in checked:
        cells = (
            c.op, c.algo, c.world_size, size_text(c.size_bytes), f"{c.predicted_time_us:.1f}",
            f"{c.measured_time_us:.1f}", f"{c.error_pct:+.1f}%",
        )  # fmt: skip
        out.append(text.line(cells, _CHECKED))
    for op, worst in largest_errors(checked, min_size, elem_bytes).items():
        out.append(
            f"largest |error| from {size_text(min_size)}: {abs(worst.error_pct):.1f}% "
            f"({op}, {size_text(worst.size_bytes)}, {worst.world_size} ranks)"
        )
    return out


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
