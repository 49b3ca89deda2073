"""The gate's judging: two runs' rows joined on the key columns, a verdict per pair
(:func:`colbench.commands.gate.verdict.verdict`), the family, the floors and warnings."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from colbench.commands.gate import pooled, sensitivity
from colbench.commands.gate.checks import SizeWindow
from colbench.commands.gate.result import FloorResult, GateResult, GateRules
from colbench.commands.gate.verdict import SMALL_SAMPLE_MARGIN, RowResult, Verdict, row_key, verdict
from colbench.config.min_bw import BusbwFloor
from colbench.errors import UsageError
from colbench.results import metafile
from colbench.results.join import (
    Pair,
    RunFrames,
    join,
    key_columns,
    load_pooled,
    ok_values,
    pool,
    side_status,
    wrong_counts,
)
from colbench.results.rows import STATUS_OK, STATUS_UNSUPPORTED, csv_path, load
from colbench.results.rundir import RunDir
from colbench.stats import rank_tests

#: A baseline row without an exact partner is looked for again by these alone: a partner
#: found so is "not comparable" (other world size, backend, dtype or variant), not missing.
LOOSE_KEY_COLUMNS = ("op", "redop", "root", "in_place", "requested_bytes")


def gate_frames(
    baseline_frame: Any,
    current_frame: Any,
    rules: GateRules,
    baseline: str = "baseline",
    current: str = "current",
    not_judged: str = "",
) -> GateResult:
    """Join two runs' rows (frames as :func:`colbench.results.load` gives) and judge every
    one; ``not_judged``: why performance is not judged at all (the size window is shut)."""
    if not_judged:
        rules = replace(rules, window=SizeWindow(closed=not_judged))
    # An empty side (no baseline) has no say in which key columns the runs record.
    recorded = [f for f in (baseline_frame, current_frame) if len(f)] or [current_frame]
    pairs = join(baseline_frame, current_frame, key_columns(*recorded))
    judged = [
        (p, verdict(p, rules.checks, rules.window, rules.alpha, rules.max_cv))
        for p in _pair_loosely(pairs)
    ]
    runs = sensitivity.baseline_runs(baseline_frame)
    drift, pooled_summary = None, None
    if len(runs) >= rules.min_runs:
        drift = sensitivity.judge_drift(
            judged, runs, rules.min_runs, rules.alpha, rules.power, rules.fwer
        )
    else:
        pooled_summary = pooled.judge_rows(judged, rules.alpha, rules.power, rules.fwer)
    rows = sorted((row for _, row in judged), key=_sort_key)
    return GateResult(
        baseline,
        current,
        rules,
        rows,
        floors=average_busbw_floors(current_frame, rules.floor) if rules.floor is not None else [],
        warnings=_sample_warnings(rules, rows, pairs, drift is not None),
        not_judged=not_judged,
        baseline_runs=len(runs),
        drift=drift,
        pooled=pooled_summary,
    )


def _pair_loosely(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs, each baseline-only key joined with the first current-only key that
    matches it on LOOSE_KEY_COLUMNS (that pair's verdict names what differs)."""
    unmatched = [p for p in pairs if not p.a]
    out = []
    for pair in pairs:
        if not pair.a:
            continue
        if not pair.b:
            loose = tuple(pair.a[0][c] for c in LOOSE_KEY_COLUMNS)
            partner = next(
                (p for p in unmatched if tuple(p.b[0][c] for c in LOOSE_KEY_COLUMNS) == loose), None
            )
            if partner is not None:
                unmatched.remove(partner)
                pair = Pair(pair.key, pair.a, partner.b)
        out.append(pair)
    return out + unmatched


def _sort_key(row: RowResult) -> tuple[Any, ...]:
    k = row.key
    names = tuple(str(k[c]) for c in ("variant", "op", "dtype", "redop"))
    numbers = tuple(int(k[c]) for c in ("root", "size_bytes", "in_place"))
    return (*names, *numbers, str(k["backend"]), int(k["world_size"]))


