"""Two runs joined row by row: the comparison table of ``colbench compare`` (and
crosscheck), each pair of rows with both values, their ratio, and why it cannot be compared.

Rows join on the schema's key columns (:mod:`colbench.results.join`) but the backend (a
row names it as its reason) and, when each run has one variant, the variant (a Ring run
against its Tree run). Rows that cannot be judged are kept, marked ``x`` with the reason
(as asv marks "not comparable"); a key's repeats in a run are combined by their median.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.config.variants import variant_env
from colbench.nccl.algo import asked
from colbench.output import plural
from colbench.results.join import Pair, Sample, fabric_warnings, is_ok, join, key_columns
from colbench.results.reporters.figures import metric, metric_key
from colbench.results.rundir import RunDir
from colbench.results.series import Run, load_runs, select_variant
from colbench.stats import noise, rank_tests


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
    meta = RunDir.of(run.path).meta_or_none() or {}
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
    """Join two runs and judge each pair of rows; ratio is B / A. ``across_backends`` pairs rows
    measured on different backends instead of marking them not comparable (crosscheck's gloo side
    tests the cross-check itself, not NCCL)."""
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
    table = _table(records, keys, join_on_variant)
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


def _table(records: list[list[Any]], keys: Sequence[str], join_on_variant: bool) -> Any:
    """The records as the comparison's table, in the order it is shown."""
    import pandas as pd

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
    return table.reset_index(drop=True)


def _torch_tax(frame_a: Any, frame_b: Any) -> list[str]:
    """The torch tax of each row pair, when one side is torch's rows and the other NCCL's."""
    import pandas as pd

    from colbench.results.join import torch_tax_lines

    both = pd.concat([frame_a, frame_b], ignore_index=True)
    # Each side's variant is one engine's: the pairs are the same rows but the engine.
    both["variant"] = ""
    return [line.removeprefix("# ") for line in torch_tax_lines(both)[:-1]]


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
    reason = _reason(present, side_a, side_b, column, (status_a, status_b), across)
    ratio = math.nan if reason else float(side_b[0]) / float(side_a[0])
    return [*pair.key, *side_a, *side_b, present, reason, ratio, not (measured_a or measured_b)]


def _reason(
    present: str, side_a: Sequence[Any], side_b: Sequence[Any], column: str,
    statuses: tuple[str | None, str | None], across_backends: bool,
) -> str:  # fmt: skip
    """Why this pair cannot be compared, or '' when it can."""
    status_a, status_b = statuses
    value_a, wrong_a, backend_a = side_a[:3]
    value_b, wrong_b, backend_b = side_b[:3]
    if status_a and status_b:
        same = status_a == status_b
        return f"{status_a} in A and B" if same else f"{status_a} in A, {status_b} in B"
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


def spreads(row: Any) -> tuple[noise.Spread, noise.Spread]:
    """How each side's samples of a table row spread (a cv of NaN: unknown)."""

    def one(samples: Any, cv: Any) -> noise.Spread:
        return noise.Spread(int(samples), None if cv is None or math.isnan(cv) else float(cv))

    return one(row.samples_a, row.cv_a), one(row.samples_b, row.cv_b)


def _within_noise(row: Any) -> bool | None:
    """Whether the samples' own spread could explain a comparable row's ratio."""
    return noise.ratio_within_noise(float(row.ratio), *spreads(row)) if row.comparable else None


# Whether each variant's rows ran the NCCL algorithm its NCCL_ALGO asked for: a ring-vs-tree
# comparison is true only where NCCL ran what was asked (older versions fall back to Ring, a
# tuner plugin may choose otherwise). The rows' nccl_algo is what NCCL's own log said it
# chose (colbench.commands.sweep.probe).
def ran_lines(label: str, frame: Any) -> list[str]:
    """``A NCCL_ALGO=Tree: all_reduce ran Tree in 12 of 12 rows, as asked`` and the like,
    for each variant and op of an NCCL run; nothing for runs NCCL did not measure."""
    nccl = frame[(frame["backend"] == "nccl") & (frame["status"] == "ok")]
    out = []
    for (variant, op), rows in nccl.groupby(["variant", "op"], sort=False):
        recorded = [str(a) for a in rows["nccl_algo"] if str(a) not in ("", "<NA>")]
        request = variant_env(str(variant)).get("NCCL_ALGO")
        allowed = asked(request, str(op)) if request is not None else None
        head = f"{label} {variant or '(no variant)'}: {op}"
        if not recorded:
            if allowed is not None:
                out.append(f"{head}: which algorithm NCCL ran is not recorded (no probe)")
            continue
        out.append(f"{head} {_verdict(Counter(recorded), len(rows), allowed)}")
    return out


def _verdict(ran: Counter[str], rows: int, allowed: frozenset[str] | None) -> str:
    shown = ", ".join(f"{algo} in {n}" for algo, n in ran.most_common())
    if allowed is None:
        # NCCL_ALGO may still be in the ranks' environment (the shell's, not a variant's).
        return f"ran {shown} of {plural(rows, 'row')} (its variant sets no NCCL_ALGO)"
    wanted = "/".join(sorted(allowed))
    good = sum(n for algo, n in ran.items() if algo in allowed)
    if good == rows:
        return f"ran {shown} of {plural(rows, 'row')}, as asked"
    return f"ran {shown} of {plural(rows, 'row')}: NOT {wanted} as asked in {rows - good}"
