"""``colbench predict``'s console text: models, fits, predictions, crossovers, checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

from colbench import text
from colbench.commands.predict.engine import (
    Checked,
    CrossRow,
    Predicted,
    laid_out_bytes,
    largest_errors,
    size_text,
)
from colbench.commands.predict.models import PARAMETERS, RING, SAME, Fit, describe, rate_gbps
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