def _sample_warnings(
    rules: GateRules, rows: Sequence[RowResult], pairs: Sequence[Pair], drift: bool
) -> list[str]:
    warnings = []
    n_base = min((len(p.a) for p in pairs if p.a), default=0)
    n_cur = min((len(p.b) for p in pairs if p.b), default=0)
    relative = any(c.relative for c in rules.checks)
    # The drift test compares run medians, not samples: the rank test's counts do not apply.
    few = n_base and n_cur and rank_tests.smallest_one_sided_p(n_base, n_cur) > rules.alpha
    if relative and few and not drift:
        warnings.append(
            f"only {n_base} baseline and {n_cur} current sample(s) per row: too few for the "
            f"rank test at alpha {rules.alpha:g}, so changes count only beyond "
            f"{SMALL_SAMPLE_MARGIN:g}x the threshold with no overlap; "
            "sweep --repeat 5 gives the gate real statistics"
        )
    wide = sum(r.wide for r in rows)
    if wide:
        warnings.append(
            f"{wide} row(s) have a spread (coefficient of variation) above "
            f"{rules.max_cv:.0%}: their verdicts rest on noisy samples"
        )
    base_wrong = sum(wrong_counts(p.a)[0] > 0 for p in pairs if p.a)
    if base_wrong:
        warnings.append(f"the baseline itself has {base_wrong} row(s) with wrong elements")
    return warnings


def average_busbw_floors(current_frame: Any, floor: BusbwFloor) -> list[FloorResult]:
    """Each op's (and variant's) mean bus bandwidth against the floor, as nccl-tests
    averages one binary's op: over every size and both placements (no size window), each
    row key once with the median of its samples; barrier, without bandwidth, left out."""
    frame = current_frame[current_frame["status"] == STATUS_OK]
    per_op: dict[tuple[str, str], list[float]] = {}
    for samples in pool(frame, key_columns(frame)).values():
        values = ok_values(samples, "busbw_gbps")
        if values and samples[0]["op"] != "barrier":
            per_op.setdefault((samples[0]["op"], samples[0]["variant"]), []).append(
                rank_tests.median(values)
            )
    return [FloorResult(op, v, sum(m) / len(m), floor) for (op, v), m in sorted(per_op.items())]


