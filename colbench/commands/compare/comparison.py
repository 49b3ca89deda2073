"""Two runs side by side: the comparison engine with no checks, and one figure.

Rows are joined on the schema's key columns (:mod:`colbench.results.join`) but the
backend, which a row names as its reason instead, and, when each run has one variant,
the variant (a Ring run against its Tree run). Rows that cannot be judged are kept and
marked ``x`` with the reason (the way asv marks "not comparable"): present in one run
only, measured on different backends, or failing verification. Repeats of one key in a
run (several imported 0-byte rows, say) are combined by their median.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from colbench import text
from colbench.commands.compare.nccl_ran import ran_lines
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results.join import (
    Pair,
    Sample,
    fabric_warnings,
    is_ok,
    join,
    key_columns,
    read_meta,
)
from colbench.results.reporters.figures import METRICS, metric, metric_key, size_axis
from colbench.results.series import PLACEMENT_NAMES, Run, lines, load_runs, select_variant
from colbench.stats import noise, rank_tests
from colbench.text import Column


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    metric_name: str
    #: keys + value_a, value_b, ratio, comparable, reason (and each side's wrong count,
    #: backend and variant); one row per key.
    table: Any
    #: Lines about how the runs differ in what was recorded (versions, devices...).
    context: list[str]
    join_on_variant: bool
    #: The columns the rows were joined on: the schema's key less backend and, with one
    #: variant a run, variant (compared across on purpose), and less any a run leaves empty.
    keys: tuple[str, ...]
    #: What the user should know before reading the table (an emulated fabric allowed).
    warnings: list[str] = field(default_factory=list)


def _describe(run: Run) -> str:
    frame = run.frame
    backend = "/".join(sorted(set(frame["backend"].astype(str))))
    worlds = "/".join(str(w) for w in sorted(set(frame["world_size"].astype(int))))
    text = f"{run.label}: {backend}, {worlds} ranks"
    meta = read_meta(run.path) or {}
    versions = meta.get("versions") or {}
    shown = [f"{k} {v}" for k, v in versions.items() if v and k in ("torch", "nccl", "nccl-tests")]
    if meta.get("status") == "imported":
        shown.insert(0, "imported from nccl-tests")
    devices = sorted(set(frame["device"].astype(str)))
    if devices and devices != [""]:
        shown.append("/".join(devices))
    return text + (f" ({', '.join(shown)})" if shown else "")


def compare_runs(
    path_a: str | os.PathLike[str],
    path_b: str | os.PathLike[str],
    metric_name: str = "busbw",
    *,
    variant_a: str | None = None,
    variant_b: str | None = None,
    across_backends: bool = False,
    allow_emulated: bool = False,
) -> Comparison:
    """Join two runs and judge each pair of rows; ratio is B / A.

    ``across_backends`` pairs rows measured on different backends instead of marking them
    not comparable (crosscheck's gloo side tests the cross-check itself, not NCCL).
    """
    import pandas as pd

    metric_name = metric_key(metric_name)
    chosen = metric(metric_name)
    run_a, run_b = load_runs([path_a, path_b])
    run_a, run_b = select_variant(run_a, variant_a), select_variant(run_b, variant_b)
    warnings = fabric_warnings(
        {f"A ({run_a.label})": run_a.frame, f"B ({run_b.label})": run_b.frame}, allow_emulated
    )
    variants_a = set(run_a.frame["variant"].astype(str))
    variants_b = set(run_b.frame["variant"].astype(str))
    # One variant each: compare them with each other (ring run vs tree run); several:
    # pair variant with variant, since mixing Ring rows with Tree rows means nothing.
    join_on_variant = not (len(variants_a) == 1 and len(variants_b) == 1)
    # A backend differs by a row's reason (or not at all, across_backends), not by a key.
    across: tuple[str, ...] = ("backend",) if join_on_variant else ("backend", "variant")
    engines_a, engines_b = set(run_a.frame["engine"]), set(run_b.frame["engine"])
    if not join_on_variant and len(engines_a) == len(engines_b) == 1 and engines_a != engines_b:
        # torch's rows against NCCL's own (--engine torch,nccl): the torch tax.
        across += ("engine",)
    keys = key_columns(run_a.frame, run_b.frame, across=across)
    records = [
        record
        for pair in join(run_a.frame, run_b.frame, keys)
        if (record := _record(pair, keys, chosen.column, across_backends)) is not None
    ]
    columns = [*keys, *_SIDE_COLUMNS, "present", "reason", "ratio", "unmeasured"]
    table = pd.DataFrame(records, columns=columns)
    table["comparable"] = table["reason"] == ""
    table["within_noise"] = [_within_noise(row) for row in table.itertuples(index=False)]
    if not join_on_variant:
        # One variant per run, named in the context lines; per row it would mislead.
        table["variant"] = ""
    order = ["op", "variant", "dtype", "redop", "in_place", "size_bytes", "unmeasured"]
    order += [k for k in keys if k not in order]
    table = table.sort_values(order, kind="stable").drop(columns="unmeasured")
    table = table.reset_index(drop=True)
    context = [f"A = {_describe(run_a)}", f"B = {_describe(run_b)}"]
    context += ran_lines("A", run_a.frame)
    if run_b.path != run_a.path or variant_b != variant_a:
        context += ran_lines("B", run_b.frame)
    if not join_on_variant and variants_a != variants_b:
        va, vb = next(iter(variants_a)), next(iter(variants_b))
        context.append(f"variant: A {va or '(none)'!r} vs B {vb or '(none)'!r}")
    if "engine" in across:
        context += _torch_tax(run_a.frame, run_b.frame)
    return Comparison(run_a, run_b, metric_name, table, context, join_on_variant, keys, warnings)


def _torch_tax(frame_a: Any, frame_b: Any) -> list[str]:
    """The torch tax of each row pair, when one side is torch's rows and the other NCCL's."""
    import pandas as pd

    from colbench.results.torch_tax import summary_lines

    both = pd.concat([frame_a, frame_b], ignore_index=True)
    # Each side's variant is one engine's: the pairs are the same rows but the engine.
    both["variant"] = ""
    return [line.removeprefix("# ") for line in summary_lines(both)[:-1]]


_SIDE_COLUMNS = [
    f"{c}_{s}" for s in "ab" for c in ("value", "wrong", "backend", "variant", "samples", "cv")
]


def _measured(samples: Sequence[Sample]) -> list[Sample]:
    """Samples that hold a measurement (status ok and a time)."""
    return [s for s in samples if is_ok(s) and s.get("time_us") is not None]


def _side(samples: Sequence[Sample], column: str) -> list[Any]:
    """value (median of the repeats), wrong (summed), backend, variant, and how the
    repeats spread (their count and coefficient of variation) of one side."""
    if not samples:
        return [math.nan, math.nan, None, None, 0, None]
    values = [float(s[column]) for s in samples if s.get(column) is not None]
    value = rank_tests.median(values) if values else math.nan
    wrong = sum(int(s.get("wrong") or 0) for s in samples)
    spread = noise.spread(values)
    return [value, wrong, samples[0]["backend"], samples[0]["variant"], spread.samples, spread.cv]


def _record(pair: Pair, keys: Sequence[str], column: str, across: bool) -> list[Any] | None:
    """One table row for a pair, or None when neither side measured and one lacks the key."""
    measured_a, measured_b = _measured(pair.a), _measured(pair.b)
    # Rows without a measurement (status oom, unsupported) have nothing to compare;
    # they are named as the reason where the other run has the key.
    status_a = str(pair.a[0]["status"]) if pair.a and not measured_a else None
    status_b = str(pair.b[0]["status"]) if pair.b and not measured_b else None
    if not measured_a and not measured_b and not (status_a and status_b):
        return None
    side_a, side_b = _side(measured_a, column), _side(measured_b, column)
    present = "both" if measured_a and measured_b else "left_only" if measured_a else "right_only"
    if not measured_a and not measured_b:
        present = "both"
    reason = _reason(present, side_a, side_b, column, status_a, status_b, across)
    ratio = math.nan if reason else float(side_b[0]) / float(side_a[0])
    return [*pair.key, *side_a, *side_b, present, reason, ratio, not (measured_a or measured_b)]


def _reason(
    present: str,
    side_a: Sequence[Any],
    side_b: Sequence[Any],
    column: str,
    status_a: str | None,
    status_b: str | None,
    across_backends: bool,
) -> str:
    """Why this pair cannot be compared, or '' when it can."""
    value_a, wrong_a, backend_a = side_a[:3]
    value_b, wrong_b, backend_b = side_b[:3]
    if status_a and status_b:
        return (
            f"{status_a} in A, {status_b} in B"
            if status_a != status_b
            else f"{status_a} in A and B"
        )
    if present == "left_only":
        return f"{status_b} in B" if status_b else "only in A"
    if present == "right_only":
        return f"{status_a} in A" if status_a else "only in B"
    if backend_a != backend_b and not across_backends:
        return f"backend {backend_a} vs {backend_b}"
    if wrong_a or wrong_b:
        return "wrong results in " + ("A and B" if wrong_a and wrong_b else "A" if wrong_a else "B")
    if not (value_a > 0 and value_b > 0):
        return (
            "zero bandwidth (no bytes): compare --metric time"
            if column != "time_us"
            else "zero time"
        )
    return ""


def _spreads(row: Any) -> tuple[noise.Spread, noise.Spread]:
    """How each side's samples of a table row spread (a cv of NaN: unknown)."""

    def one(samples: Any, cv: Any) -> noise.Spread:
        return noise.Spread(int(samples), None if cv is None or math.isnan(cv) else float(cv))

    return one(row.samples_a, row.cv_a), one(row.samples_b, row.cv_b)


def _within_noise(row: Any) -> bool | None:
    """Whether the samples' own spread could explain a comparable row's ratio."""
    return noise.ratio_within_noise(float(row.ratio), *_spreads(row)) if row.comparable else None


def _spread_text(row: Any) -> str:
    """Each side's spread over its repeats (``±4%/±12%``); ``-`` with one sample each,
    or for a row that cannot be compared."""
    a, b = _spreads(row)
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
    for key, group in usable.groupby(groups, sort=False):
        op, variant, dtype, redop, in_place = key
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
    from colbench.commands.plot.lines import context, draw_lines, styles
    from colbench.results.reporters.figures import pyplot

    chosen = METRICS[comparison.metric_name]
    curves = lines(comparison.a) + lines(comparison.b)
    if not curves:
        raise UsageError("nothing to plot: no rows with a size above 0 bytes")
    fig, (top, bottom) = pyplot().subplots(
        2,
        1,
        sharex=True,
        figsize=(9, 7.5),
        height_ratios=(3, 1.4),
        layout="constrained",
    )
    draw_lines(top, curves, comparison.metric_name)
    top.set_xlabel("")
    top.set_title(_title(chosen.title, comparison, context(curves)), fontsize=10)
    # Each ratio line takes the color of its collective (and variant) in the panel above.
    pairs = list(zip(curves, styles(curves), strict=True))
    colors = {(c.op, ""): s[0] for c, s in reversed(pairs)}  # an op's first curve, by default
    colors.update({(c.op, c.variant): s[0] for c, s in reversed(pairs)})
    _ratio_panel(bottom, comparison, colors)
    low = min(float(c.size_bytes.min()) for c in curves)
    high = max(float(c.size_bytes.max()) for c in curves)
    size_axis(bottom, low, high)
    return fig


#: Characters of a title line that fit the figure's width at its font size.
_TITLE_WIDTH = 95


def _title(metric_title: str, comparison: Comparison, context_text: str) -> str:
    """The figure's title, wrapped: long run names (a path, a variant's variables) would
    run past the figure's edges and be clipped."""
    import textwrap

    parts = [
        f"{metric_title}: B = {comparison.b.label}",
        f"vs A = {comparison.a.label}",
        context_text,
    ]
    if len(parts[0]) + len(parts[1]) < _TITLE_WIDTH:
        parts[:2] = [f"{parts[0]} {parts[1]}"]
    return "\n".join(line for part in parts for line in textwrap.wrap(part, _TITLE_WIDTH))


def _noise_bars(rows: Any) -> Any:
    """Error bars of the ratios: the band noise could explain (noise.band_factor), below
    and above each ratio; none where a side has one sample."""
    factors = [noise.band_factor(*_spreads(row)) or 1.0 for row in rows.itertuples(index=False)]
    ratios = rows["ratio"].to_numpy(dtype=float)
    return np.array([ratios - ratios / factors, ratios * factors - ratios])


def _ratio_panel(ax: Any, comparison: Comparison, colors: dict[tuple[str, str], str]) -> None:
    from matplotlib.ticker import FuncFormatter

    table = comparison.table
    usable = table[table["comparable"] & (table["size_bytes"] > 0)]
    # One sample a side has no spread to draw a band from: no bars, and the panel says so
    # rather than promising bars that never appear.
    banded = any(noise.band_factor(*_spreads(row)) for row in usable.itertuples(index=False))
    drawn = 0
    groups = usable.groupby(["op", "variant", "dtype", "redop"], sort=False)
    for index, (key, group) in enumerate(groups):
        # Same placement choice as the curves above: out-of-place where there is one.
        placement = 0 if (group["in_place"] == 0).any() else 1
        chosen = group[group["in_place"] == placement].sort_values("size_bytes")
        label = " · ".join(str(k) for k in key[:2] if str(k))
        ax.errorbar(
            chosen["size_bytes"],
            chosen["ratio"],
            yerr=_noise_bars(chosen) if banded else None,
            marker="o",
            markersize=3.5,
            capsize=2,
            color=colors.get(
                (str(key[0]), str(key[1])), colors.get((str(key[0]), ""), f"C{index}")
            ),
            label=label,
        )
        drawn += 1
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
