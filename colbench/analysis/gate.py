"""Checks over the engine: a verdict per joined row, the floors, and the gate's exit code.

Rows are joined on the schema's key columns (:mod:`colbench.analysis.engine`); a
baseline row without an exact partner is looked for again among the current run's
unmatched rows by :data:`LOOSE_KEY_COLUMNS`, so that a row measured at another world
size, backend, dtype or variant is "not comparable" rather than missing. Every pair gets
:func:`colbench.analysis.verdict.verdict`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.analysis import stats
from colbench.analysis.baseline import update_baseline
from colbench.analysis.checks import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_CV,
    Check,
    SizeWindow,
    parse_checks,
    parse_floor,
)
from colbench.analysis.engine import (
    Pair,
    join,
    key_columns,
    load_pooled,
    ok_values,
    pool,
    read_meta,
    wrong_counts,
)
from colbench.analysis.verdict import SMALL_SAMPLE_MARGIN, RowResult, Verdict, verdict
from colbench.errors import ExitCode, UsageError
from colbench.results import STATUS_OK, csv_path, load

#: A row of the baseline that found no exact partner is looked for again by these alone:
#: a partner found so is "not comparable" (other world size, backend, dtype or variant)
#: rather than missing.
LOOSE_KEY_COLUMNS = ("op", "redop", "root", "in_place", "requested_bytes")


@dataclass(frozen=True)
class FloorResult:
    """nccl-tests' NCCL_TESTS_MIN_BW: one op's average bus bandwidth against a floor."""

    op: str
    variant: str
    avg_busbw_gbps: float
    floor_gbps: float

    @property
    def fails(self) -> bool:
        return self.avg_busbw_gbps < self.floor_gbps


@dataclass
class GateResult:
    """The whole verdict: every joined row, the floors, and what the reports print."""

    baseline: str
    current: str
    checks: list[Check]
    window: SizeWindow
    alpha: float
    max_cv: float
    rows: list[RowResult]
    floors: list[FloorResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: (what, baseline value, current value) for versions, CPU and environment.
    changes: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def failures(self) -> int:
        """Failing rows plus failing average-bandwidth floors."""
        return sum(r.fails for r in self.rows) + sum(f.fails for f in self.floors)

    @property
    def passed(self) -> bool:
        return self.failures == 0

    def counts(self) -> dict[Verdict, int]:
        out = {v: 0 for v in Verdict}
        for row in self.rows:
            out[row.verdict] += 1
        return {v: n for v, n in out.items() if n}


def gate_frames(
    baseline_frame: Any,
    current_frame: Any,
    checks: Sequence[Check],
    window: SizeWindow = SizeWindow(),
    alpha: float = DEFAULT_ALPHA,
    max_cv: float = DEFAULT_MAX_CV,
    baseline: str = "baseline",
    current: str = "current",
) -> GateResult:
    """Join two runs' rows and judge every one (frames as :func:`colbench.results.load` gives)."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {alpha:g}")
    pairs = join(baseline_frame, current_frame, key_columns(baseline_frame, current_frame))
    result = GateResult(baseline, current, list(checks), window, alpha, max_cv, rows=[])
    result.rows = [verdict(p, checks, window, alpha, max_cv) for p in _pair_loosely(pairs)]
    result.rows.sort(key=_sort_key)
    _warn_about_samples(result, pairs)
    return result


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
                (p for p in unmatched if tuple(p.b[0][c] for c in LOOSE_KEY_COLUMNS) == loose),
                None,
            )
            if partner is not None:
                unmatched.remove(partner)
                pair = Pair(pair.key, pair.a, partner.b)
        out.append(pair)
    return out + unmatched


def _sort_key(row: RowResult) -> tuple[Any, ...]:
    k = row.key
    return (
        str(k["variant"]),
        str(k["op"]),
        str(k["dtype"]),
        str(k["redop"]),
        int(k["root"]),
        int(k["size_bytes"]),
        int(k["in_place"]),
        str(k["backend"]),
        int(k["world_size"]),
    )


def _warn_about_samples(result: GateResult, pairs: Sequence[Pair]) -> None:
    n_base = min((len(p.a) for p in pairs if p.a), default=0)
    n_cur = min((len(p.b) for p in pairs if p.b), default=0)
    relative = any(c.relative for c in result.checks)
    if relative and n_base and n_cur and stats.smallest_one_sided_p(n_base, n_cur) > result.alpha:
        result.warnings.append(
            f"only {n_base} baseline and {n_cur} current sample(s) per row: too few for the "
            f"rank test at alpha {result.alpha:g}, so changes count only beyond "
            f"{SMALL_SAMPLE_MARGIN:g}x the threshold with no overlap; "
            "sweep --repeat 5 gives the gate real statistics"
        )
    wide = sum(r.wide for r in result.rows)
    if wide:
        result.warnings.append(
            f"{wide} row(s) have a spread (coefficient of variation) above "
            f"{result.max_cv:.0%}: their verdicts rest on noisy samples"
        )
    base_wrong = sum(wrong_counts(p.a)[0] > 0 for p in pairs if p.a)
    if base_wrong:
        result.warnings.append(f"the baseline itself has {base_wrong} row(s) with wrong elements")


