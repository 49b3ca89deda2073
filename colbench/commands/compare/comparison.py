"""``colbench compare``: the comparison (:mod:`.pairs`) as a table for the terminal, its
summary per line, and one figure of both runs' curves over their ratio."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from colbench import text
from colbench.commands.compare.pairs import Comparison, compare_runs, spreads
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results.reporters.figures import METRICS, size_axis
from colbench.results.series import PLACEMENT_NAMES, lines
from colbench.stats import noise
from colbench.text import Column


def _spread_text(row: Any) -> str:
    """Each side's spread over its repeats (``±4%/±12%``); ``-`` with one sample each,
    or for a row that cannot be compared."""
    a, b = spreads(row)
    if not row.comparable or (a.cv is None and b.cv is None):
        return "-"
    return f"{a.text()}/{b.text()}"


def format_table(comparison: Comparison) -> str:
    """The comparison as text for the terminal: both values, ratio, and a summary per line."""
    chosen = METRICS[comparison.metric_name]
    table = comparison.table
    unit = "us" if chosen.column == "time_us" else "GB/s"
    better = "B is slower" if chosen.column == "time_us" else "B moves more data per second"
    name = comparison.metric_name
    lines_out = [f"# {line}" for line in comparison.context]
    lines_out.append(f"# {name} in {unit}; ratio = B / A (above 1: {better}); x = not comparable")
    lines_out.append(
        f"# spread: each side's coefficient of variation over its samples (sweep --repeat); "
        f"~ after B/A: within {noise.BAND_SDS:g} combined spreads of 1, noise could explain it"
    )
    shown = comparison.join_on_variant
    width = max([len(str(v)) for v in table["variant"]] + [7]) + 2
    columns = (
        Column("op", 15, "<", ""), *([Column("variant", width, "<", "")] if shown else []),
        Column("dtype", 10, "<", ""), Column("redop", 6, "<", ""),
        Column("placement", 14, "<", ""), Column("size", 8, gap=""),
        Column("A " + name, 12, gap=""), Column("B " + name, 12, gap=""),
        Column("B/A", 9, gap=""), Column("spread", 14, gap=""), Column("note", gap="  "),
    )  # fmt: skip
    lines_out.append(text.header(columns))
    for row in table.itertuples(index=False):
        ratio = "x" if not row.comparable else f"{row.ratio:.3f}"
        ratio += "~" if row.within_noise is True else ""
        cells = (
            row.op, *([str(row.variant) or "-"] if shown else []), row.dtype, row.redop,
            PLACEMENT_NAMES[int(row.in_place)], format_size(int(row.size_bytes)),
            text.number(row.value_a), text.number(row.value_b), ratio, _spread_text(row),
            row.reason,
        )  # fmt: skip
        lines_out.append(text.line(cells, columns))
    lines_out += [f"# {line}" for line in summary(comparison)]
    return "\n".join(lines_out)


def summary(comparison: Comparison) -> list[str]:
    """Geometric-mean ratio per (op, variant, dtype, redop, placement) over comparable sizes."""
    table = comparison.table
    usable = table[table["comparable"]]
    out = []
    groups = ["op", "variant", "dtype", "redop", "in_place"]
    for (op, variant, dtype, redop, in_place), group in usable.groupby(groups, sort=False):
        label = " ".join(str(p) for p in (op, variant, dtype, redop) if str(p))
        out.append(f"{label} {PLACEMENT_NAMES[int(in_place)]}: {_group_summary(group)}")
    if not usable.empty and usable["within_noise"].isna().all():
        out.append(
            "one sample per row on a side: each ratio's own noise is unknown "
            "(sweep --repeat 5 measures it)"
        )
    skipped = int((~table["comparable"]).sum())
    if skipped:
        out.append(f"{skipped} row(s) not comparable (marked x)")
    if usable.empty:
        out.append("nothing comparable: the runs share no (op, dtype, redop, placement, size)")
    return out


def _group_summary(group: Any) -> str:
    """A line's sizes summed up: the geometric mean of B/A with its 95% interval over
    the sizes, the range, and whether noise could explain it."""
    ratios = group["ratio"].to_numpy(dtype=float)
    mean = noise.geometric_interval(ratios)
    text = f"geometric mean B/A {mean.value:.3f}"
    if len(ratios) > 1:
        text += f" ({noise.LEVEL:.0%} interval {mean.low:.3g} to {mean.high:.3g})"
    text += f" over {len(ratios)} size(s), from {ratios.min():.3f} to {ratios.max():.3f}"
    judged = group["within_noise"].dropna()
    if len(ratios) > 1 and mean.within_noise:
        text += ": noise could explain it (the interval holds 1)"
    if len(judged):
        text += f"; {int(judged.sum())} of {len(judged)} size(s) within their samples' noise (~)"
    return text


def figure(comparison: Comparison) -> Any:
    """Top: both runs' curves; bottom: B/A per size for the comparable rows."""
    from colbench.commands.plot.lines import context, draw_lines, plotted, size_span, styles
    from colbench.results.reporters.figures import pyplot

    curves = lines(comparison.a) + lines(comparison.b)
    chosen = plotted(curves, comparison.metric_name)
    fig, (top, bottom) = pyplot().subplots(
        2, 1, sharex=True, figsize=(9, 7.5), height_ratios=(3, 1.4), layout="constrained"
    )
    draw_lines(top, curves, comparison.metric_name)
    top.set_xlabel("")
    top.set_title(_title(chosen.title, comparison, context(curves)), fontsize=10)
    # Each ratio line takes the color of its collective (and variant) in the panel above.
    pairs = list(zip(curves, styles(curves), strict=True))
    colors = {(c.op, ""): s[0] for c, s in reversed(pairs)}  # an op's first curve, by default
    colors.update({(c.op, c.variant): s[0] for c, s in reversed(pairs)})
    _ratio_panel(bottom, comparison, colors)
    size_axis(bottom, *size_span(curves))
    return fig