def _what_changed(base: Mapping[str, Any], cur: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Versions, CPU and recorded environment that differ: the usual suspects."""
    base_v, cur_v = (m.get("versions") or {} for m in (base, cur))
    base_env, cur_env = (m.get("env") or {} for m in (base, cur))
    named = [(name, base_v.get(name), cur_v.get(name)) for name in sorted({*base_v, *cur_v})]
    cpus = [(m.get("cpu") or {}).get("model") for m in (base, cur)]
    devices = [",".join(sorted(set(m.get("devices") or []))) for m in (base, cur)]
    named += [("cpu", cpus[0], cpus[1]), ("devices", devices[0], devices[1])]
    named += [
        (f"${name}", base_env.get(name), cur_env.get(name))
        for name in sorted({*base_env, *cur_env})
    ]
    return [(what, _dash(a), _dash(b)) for what, a, b in named if a != b]


def _dash(value: Any) -> str:
    return "-" if value in (None, "") else str(value)


def run_gate(
    baseline: str | os.PathLike[str],
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    rules: GateRules,
    frames_of: RunFrames | None = None,
) -> GateResult:
    """Load the baseline and the current run(s) (directories or CSV files) and judge;
    without a baseline (``rules.missing_ok``) or against another machine's (metafile.
    MUST_MATCH; unless ``rules.any_machine``), correctness and presence only.
    ``frames_of``: the command's reads of the runs, when it reads them for more than this.
    """
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    cur_frame = load_pooled(currents, frames_of)
    no_baseline = rules.missing_ok and not csv_path(baseline).is_file()
    base_frame = cur_frame.iloc[0:0] if no_baseline else (frames_of or load)(baseline)
    if base_frame.empty and not no_baseline:
        raise UsageError(
            f"baseline {csv_path(baseline)} holds no rows, only its header: nothing to judge by"
        )
    base_meta = None if no_baseline else RunDir.of(baseline).meta_or_none()
    if base_meta is not None and not rules.accept_incomplete_baseline:
        _refuse_incomplete_baseline(baseline, base_meta, base_frame)
    first_meta = RunDir.of(currents[0]).meta_or_none()
    not_judged = f"performance not judged: no baseline at {baseline}" if no_baseline else ""
    if not no_baseline and not rules.any_machine:
        not_judged = other_machine(base_meta, first_meta)
    result = gate_frames(
        base_frame, cur_frame, rules, str(baseline), " + ".join(map(str, currents)), not_judged
    )
    if no_baseline:
        _judge_alone(result.rows, cur_frame)
    changes, machine_warnings = _machines(base_meta, first_meta)
    incomplete, unfinished = _incomplete(currents, cur_frame)
    return replace(
        result,
        warnings=unfinished + result.warnings + machine_warnings,
        changes=changes,
        incomplete=incomplete,
    )


def _held(frame: Any, meta: Mapping[str, Any]) -> int:
    return int((frame["run_id"].astype(str) == str(meta.get("run_id"))).sum())


def _incomplete(
    currents: Sequence[str | os.PathLike[str]], cur_frame: Any
) -> tuple[list[str], list[str]]:
    """Current runs that are not whole (each fails the gate), and the warnings for runs
    that did not end well but kept every planned row (judged on them, said first)."""
    incomplete, warnings = [], []
    for path in currents:
        cur_meta = RunDir.of(path).meta_or_none()
        if cur_meta is None:
            continue
        why = metafile.incomplete(cur_meta, _held(cur_frame, cur_meta))
        if why:
            incomplete.append(f"incomplete run {path}: {why}")
        elif cur_meta.get("status") not in (None, "complete"):
            warnings.append(f"run {path} has status {cur_meta.get('status')!r}, not complete")
    return incomplete, warnings


def _refuse_incomplete_baseline(baseline: Any, meta: Mapping[str, Any], frame: Any) -> None:
    """A baseline killed part way holds only the rows it reached: every later row would
    read as new, and pass."""
    why = metafile.incomplete(dict(meta), _held(frame, meta))
    if why:
        raise UsageError(
            f"baseline {baseline} is an incomplete run: {why}; "
            "--accept-incomplete-baseline judges by it anyway"
        )


def other_machine(base_meta: Any, cur_meta: Any) -> str:
    """Why performance is not comparable between the runs' machines; "" when it is."""
    if base_meta is None or cur_meta is None:
        return ""
    differ = metafile.machine_differences(
        metafile.fingerprint(base_meta), metafile.fingerprint(cur_meta)
    )
    if not differ:
        return ""
    shown = "; ".join(f"{what} {a} vs {b}" for what, a, b in differ)
    return f"performance not comparable: the baseline's machine differs ({shown})"


def _judge_alone(rows: Sequence[RowResult], cur_frame: Any) -> None:
    """Without a baseline every row is new: it must still be measured (or unsupported)
    and correct."""
    unmeasured = [
        row_key(samples[0])
        for samples in pool(cur_frame, key_columns(cur_frame)).values()
        if side_status(samples) not in (STATUS_OK, STATUS_UNSUPPORTED)
    ]
    for row in rows:
        if row.verdict is Verdict.NEW and not row.fails:
            row.notes = ["no baseline: correctness and presence only"]
            if row.key in unmeasured:
                row.verdict = Verdict.WORSE
                row.notes.insert(0, "no measurement in the current run")


def _machines(base_meta: Any, cur_meta: Any) -> tuple[list[tuple[str, str, str]], list[str]]:
    """What changed between the runs' machines and software, and a warning when their CPUs
    differ; nothing when a run has no meta.json."""
    if base_meta is None or cur_meta is None:
        return [], []
    changes = _what_changed(base_meta, cur_meta)
    base_print, cur_print = metafile.fingerprint(base_meta), metafile.fingerprint(cur_meta)
    changes += metafile.machine_differences(base_print, cur_print, metafile.SHOWN)
    cpus = [(m.get("cpu") or {}).get("model") for m in (base_meta, cur_meta)]
    warnings = []
    if None not in cpus and cpus[0] != cpus[1]:
        warnings.append(
            f"the runs were measured on different CPUs ({cpus[0]} vs {cpus[1]}): "
            "performance verdicts compare machines as much as software"
        )
    return changes, warnings