def average_busbw_floors(current_frame: Any, floor_gbps: float) -> list[FloorResult]:
    """nccl-tests' NCCL_TESTS_MIN_BW: each op's mean bus bandwidth over all its rows.

    As in nccl-tests, the average runs over every size and both placements (no size
    window); each (row key) counts once, with the median of its samples. Ops without
    bandwidth (barrier) are left out.
    """
    out = []
    frame = current_frame[current_frame["status"] == STATUS_OK]
    per_op: dict[tuple[str, str], list[float]] = {}
    for samples in pool(frame, key_columns(frame)).values():
        values = ok_values(samples, "busbw_gbps")
        if values and samples[0]["op"] != "barrier":
            per_op.setdefault((samples[0]["op"], samples[0]["variant"]), []).append(
                stats.median(values)
            )
    for (op, variant), medians in sorted(per_op.items()):
        out.append(FloorResult(op, variant, sum(medians) / len(medians), floor_gbps))
    return out


def _what_changed(base: Mapping[str, Any], cur: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Versions, CPU and recorded environment that differ: the usual suspects."""
    changes: list[tuple[str, str, str]] = []

    def note(what: str, a: Any, b: Any) -> None:
        if a != b:
            changes.append(
                (what, "-" if a in (None, "") else str(a), "-" if b in (None, "") else str(b))
            )

    for name in sorted(set(base.get("versions") or {}) | set(cur.get("versions") or {})):
        note(name, (base.get("versions") or {}).get(name), (cur.get("versions") or {}).get(name))
    note("cpu", (base.get("cpu") or {}).get("model"), (cur.get("cpu") or {}).get("model"))
    note(
        "devices",
        ",".join(sorted(set(base.get("devices") or []))),
        ",".join(sorted(set(cur.get("devices") or []))),
    )
    base_env, cur_env = base.get("env") or {}, cur.get("env") or {}
    for name in sorted(set(base_env) | set(cur_env)):
        note(f"${name}", base_env.get(name), cur_env.get(name))
    return changes


def run_gate(
    baseline: str | os.PathLike[str],
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    checks: Sequence[Check],
    window: SizeWindow = SizeWindow(),
    alpha: float = DEFAULT_ALPHA,
    max_cv: float = DEFAULT_MAX_CV,
    floor_gbps: float | None = None,
) -> GateResult:
    """Load the baseline and the current run(s) (directories or CSV files) and judge."""
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    base_frame = load(baseline)
    cur_frame = load_pooled(currents)
    result = gate_frames(
        base_frame,
        cur_frame,
        checks,
        window,
        alpha,
        max_cv,
        str(baseline),
        " + ".join(map(str, currents)),
    )
    if floor_gbps is not None:
        result.floors = average_busbw_floors(cur_frame, floor_gbps)
    base_meta = read_meta(baseline)
    for path in reversed(currents):
        cur_meta = read_meta(path)
        if cur_meta is not None and cur_meta.get("status") not in (None, "complete"):
            result.warnings.insert(
                0, f"run {path} has status {cur_meta.get('status')!r}, not complete"
            )
    first_meta = read_meta(currents[0])
    if base_meta is not None and first_meta is not None:
        result.changes = _what_changed(base_meta, first_meta)
        cpus = [(m.get("cpu") or {}).get("model") for m in (base_meta, first_meta)]
        if None not in cpus and cpus[0] != cpus[1]:
            result.warnings.append(
                f"the runs were measured on different CPUs ({cpus[0]} vs {cpus[1]}): "
                "performance verdicts compare machines as much as software"
            )
    return result


def gate_command(
    baseline: str,
    current: Sequence[str],
    check_texts: Sequence[str],
    *,
    min_size: str | None = None,
    max_size: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_cv_pct: float = DEFAULT_MAX_CV * 100,
    min_avg_busbw_gbps: str | None = None,
    report: str | None = None,
    junit: str | None = None,
    update: bool = False,
    variant_a: str | None = None,
    variant_b: str | None = None,
) -> int:
    """``colbench gate``: judge (or accept) the current run(s), print the table, write the
    reports; the exit code. The floor defaults to $NCCL_TESTS_MIN_BW as in nccl-tests."""
    from colbench.report import gate_report

    if variant_a is not None or variant_b is not None:
        # One interleaved run, B against A: colbench.analysis.paired.
        from colbench.analysis.paired import paired_command

        if current:
            raise UsageError("--variant-a/--variant-b judge variants of ONE run: give one run")
        return paired_command(
            baseline, variant_a, variant_b, check_texts,
            min_size=min_size, max_size=max_size, alpha=alpha,
        )  # fmt: skip
    if not current:
        raise UsageError("give the current run(s) after the baseline")
    checks = parse_checks(check_texts)
    window = SizeWindow.parse(min_size, max_size)
    if max_cv_pct <= 0:
        raise UsageError(f"--max-cv-pct must be positive, got {max_cv_pct:g}")
    if min_avg_busbw_gbps is not None:
        floor = parse_floor(min_avg_busbw_gbps, "--min-avg-busbw-gbps")
    else:
        floor = parse_floor(os.environ.get("NCCL_TESTS_MIN_BW"), "NCCL_TESTS_MIN_BW")
    if update:
        if csv_path(baseline).is_file():
            result = run_gate(baseline, current, checks, window, alpha, max_cv_pct / 100)
            print("\n".join(gate_report.console_lines(result)), flush=True)
        target = update_baseline(current, baseline)
        print(f"colbench: {' + '.join(current)} is the new baseline in {target}", file=sys.stderr)
        return int(ExitCode.OK)
    result = run_gate(baseline, current, checks, window, alpha, max_cv_pct / 100, floor)
    print("\n".join(gate_report.console_lines(result)), flush=True)
    for path, render in ((report, gate_report.markdown), (junit, gate_report.junit_xml)):
        if path:
            _write_text(Path(path), render(result))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        _write_text(Path(summary), gate_report.markdown(result) + "\n", append=True)
    return int(ExitCode.OK) if result.passed else int(ExitCode.DATA_ERROR)


def _write_text(path: Path, text: str, append: bool = False) -> None:
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
