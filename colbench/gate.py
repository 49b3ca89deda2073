"""Baseline vs current: parsed checks, a per-row verdict, and the gate's exit code.

A check is a small parsed object (pytest-benchmark's ``min:5%`` idea): ``busbw_gbps:-15%``
lets bus bandwidth drop by at most 15%, ``time_p50_us:+25%`` lets the median iteration
rise by at most 25%, ``wrong:0`` (always on) fails any wrong element. Each metric knows
which way is worse, so a faster run never fails a time check.

Rows are joined on what makes two numbers comparable (op, dtype, redop, root,
placement, size, world size, backend, variant). Every key has R samples per run
(``sweep --repeat R``); the gate compares medians and asks an exact Mann-Whitney U test
whether the samples agree that the change is real, the way asv marks big-but-insignificant
changes instead of failing on them. See :func:`judge` for the rule.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from colbench import stats
from colbench.errors import UsageError
from colbench.results import STATUS_OK, STATUS_UNSUPPORTED, csv_path, frame_text, load
from colbench.rundir import RunDir
from colbench.sizes import parse_size

#: Metric -> +1 when a rise is a regression (times, wrong elements), -1 when a drop is.
METRIC_WORSE_WHEN: dict[str, int] = {
    "time_us": +1,
    "time_min_us": +1,
    "time_p50_us": +1,
    "time_p99_us": +1,
    "time_max_us": +1,
    "algbw_gbps": -1,
    "busbw_gbps": -1,
    "wrong": +1,
}

#: What must be equal for two rows to be the same measurement. ``requested_bytes`` is
#: left out on purpose: ``size_bytes`` already follows from it at a given world size.
KEY_COLUMNS = (
    "variant",
    "backend",
    "world_size",
    "op",
    "dtype",
    "redop",
    "root",
    "in_place",
    "size_bytes",
)
#: Identity columns that later schemas may add (subgroup runs): used when both runs have them.
OPTIONAL_KEY_COLUMNS = ("group_size", "groups")
#: A row of the baseline that found no exact partner is looked for again by these alone:
#: a partner found so is "not comparable" (other world size, backend, dtype or variant)
#: rather than missing.
LOOSE_KEY_COLUMNS = ("op", "redop", "root", "in_place", "requested_bytes")
#: Columns outside the key that still make numbers incomparable when they differ.
COMPARABLE_COLUMNS = ("device", "average")

DEFAULT_ALPHA = 0.05
DEFAULT_MAX_CV = 0.10
#: Without enough samples for the rank test, a change must exceed the threshold this
#: many times over (and the sample ranges must not overlap) to count.
SMALL_SAMPLE_MARGIN = 2.0


class Verdict(str, Enum):
    WORSE = "worse"
    BETTER = "better"
    SAME = "same"
    NOISY = "noisy"
    NOT_COMPARABLE = "not comparable"
    MISSING = "missing"
    #: Only in the current run: reported, never a failure.
    NEW = "new"
    #: Present and correct, but outside --min-size/--max-size: performance not judged.
    OK = "ok"
    #: Neither side has a measurement (unsupported or oom on both): nothing to judge.
    SKIPPED = "skipped"


#: Verdicts that fail the gate.
FAILING = frozenset({Verdict.WORSE, Verdict.MISSING, Verdict.NOT_COMPARABLE})
#: When several checks judge one row, the row takes the first of these that any gave.
_SEVERITY = (
    Verdict.WORSE,
    Verdict.NOISY,
    Verdict.BETTER,
    Verdict.SAME,
    Verdict.OK,
)


@dataclass(frozen=True)
class Check:
    """One parsed ``--check``: a relative change limit or an absolute bound on a metric."""

    metric: str
    #: Relative: the largest change allowed in the bad direction, as a fraction (0.15).
    #: Absolute: the bound itself, in the metric's unit.
    limit: float
    relative: bool
    text: str

    @property
    def worse_when(self) -> int:
        return METRIC_WORSE_WHEN[self.metric]

    @classmethod
    def parse(cls, text: str) -> Check:
        """``metric:+X%``, ``metric:-X%``, ``metric:X%`` (the bad direction) or ``metric:V``."""
        metric, sep, spec = text.strip().partition(":")
        metric, spec = metric.strip(), spec.strip().replace(" ", "")
        if not sep or not metric or not spec:
            raise UsageError(
                f"bad --check {text!r}: write METRIC:+X%, METRIC:-X% or METRIC:VALUE, "
                "e.g. busbw_gbps:-15%"
            )
        if metric not in METRIC_WORSE_WHEN:
            close = difflib.get_close_matches(metric, METRIC_WORSE_WHEN, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(
                f"bad --check {text!r}: unknown metric {metric!r}{hint}; use one of "
                + ", ".join(METRIC_WORSE_WHEN)
            )
        worse_when = METRIC_WORSE_WHEN[metric]
        bad_word = "rise" if worse_when > 0 else "drop"
        if spec.endswith("%"):
            if metric == "wrong":
                raise UsageError(f"bad --check {text!r}: wrong takes an absolute count: wrong:0")
            match = re.fullmatch(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)%", spec)
            if match is None:
                raise UsageError(f"bad --check {text!r}: {spec!r} is not a percentage like -15%")
            sign, number = match.groups()
            if sign and (1 if sign == "+" else -1) != worse_when:
                good = f"{metric}:{'+' if worse_when > 0 else '-'}{number}%"
                raise UsageError(
                    f"bad --check {text!r}: for {metric} a regression is a {bad_word}, "
                    f"so its limit is written {good}"
                )
            fraction = float(number) / 100
            if worse_when < 0 and fraction >= 1:
                raise UsageError(
                    f"bad --check {text!r}: {metric} cannot drop by {number}% or more, "
                    "so the check could never fail"
                )
            return cls(
                metric, fraction, True, f"{metric}:{'+' if worse_when > 0 else '-'}{number}%"
            )
        try:
            value = float(spec)
        except ValueError:
            raise UsageError(
                f"bad --check {text!r}: {spec!r} is neither a percentage (-15%) nor a number"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"bad --check {text!r}: the bound must be a number >= 0")
        if metric == "wrong" and value != 0:
            raise UsageError(
                f"bad --check {text!r}: wrong elements always fail the gate; only wrong:0 exists"
            )
        return cls(metric, value, False, f"{metric}:{spec}")

    def describe(self) -> str:
        if self.metric == "wrong":
            return "no wrong element"
        if self.relative:
            word = "rise" if self.worse_when > 0 else "drop"
            return f"{self.metric} may {word} by at most {self.limit:.0%}"
        word = "at most" if self.worse_when > 0 else "at least"
        return f"{self.metric} {word} {self.limit:g}"


WRONG_CHECK = Check("wrong", 0.0, False, "wrong:0")


def parse_checks(texts: Iterable[str]) -> list[Check]:
    """Parse every ``--check``; ``wrong:0`` is always there, first."""
    checks = [WRONG_CHECK]
    for text in texts:
        check = Check.parse(text)
        if check == WRONG_CHECK:
            continue
        if any(c.metric == check.metric for c in checks):
            raise UsageError(f"two checks on {check.metric}: give one --check per metric")
        checks.append(check)
    return checks


@dataclass(frozen=True)
class SizeWindow:
    """Sizes (``size_bytes``) whose performance is judged; correctness is judged everywhere."""

    min_bytes: int | None = None
    max_bytes: int | None = None

    @classmethod
    def parse(cls, min_size: str | None, max_size: str | None) -> SizeWindow:
        low = parse_size(min_size) if min_size is not None else None
        high = parse_size(max_size) if max_size is not None else None
        if low is not None and high is not None and low > high:
            raise UsageError(f"--min-size {min_size} is larger than --max-size {max_size}")
        return cls(low, high)

    def __contains__(self, size_bytes: object) -> bool:
        size = int(size_bytes)  # type: ignore[call-overload]
        if self.min_bytes is not None and size < self.min_bytes:
            return False
        return self.max_bytes is None or size <= self.max_bytes

    def describe(self) -> str:
        if self.min_bytes is None and self.max_bytes is None:
            return "all sizes"
        if self.max_bytes is None:
            return f"sizes >= {self.min_bytes} B"
        if self.min_bytes is None:
            return f"sizes <= {self.max_bytes} B"
        return f"sizes {self.min_bytes}-{self.max_bytes} B"


@dataclass(frozen=True)
class Judgement:
    """What one relative check says about one row."""

    verdict: Verdict
    baseline_median: float
    current_median: float
    #: (current - baseline) / baseline of the medians.
    change: float
    #: One-sided p-value in the direction the medians moved; None under the small-sample rule.
    p_value: float | None
    rule: str


def judge(
    baseline: Sequence[float],
    current: Sequence[float],
    worse_when: int,
    threshold: float,
    alpha: float = DEFAULT_ALPHA,
) -> Judgement:
    """The verdict of a relative check on one row's samples.

    - The medians give the change. Within ``threshold`` either way: ``same``.
    - Beyond it, the samples must show that the change beyond the threshold is real:
      the baseline's samples are moved by the threshold (times by ``1 + t``, a drop
      check's bandwidths by ``1 - t``) and an exact one-sided Mann-Whitney U test asks
      whether the current samples lie beyond them; p <= alpha makes the row ``worse``
      (or ``better`` the other way). Asking "did it change?" instead would flag every
      run-to-run wobble of a noisy machine that happens to cross the threshold.
    - With too few samples for the test ever to reach alpha (R = 1 or 2 a side at
      0.05), the change is real only when every current sample lies beyond every moved
      baseline sample and the medians moved more than :data:`SMALL_SAMPLE_MARGIN` times
      the threshold.
    - Beyond the threshold but not shown real: ``noisy``.
    """
    base_med, cur_med = stats.median(baseline), stats.median(current)
    if base_med == 0:
        raise ValueError("relative change against a baseline median of 0")
    change = (cur_med - base_med) / base_med
    bad = change * worse_when
    if abs(bad) <= threshold:
        return Judgement(Verdict.SAME, base_med, cur_med, change, None, "within the limit")
    direction = Verdict.WORSE if bad > 0 else Verdict.BETTER
    # The baseline moved by the threshold in the direction the medians went.
    factor = 1 + threshold if change > 0 else 1 - threshold
    moved = [v * factor for v in baseline]
    alternative: stats.Alternative = "greater" if change > 0 else "less"
    if stats.smallest_one_sided_p(len(baseline), len(current)) <= alpha:
        p: float | None = stats.mann_whitney_u(current, moved, alternative).p_value
        real = p is not None and p <= alpha
        rule = "rank test"
    else:
        p = None
        apart = min(current) > max(moved) if change > 0 else max(current) < min(moved)
        real = apart and abs(bad) > SMALL_SAMPLE_MARGIN * threshold
        rule = "small-sample rule"
    return Judgement(direction if real else Verdict.NOISY, base_med, cur_med, change, p, rule)


@dataclass
class CheckResult:
    """One check applied to one row."""

    check: Check
    verdict: Verdict
    baseline_median: float | None = None
    current_median: float | None = None
    change: float | None = None
    p_value: float | None = None
    rule: str = ""
    detail: str = ""


@dataclass
class RowResult:
    """Everything the gate says about one joined row."""

    key: dict[str, Any]
    verdict: Verdict
    checks: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_baseline: int = 0
    n_current: int = 0
    #: True when a sample's spread (coefficient of variation) is above --max-cv.
    wide: bool = False

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING

    def label(self) -> str:
        """op dtype redop placement size, as people say it."""
        k = self.key
        place = "in-place" if int(k["in_place"]) else "out-of-place"
        root = f" root {k['root']}" if int(k["root"]) >= 0 else ""
        variant = f" [{k['variant']}]" if k.get("variant") else ""
        return f"{k['op']} {k['dtype']} {k['redop']} {place}{root} {k['size_bytes']} B{variant}"


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


def _key_columns(*frames: Any) -> tuple[str, ...]:
    extra = tuple(c for c in OPTIONAL_KEY_COLUMNS if all(c in f.columns for f in frames))
    return KEY_COLUMNS + extra


def _plain(value: Any) -> Any:
    """pandas scalars -> plain Python (None for a missing value), so keys hash alike."""
    import pandas as pd

    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _groups(frame: Any, key_columns: Sequence[str]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for record in frame.to_dict("records"):
        row = {k: _plain(v) for k, v in record.items()}
        out.setdefault(tuple(row[c] for c in key_columns), []).append(row)
    return out


def _ok_values(samples: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    values = []
    for s in samples:
        value = s.get(metric)
        if s.get("status", STATUS_OK) == STATUS_OK and value is not None:
            values.append(float(value))
    return values


def _wrong_counts(samples: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(largest wrong count of any sample, samples that were not verified)."""
    worst, unverified = 0, 0
    for s in samples:
        value = s.get("wrong")
        if s.get("status", STATUS_OK) != STATUS_OK:
            continue
        if value is None:
            unverified += 1
        else:
            worst = max(worst, int(value))
    return worst, unverified


