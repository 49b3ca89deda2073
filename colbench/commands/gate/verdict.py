"""The one verdict: what a set of checks says about one pair of pooled rows (:func:`verdict`:
missing, new, not comparable, unmeasured, then each check; the row takes the gravest).

A relative check asks an exact rank test whether the R samples a side (``sweep --repeat
R``) show the change is real (:func:`judge`), the way asv marks big-but-insignificant
changes instead of failing on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from colbench.commands.gate.checks import DEFAULT_ALPHA, DEFAULT_MAX_CV, Check, SizeWindow
from colbench.results.join import (
    Pair,
    Sample,
    differences,
    is_ok,
    ok_values,
    side_status,
    wrong_counts,
)
from colbench.results.rows import KEY_COLUMNS, STATUS_OK, STATUS_UNSUPPORTED
from colbench.stats import power, rank_tests

#: Columns outside the key that still make numbers incomparable when they differ.
COMPARABLE_COLUMNS = ("device", "average")
#: Without enough samples for the rank test, a change must exceed the threshold this
#: many times over (and the sample ranges must not overlap) to count.
SMALL_SAMPLE_MARGIN = 2.0


class Verdict(str, Enum):
    """A row's verdict; the reports' legend (colbench.commands.gate.report.LEGEND) says
    what each means."""

    WORSE = "worse"
    BETTER = "better"
    SAME = "same"
    NOISY = "noisy"
    NOT_COMPARABLE = "not comparable"
    MISSING = "missing"
    NEW = "new"
    OK = "ok"
    SKIPPED = "skipped"
    INSENSITIVE = "insensitive"


#: Verdicts that fail the gate.
FAILING = frozenset({Verdict.WORSE, Verdict.MISSING, Verdict.NOT_COMPARABLE})
#: When several checks judge one row, the row takes the first of these that any gave.
_SEVERITY = (Verdict.WORSE, Verdict.NOISY, Verdict.BETTER, Verdict.SAME, Verdict.OK)


def gravest(verdicts: set[Verdict]) -> Verdict:
    """The verdict a row takes from its checks' verdicts."""
    return next((v for v in _SEVERITY if v in verdicts), Verdict.SAME)


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

    The medians give the change; within ``threshold`` it is ``same``. Beyond it, an exact
    one-sided Mann-Whitney U test must find the current samples beyond the baseline's
    moved by the threshold (``worse``, or ``better`` the other way), else ``noisy``:
    asking "did it change?" instead would flag every run-to-run wobble of a noisy machine
    that happens to cross the threshold. With too few samples for the test ever to reach
    alpha, :data:`SMALL_SAMPLE_MARGIN` and the samples' ranges decide (see the constant).
    """
    base_med, cur_med = rank_tests.median(baseline), rank_tests.median(current)
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
    alternative: rank_tests.Alternative = "greater" if change > 0 else "less"
    if rank_tests.smallest_one_sided_p(len(baseline), len(current)) <= alpha:
        p: float | None = rank_tests.mann_whitney_u(current, moved, alternative).p_value
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
    #: The samples' pooled log SD and counts, which the detectable change comes from.
    log_sd: float | None = None
    n_baseline: int = 0
    n_current: int = 0
    #: The smallest slowdown it would have caught at the gate's power (None: none stated).
    detectable: float | None = None
    insensitive: bool = False


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
    #: The smallest slowdown any of the row's relative checks would have caught at the
    #: gate's power; None when none could (or none judged the row).
    detectable: float | None = None

    @property
    def relative(self) -> list[CheckResult]:
        """The relative checks that compared the row's samples (performance judged)."""
        return [c for c in self.checks if c.change is not None]

    @property
    def judged(self) -> bool:
        return bool(self.relative)

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


