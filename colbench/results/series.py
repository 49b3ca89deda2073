"""Rows -> lines: the measured curves that plots, fits and comparisons are drawn from.

A line is one (run, op, variant, dtype, redop, placement) over message size. Only
one placement per (op, variant, dtype, redop) becomes a line: out-of-place where the
run has it, else in-place (torch's all_reduce has only the in-place form), so a plot
holds one curve per collective rather than two nearly identical ones.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from colbench.errors import UsageError
from colbench.results.rows import STATUS_OK, csv_path, load

PLACEMENT_NAMES = {0: "out-of-place", 1: "in-place"}
#: The columns a line carries per size (the median of its repeats).
MEASURED = ("time_us", "algbw_gbps", "busbw_gbps")


@dataclass(frozen=True)
class Run:
    """One run's rows and the label it goes by in legends and tables."""

    label: str
    path: Path
    frame: Any  # pandas DataFrame with colbench.results.rows.COLUMNS


@dataclass(frozen=True)
class Line:
    """One measured curve; arrays are sorted by size, one point per size (median of repeats)."""

    run: str
    op: str
    variant: str
    dtype: str
    redop: str
    in_place: int
    backend: str
    world_size: int
    nnodes: int | None
    size_bytes: np.ndarray
    time_us: np.ndarray
    algbw_gbps: np.ndarray
    busbw_gbps: np.ndarray
    #: The size asked for on the command line, per point: all_gather of 4K on 6 ranks
    #: measures 4032 B, and "from 4K up" must still take it.
    requested_bytes: np.ndarray

    def values(self, column: str) -> np.ndarray:
        """The points of one of :data:`MEASURED`."""
        if column not in MEASURED:
            raise KeyError(column)
        return getattr(self, column)


def load_runs(paths: Sequence[str | os.PathLike[str]]) -> list[Run]:
    """Load run directories (or CSV files); labels are directory names, made unique
    between different runs of one name (``a``, ``a (2)``). A run given twice keeps its
    one name: compare of a run with itself (its Ring rows against its Tree rows) is
    one run, not a second one called ``(2)``."""
    if not paths:
        raise UsageError("give at least one run directory")
    runs: list[Run] = []
    seen: dict[str, list[Path]] = {}
    for raw in paths:
        path = Path(raw)
        frame = load(path)
        if frame.empty:
            raise UsageError(f"{csv_path(path)} holds no rows, only its header: nothing to read")
        where = csv_path(path).resolve()
        name = (path if path.is_dir() else path.parent).resolve().name or str(path)
        same_name = seen.setdefault(name, [])
        if where not in same_name:
            same_name.append(where)
        index = same_name.index(where) + 1
        label = name if index == 1 else f"{name} ({index})"
        runs.append(Run(label, path, frame))
    return runs


def select_variant(run: Run, variant: str | None) -> Run:
    """Keep only one variant's rows (``""`` selects rows without a variant)."""
    if variant is None:
        return run
    frame = run.frame
    kept = frame[frame["variant"] == variant]
    if kept.empty:
        have = sorted(set(frame["variant"].tolist()))
        raise UsageError(
            f"run {run.label} has no variant {variant!r}; it has "
            + ", ".join(repr(v) for v in have)
        )
    return Run(f"{run.label} [{variant}]" if variant else run.label, run.path, kept)


def _optional_int(value: Any) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else int(number)


def _requested(frame: Any) -> Any:
    # Frames built by hand (tests, other tools) may lack the column: then size is what
    # was asked for.
    column = "requested_bytes" if "requested_bytes" in frame.columns else "size_bytes"
    return frame[column].astype(float)


def lines(run: Run) -> list[Line]:
    """The run's curves over size; size-0 rows (barrier, empty imports) cannot be on a log axis,
    and rows without a measurement (status oom, unsupported) have nothing to draw."""
    frame = run.frame
    frame = frame[
        (frame["size_bytes"] > 0) & (frame["status"] == STATUS_OK) & frame["time_us"].notna()
    ]
    out: list[Line] = []
    keys = ["op", "variant", "dtype", "redop", "world_size"]
    for key, group in frame.groupby(keys, sort=False, dropna=False):
        op, variant, dtype, redop, world_size = key
        in_place = 0 if (group["in_place"] == 0).any() else 1
        chosen = group[group["in_place"] == in_place]
        per_size = chosen.groupby("size_bytes")[list(MEASURED)].median().sort_index()
        requested = _requested(chosen).groupby(chosen["size_bytes"]).max().sort_index()
        first = chosen.iloc[0]
        out.append(
            Line(
                run=run.label,
                op=str(op),
                variant=str(variant),
                dtype=str(dtype),
                redop=str(redop),
                in_place=in_place,
                backend=str(first["backend"]),
                world_size=int(world_size),
                nnodes=_optional_int(first["nnodes"]),
                size_bytes=per_size.index.to_numpy(dtype=float),
                requested_bytes=requested.to_numpy(dtype=float),
                **{c: per_size[c].to_numpy(dtype=float) for c in MEASURED},
            )
        )
    return out


def short_variants(curves: Sequence[Line]) -> dict[str, str]:
    """Variant names without the KEY=VALUE pairs that every curve shares."""
    pairs = {c.variant: [p for p in c.variant.split(",") if p] for c in curves}
    common = set.intersection(*(set(p) for p in pairs.values())) if pairs else set()
    return {
        name: ",".join(p for p in parts if p not in common) or (name or "no variant")
        for name, parts in pairs.items()
    }


def labels(curves: Sequence[Line]) -> list[str]:
    """Legend text naming only what tells the curves apart (op, variant, run...).

    dtype, redop and placement are shown only when one op has several of them: that
    all_gather's redop is ``none`` and all_reduce's is ``sum`` tells nobody anything.
    """
    variants = short_variants(curves)
    # A run picked down to one variant (compare --variant-a) carries it in its label
    # already: "ring-vs-tree [NCCL_ALGO=Ring]" needs no "NCCL_ALGO=Ring · " before it.
    named = all(c.variant and c.run.endswith(f"[{c.variant}]") for c in curves)
    fields: list[tuple[bool, Any]] = [
        (False, lambda c: c.op),
        (False, lambda c: "" if named else variants[c.variant]),
        (False, lambda c: c.run),
        (True, lambda c: c.dtype),
        (True, lambda c: c.redop),
        (False, lambda c: f"n={c.world_size}"),
        (True, lambda c: PLACEMENT_NAMES[c.in_place]),
    ]
    ops = dict.fromkeys(c.op for c in curves)
    varying = []
    for per_op, get in fields:
        if per_op:
            shown = any(len({get(c) for c in curves if c.op == op}) > 1 for op in ops)
        else:
            shown = len({get(c) for c in curves}) > 1
        if shown:
            varying.append(get)
    if not varying:
        return [c.op for c in curves]
    return [" · ".join(get(c) for get in varying) for c in curves]