def _side_status(samples: Sequence[Mapping[str, Any]]) -> str:
    """ok when any sample holds a measurement, else the status of the first sample."""
    statuses = [str(s.get("status", STATUS_OK)) for s in samples]
    return STATUS_OK if STATUS_OK in statuses else statuses[0]


def _unmeasured(
    base: Sequence[Mapping[str, Any]], cur: Sequence[Mapping[str, Any]]
) -> tuple[Verdict, str] | None:
    """The verdict of a row that a side could not measure, when it is not judged at all.

    ``unsupported`` is a fact of the variant (NCCL has no tree all_gather): unsupported
    on both sides has nothing to judge, unsupported now but measured before means the
    current run no longer measures what the baseline did, and measured now but
    unsupported before has no baseline to compare with. An oom in the current run
    alone stays a failed check (see _judge_row): the run could measure it before.
    """
    base_status, cur_status = _side_status(base), _side_status(cur)
    if base_status != STATUS_OK and cur_status != STATUS_OK:
        return Verdict.SKIPPED, (
            f"no measurement on either side ({base_status} in the baseline, "
            f"{cur_status} in the current run)"
        )
    if cur_status == STATUS_UNSUPPORTED:
        return Verdict.NOT_COMPARABLE, "unsupported in the current run, measured in the baseline"
    if base_status == STATUS_UNSUPPORTED:
        return Verdict.NEW, "unsupported in the baseline: nothing to compare with"
    return None