def row_key(sample: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of a row as reports name it: the key columns and the requested size."""
    return {c: sample[c] for c in (*KEY_COLUMNS, "requested_bytes")}


def verdict(
    pair: Pair,
    checks: Sequence[Check],
    window: SizeWindow = SizeWindow(),
    alpha: float = DEFAULT_ALPHA,
    max_cv: float = DEFAULT_MAX_CV,
) -> RowResult:
    """Everything the checks say about one pair (A the baseline, B the current run); one
    whose sides differ in a key column (matched loosely) or in :data:`COMPARABLE_COLUMNS`
    is not comparable, and a wrong element fails wherever it is."""
    base, cur = pair.a, pair.b
    if not cur:
        missing = ["in the baseline, not in the current run"]
        return RowResult(row_key(base[0]), Verdict.MISSING, notes=missing, n_baseline=len(base))
    if not base:
        new = RowResult(
            row_key(cur[0]), Verdict.NEW, notes=["not in the baseline"], n_current=len(cur)
        )
        return _fail_on_wrong(new, cur)
    # A loosely matched pair (another world size, say) goes by the baseline's key.
    exact = all(base[0][c] == cur[0][c] for c in KEY_COLUMNS)
    key = row_key(cur[0] if exact else base[0])
    row = RowResult(key, Verdict.SAME, n_baseline=len(base), n_current=len(cur))
    differing = differences(base[0], cur[0], (*KEY_COLUMNS, *COMPARABLE_COLUMNS))
    if differing:
        row.verdict, row.notes = Verdict.NOT_COMPARABLE, [differing]
        return row
    unmeasured = _unmeasured(base, cur)
    if unmeasured is not None:
        row.verdict, note = unmeasured
        row.notes.append(note)
        return _fail_on_wrong(row, cur)
    _apply_checks(row, base, cur, checks, window, alpha, max_cv)
    return row


def _fail_on_wrong(row: RowResult, cur: Sequence[Sample]) -> RowResult:
    """A wrong result fails the gate whether or not the row could be judged otherwise."""
    worst, _ = wrong_counts(cur)
    if worst:
        row.verdict = Verdict.WORSE
        row.notes.insert(0, f"{worst} wrong element(s)")
    return row


def _unmeasured(base: Sequence[Sample], cur: Sequence[Sample]) -> tuple[Verdict, str] | None:
    """The verdict of a row that a side could not measure, when it is not judged at all.

    ``unsupported`` is a fact of the variant (NCCL has no tree all_gather): unsupported
    on both sides has nothing to judge, unsupported now but measured before means the
    current run no longer measures what the baseline did, and measured now but
    unsupported before has no baseline to compare with. An oom in the current run
    alone stays a failed check (see _check_one): the run could measure it before.
    """
    base_status, cur_status = side_status(base), side_status(cur)
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


def _apply_checks(
    row: RowResult,
    base: Sequence[Sample],
    cur: Sequence[Sample],
    checks: Sequence[Check],
    window: SizeWindow,
    alpha: float,
    max_cv: float,
) -> None:
    """Each check's result on the row, its notes, and the row's gravest verdict."""
    in_window = row.key["size_bytes"] in window
    spreads: list[str] = []
    for check in checks:
        if check.metric == "wrong":
            row.checks += _check_wrong(row, base, cur, check)
        elif in_window:
            row.checks += _check_one(row, base, cur, check, alpha, max_cv, spreads)
    if spreads:
        row.wide = True
        row.notes.append(
            f"wide spread, CV baseline/current above {max_cv:.0%}: " + ", ".join(spreads)
        )
    verdicts = {r.verdict for r in row.checks}
    if not in_window and Verdict.WORSE not in verdicts:
        row.verdict = Verdict.OK
        where = window.closed or f"outside {window.describe()}"
        row.notes.insert(0, f"{where}: correctness only")
    else:
        row.verdict = gravest(verdicts)
    for r in row.checks:
        if r.detail:
            row.notes.insert(0, r.detail)


def _check_wrong(
    row: RowResult, base: Sequence[Sample], cur: Sequence[Sample], check: Check
) -> list[CheckResult]:
    worst, unverified = wrong_counts(cur)
    if worst:
        return [CheckResult(check, Verdict.WORSE, detail=f"{worst} wrong element(s)")]
    if unverified and wrong_counts(base)[1] < sum(map(is_ok, base)):
        row.notes.append(f"{unverified} sample(s) not verified (--check 0)")
    return []


def _check_one(
    row: RowResult,
    base: Sequence[Sample],
    cur: Sequence[Sample],
    check: Check,
    alpha: float,
    max_cv: float,
    spreads: list[str],
) -> list[CheckResult]:
    """One performance check on the row: no result, or one; notes and spreads on the side."""
    if not any(map(is_ok, cur)):
        status = sorted({str(s.get("status")) for s in cur})[0]
        return [CheckResult(check, Verdict.WORSE, detail=f"no measurement (status {status})")]
    cur_values = ok_values(cur, check.metric)
    if not cur_values:
        row.notes.append(f"{check.metric}: no value in the current run")
        return []
    if not check.relative:
        med = rank_tests.median(cur_values)
        bad = (med - check.limit) * check.worse_when > 0
        detail = f"median {med:.4g} beyond {check.limit:g}" if bad else ""
        verdict = Verdict.WORSE if bad else Verdict.SAME
        return [CheckResult(check, verdict, current_median=med, rule="absolute", detail=detail)]
    base_values = ok_values(base, check.metric)
    if not base_values:
        row.notes.append(f"{check.metric}: no baseline measurement to compare with")
        return []
    if rank_tests.median(base_values) == 0:
        # Barrier rows have no bandwidth: a relative change of 0 says nothing.
        return []
    j = judge(base_values, cur_values, check.worse_when, check.limit, alpha)
    cvs = [rank_tests.coefficient_of_variation(v) for v in (base_values, cur_values)]
    if any(cv is not None and cv > max_cv for cv in cvs):
        shown = "/".join("-" if cv is None else f"{cv:.0%}" for cv in cvs)
        spreads.append(f"{check.metric} {shown}")
    # Every field of a Judgement is a field of CheckResult: the check's result is the
    # judgement, with the spread and counts its figure comes from.
    log_sd = power.log_spread(base_values, cur_values)
    n_baseline, n_current = len(base_values), len(cur_values)
    return [
        CheckResult(check, **asdict(j), log_sd=log_sd, n_baseline=n_baseline, n_current=n_current)
    ]