#: Characters of a title line that fit the figure's width at its font size.
_TITLE_WIDTH = 95


def _title(metric_title: str, comparison: Comparison, context_text: str) -> str:
    """The figure's title, wrapped: long run names (a path, a variant's variables) would
    run past the figure's edges and be clipped."""
    import textwrap

    head, versus = f"{metric_title}: B = {comparison.b.label}", f"vs A = {comparison.a.label}"
    parts = [f"{head} {versus}"] if len(head) + len(versus) < _TITLE_WIDTH else [head, versus]
    parts.append(context_text)
    return "\n".join(line for part in parts for line in textwrap.wrap(part, _TITLE_WIDTH))


def _noise_bars(rows: Any) -> Any:
    """Error bars of the ratios: the band noise could explain (noise.band_factor), below
    and above each ratio; none where a side has one sample."""
    factors = [noise.band_factor(*spreads(row)) or 1.0 for row in rows.itertuples(index=False)]
    ratios = rows["ratio"].to_numpy(dtype=float)
    return np.array([ratios - ratios / factors, ratios * factors - ratios])


def _ratio_panel(ax: Any, comparison: Comparison, colors: dict[tuple[str, str], str]) -> None:
    from matplotlib.ticker import FuncFormatter

    table = comparison.table
    usable = table[table["comparable"] & (table["size_bytes"] > 0)]
    # One sample a side has no spread to draw a band from: no bars, and the panel says so
    # rather than promising bars that never appear.
    banded = any(noise.band_factor(*spreads(row)) for row in usable.itertuples(index=False))
    groups = usable.groupby(["op", "variant", "dtype", "redop"], sort=False)
    for index, (key, group) in enumerate(groups):
        # Same placement choice as the curves above: out-of-place where there is one.
        placement = 0 if (group["in_place"] == 0).any() else 1
        chosen = group[group["in_place"] == placement].sort_values("size_bytes")
        op, variant = str(key[0]), str(key[1])
        color = colors.get((op, variant), colors.get((op, ""), f"C{index}"))
        bars = _noise_bars(chosen) if banded else None
        label = " · ".join(k for k in (op, variant) if k)
        look = {"marker": "o", "markersize": 3.5, "capsize": 2, "color": color, "label": label}
        ax.errorbar(chosen["size_bytes"], chosen["ratio"], yerr=bars, **look)
    drawn = groups.ngroups
    ax.axhline(1.0, color="black", linewidth=1, alpha=0.6)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_ylabel("B / A (bars: noise band)" if banded else "B / A")
    if not banded and drawn:
        ax.text(0.01, 0.97, "no noise band: one sample per row (sweep --repeat 5 measures it)",
                transform=ax.transAxes, ha="left", va="top", fontsize="x-small")  # fmt: skip
    ax.grid(True, which="major", alpha=0.3)
    if drawn:
        values = usable["ratio"].to_numpy(dtype=float)
        spread = max(2.0, float(np.nanmax(np.abs(np.log2(values)))) * 1.15)
        ax.set_ylim(2**-spread, 2**spread)
        if drawn > 1:
            ax.legend(fontsize="x-small", loc="best")
    else:
        ax.text(0.5, 0.5, "no comparable rows", transform=ax.transAxes, ha="center")


def compare(
    path_a: str | os.PathLike[str],
    path_b: str | os.PathLike[str],
    metric_name: str = "busbw",
    *,
    out: str | os.PathLike[str] | None = None,
    variant_a: str | None = None,
    variant_b: str | None = None,
    allow_emulated: bool = False,
) -> tuple[Comparison, Path]:
    """``colbench compare``: the comparison and the figure file written, named after the
    runs, in ``out`` (a directory; default: run B's own folder). Runs that share no
    comparable row are refused: a table of x and an empty ratio panel would read as a
    result."""
    from colbench.results.reporters.figures import out_dir, run_folder, save, unused_path

    comparison = compare_runs(
        path_a, path_b, metric_name, variant_a=variant_a, variant_b=variant_b,
        allow_emulated=allow_emulated,
    )  # fmt: skip
    if not comparison.table["comparable"].any():
        raise UsageError(nothing_comparable(comparison))
    directory = out_dir(out, run_folder(path_b))
    path = unused_path("compare", [comparison.a.label, comparison.b.label], directory)
    return comparison, save(figure(comparison), path)


def nothing_comparable(comparison: Comparison) -> str:
    """Why two runs have no row to compare, in one line."""
    table = comparison.table
    reasons = table["reason"].value_counts()
    why = "; ".join(f"{count} {reason}" for reason, count in reasons.head(3).items())
    return (
        f"nothing to compare: {comparison.a.label} and {comparison.b.label} share no "
        f"comparable row ({why or 'no rows'}); compare runs of the same ops and sizes"
    )