def _judge_row(
    base: Sequence[Mapping[str, Any]],
    cur: Sequence[Mapping[str, Any]],
    checks: Sequence[Check],
    window: SizeWindow,
    alpha: float,
    max_cv: float,
) -> RowResult:
    key = {c: cur[0][c] for c in (*KEY_COLUMNS, "requested_bytes")}
    row = RowResult(key=key, verdict=Verdict.SAME, n_baseline=len(base), n_current=len(cur))
    unmeasured = _unmeasured(base, cur)
    if unmeasured is not None:
        row.verdict, note = unmeasured
        row.notes.append(note)
        worst, _ = _wrong_counts(cur)
        if worst:
            row.verdict = Verdict.WORSE
            row.notes.insert(0, f"{worst} wrong element(s)")
        return row
    results: list[CheckResult] = []
    spreads: list[str] = []
    in_window = key["size_bytes"] in window
    base_ok = [s for s in base if s.get("status", STATUS_OK) == STATUS_OK]
    cur_ok = [s for s in cur if s.get("status", STATUS_OK) == STATUS_OK]
    for check in checks:
        if check.metric == "wrong":
            worst, unverified = _wrong_counts(cur)
            if worst:
                results.append(
                    CheckResult(check, Verdict.WORSE, detail=f"{worst} wrong element(s)")
                )
            elif unverified and _wrong_counts(base)[1] < len(base_ok):
                row.notes.append(f"{unverified} sample(s) not verified (--check 0)")
            continue
        if not in_window:
            continue
        if not cur_ok:
            statuses = sorted({str(s.get("status")) for s in cur})
            results.append(
                CheckResult(check, Verdict.WORSE, detail=f"no measurement (status {statuses[0]})")
            )
            continue
        cur_values = _ok_values(cur, check.metric)
        if not cur_values:
            row.notes.append(f"{check.metric}: no value in the current run")
            continue
        if not check.relative:
            med = stats.median(cur_values)
            bad = (med - check.limit) * check.worse_when > 0
            results.append(
                CheckResult(
                    check,
                    Verdict.WORSE if bad else Verdict.SAME,
                    current_median=med,
                    rule="absolute",
                    detail=f"median {med:.4g} beyond {check.limit:g}" if bad else "",
                )
            )
            continue
        base_values = _ok_values(base_ok, check.metric)
        if not base_values:
            row.notes.append(f"{check.metric}: no baseline measurement to compare with")
            continue
        if stats.median(base_values) == 0:
            # Barrier rows have no bandwidth: a relative change of 0 says nothing.
            continue
        j = judge(base_values, cur_values, check.worse_when, check.limit, alpha)
        results.append(
            CheckResult(
                check,
                j.verdict,
                j.baseline_median,
                j.current_median,
                j.change,
                j.p_value,
                j.rule,
            )
        )
        cvs = [stats.coefficient_of_variation(v) for v in (base_values, cur_values)]
        if any(cv is not None and cv > max_cv for cv in cvs):
            shown = "/".join("-" if cv is None else f"{cv:.0%}" for cv in cvs)
            spreads.append(f"{check.metric} {shown}")
    if spreads:
        row.wide = True
        row.notes.append(
            f"wide spread, CV baseline/current above {max_cv:.0%}: " + ", ".join(spreads)
        )
    row.checks = results
    verdicts = {r.verdict for r in results}
    if not in_window and Verdict.WORSE not in verdicts:
        row.verdict = Verdict.OK
        row.notes.insert(0, f"outside {window.describe()}: correctness only")
    else:
        row.verdict = next((v for v in _SEVERITY if v in verdicts), Verdict.SAME)
    for r in results:
        if r.detail:
            row.notes.insert(0, r.detail)
    return row


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], columns: Iterable[str]) -> str:
    return "; ".join(f"{c} {a[c]} vs {b[c]}" for c in columns if a.get(c) != b.get(c))


def compare(
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
    key_columns = _key_columns(baseline_frame, current_frame)
    base_groups = _groups(baseline_frame, key_columns)
    cur_groups = _groups(current_frame, key_columns)
    result = GateResult(baseline, current, list(checks), window, alpha, max_cv, rows=[])

    unmatched_current = [k for k in cur_groups if k not in base_groups]
    for key, base in base_groups.items():
        cur = cur_groups.get(key)
        if cur is not None:
            differing = _differences(base[0], cur[0], COMPARABLE_COLUMNS)
            if differing:
                row = RowResult(
                    key={c: cur[0][c] for c in (*KEY_COLUMNS, "requested_bytes")},
                    verdict=Verdict.NOT_COMPARABLE,
                    notes=[differing],
                    n_baseline=len(base),
                    n_current=len(cur),
                )
            else:
                row = _judge_row(base, cur, checks, window, alpha, max_cv)
            result.rows.append(row)
            continue
        loose = tuple(base[0][c] for c in LOOSE_KEY_COLUMNS)
        partner = next(
            (
                k
                for k in unmatched_current
                if tuple(cur_groups[k][0][c] for c in LOOSE_KEY_COLUMNS) == loose
            ),
            None,
        )
        base_key = {c: base[0][c] for c in (*KEY_COLUMNS, "requested_bytes")}
        if partner is None:
            result.rows.append(
                RowResult(
                    key=base_key,
                    verdict=Verdict.MISSING,
                    notes=["in the baseline, not in the current run"],
                    n_baseline=len(base),
                )
            )
            continue
        unmatched_current.remove(partner)
        other = cur_groups[partner][0]
        result.rows.append(
            RowResult(
                key=base_key,
                verdict=Verdict.NOT_COMPARABLE,
                notes=[_differences(base[0], other, (*key_columns, *COMPARABLE_COLUMNS))],
                n_baseline=len(base),
                n_current=len(cur_groups[partner]),
            )
        )
    for key in unmatched_current:
        cur = cur_groups[key]
        row = RowResult(
            key={c: cur[0][c] for c in (*KEY_COLUMNS, "requested_bytes")},
            verdict=Verdict.NEW,
            notes=["not in the baseline"],
            n_current=len(cur),
        )
        worst, _ = _wrong_counts(cur)
        if worst:
            # A wrong result fails the gate whether or not the baseline knew the row.
            row.verdict = Verdict.WORSE
            row.notes.insert(0, f"{worst} wrong element(s)")
        result.rows.append(row)
    result.rows.sort(key=_sort_key)
    _warn_about_samples(result, base_groups, cur_groups)
    return result


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


def _warn_about_samples(
    result: GateResult,
    base_groups: Mapping[Any, Sequence[Any]],
    cur_groups: Mapping[Any, Sequence[Any]],
) -> None:
    def fewest(groups: Mapping[Any, Sequence[Any]]) -> int:
        return min((len(v) for v in groups.values()), default=0)

    n_base, n_cur = fewest(base_groups), fewest(cur_groups)
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
    base_wrong = sum(_wrong_counts(v)[0] > 0 for v in base_groups.values())
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
    key_columns = _key_columns(frame)
    groups = _groups(frame, key_columns)
    per_op: dict[tuple[str, str], list[float]] = {}
    for samples in groups.values():
        values = _ok_values(samples, "busbw_gbps")
        if values and samples[0]["op"] != "barrier":
            per_op.setdefault((samples[0]["op"], samples[0]["variant"]), []).append(
                stats.median(values)
            )
    for (op, variant), medians in sorted(per_op.items()):
        out.append(FloorResult(op, variant, sum(medians) / len(medians), floor_gbps))
    return out


def parse_floor(text: str | None, source: str) -> float | None:
    """A GB/s floor from ``--min-avg-busbw`` or ``NCCL_TESTS_MIN_BW``; empty means none."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{source}={text!r} is not a bandwidth in GB/s") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{source}={text!r} must be a bandwidth >= 0 GB/s")
    return value


def _read_meta(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    return RunDir.of(path).meta_or_none()


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


def load_runs(paths: Sequence[str | os.PathLike[str]]) -> Any:
    """One or more runs' rows as one frame: their samples pool per row key.

    Pooling runs made at different times puts the machine's run-to-run variation into
    the samples, which one run's repeats alone cannot show.
    """
    import pandas as pd

    if not paths:
        raise UsageError("no run to read")
    frames = [load(p) for p in paths]
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


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
    cur_frame = load_runs(currents)
    result = compare(
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
    base_meta = _read_meta(baseline)
    for path in reversed(currents):
        cur_meta = _read_meta(path)
        if cur_meta is not None and cur_meta.get("status") not in (None, "complete"):
            result.warnings.insert(
                0, f"run {path} has status {cur_meta.get('status')!r}, not complete"
            )
    first_meta = _read_meta(currents[0])
    if base_meta is not None and first_meta is not None:
        result.changes = _what_changed(base_meta, first_meta)
        cpus = [(m.get("cpu") or {}).get("model") for m in (base_meta, first_meta)]
        if None not in cpus and cpus[0] != cpus[1]:
            result.warnings.append(
                f"the runs were measured on different CPUs ({cpus[0]} vs {cpus[1]}): "
                "performance verdicts compare machines as much as software"
            )
    return result


def update_baseline(
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    baseline: str | os.PathLike[str],
) -> Path:
    """Make the current run(s) the baseline: their results.csv (rows of several runs
    concatenated) and the first run's meta.json.

    A run with wrong elements, rows without a measurement, or a status other than
    complete is refused: a broken baseline would let the next broken run pass.
    """
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    metas = []
    for path in currents:
        _refuse_as_baseline(path)
        metas.append(_read_meta(path))
    target = Path(baseline)
    if target.suffix == ".csv":
        raise UsageError(f"--update-baseline needs a baseline directory, not the file {target}")
    texts = [csv_path(p).read_text(encoding="utf-8").splitlines(keepends=True) for p in currents]
    if len({t[0] if t else "" for t in texts}) == 1:
        # One layout: the rows as measured, byte for byte.
        lines = texts[0][:1] + [line for t in texts for line in t[1:]]
    else:
        # Runs of different schema versions: one file in this version's layout.
        lines = [frame_text(load_runs(currents))]
    meta = metas[0]
    if meta is not None and len(currents) > 1:
        meta = {**meta, "pooled_runs": [m.get("run_id") if m else None for m in metas]}
    try:
        target.mkdir(parents=True, exist_ok=True)
        _replace(RunDir(target).table_path(), "".join(lines))
        if meta is not None:
            RunDir(target).write_meta(meta)
        else:
            RunDir(target).meta_path.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {target}: {exc.strerror}") from None
    return target


def _replace(path: Path, text: str) -> None:
    # Write next to the target, then rename: a reader never sees half a baseline file.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _refuse_as_baseline(path: str | os.PathLike[str]) -> None:
    frame = load(path)
    where = csv_path(path).parent
    bad_wrong = int((frame["wrong"].fillna(0) > 0).sum())
    if bad_wrong:
        raise UsageError(
            f"refusing to accept {where} as the baseline: {bad_wrong} row(s) have wrong elements"
        )
    # An unsupported row is a fact of the variant (NCCL has no tree all_gather), the
    # same in every run; an oom row is an accident of that run.
    not_ok = int((~frame["status"].isin([STATUS_OK, STATUS_UNSUPPORTED])).sum())
    if not_ok:
        raise UsageError(
            f"refusing to accept {where} as the baseline: {not_ok} row(s) have no "
            "measurement (status other than ok or unsupported)"
        )
    meta = _read_meta(path)
    if meta is not None and meta.get("status") != "complete":
        raise UsageError(
            f"refusing to accept {where} as the baseline: its status is "
            f"{meta.get('status')!r}, not complete"
        )
