"""The paired gate: variant B against variant A of one interleaved run.

An interleaved run (``sweep --env K=A,B --repeat R``) measures A and B of the same size
and repeat within a turn of each other, so the pair shares the machine's state; their
log-ratio cancels the drift that makes two separate runs incomparable. For each row
(op, dtype, size, placement...) the gate takes the R pairs' log-ratios, oriented so that
positive means B is worse, and asks with a one-sided Wilcoxon signed-rank test whether B
is worse *by more than the check's limit* (the test runs on log-ratio minus the limit's
log). A vs an identical A therefore fails far less often than alpha, and a B really worse
than the limit fails once the pairs show it. The rows' p-values are adjusted by Holm's
step-down method, so the chance that any row of an A-vs-A run fails stays at most alpha
(family-wise), however many rows are judged.

**What it could see.** Each row states the smallest slowdown of B its test would have
caught with the gate's power at Holm's strictest level (alpha / rows), from the SD of its
pairs' log-ratios (:func:`detectable_margin`, simulated like the stored-baseline gate's
figures in :mod:`colbench.stats.power`). A gate none of whose rows could see a
slowdown of about twice its limit (too few pairs: R pairs cannot go below p = 2^-R) is
*inconclusive*: it passes, says so, and exits 5 under ``--fail-inconclusive``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.commands.gate.checks import DEFAULT_POWER, Check, SizeWindow
from colbench.errors import UsageError
from colbench.results.rows import KEY_COLUMNS, STATUS_OK
from colbench.stats import power, rank_tests
from colbench.stats.holm import holm
from colbench.stats.rank_tests import median

#: Columns that name a row of the paired table: every key but the variant, and but the
#: engine, which an ``--engine torch,nccl`` run's variants differ by (engine=torch vs
#: engine=nccl: the torch tax, colbench.results.join).
ROW_KEYS = tuple(c for c in KEY_COLUMNS if c not in ("variant", "engine"))


@dataclass(frozen=True)
class PairedRow:
    """One row of the paired table: B's change against A and the verdict."""

    key: dict[str, Any]
    pairs: int
    #: Median over pairs of B/A - 1 in the metric (-0.25: B's busbw is 25% lower).
    change: float
    p_value: float
    p_holm: float = 1.0
    verdict: str = "pass"
    #: SD of the pairs' log-ratios (row 'all': each row's about its own mean, pooled).
    log_sd: float | None = None
    #: The smallest slowdown of B its test would have caught at the gate's power, at
    #: Holm's strictest level (None: its pairs cannot reach it); and whether that is
    #: more than twice the limit (insensitive, as in colbench.stats.power).
    detectable: float | None = None
    insensitive: bool = True


@dataclass
class PairedResult:
    run: str
    variant_a: str
    variant_b: str
    check: Check
    alpha: float
    rows: list[PairedRow] = field(default_factory=list)
    #: Rows of A without a B partner (or the reverse), and rows with wrong elements.
    missing: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    #: The power the rows' detectable slowdowns are stated at.
    power: float = DEFAULT_POWER

    @property
    def failures(self) -> int:
        return sum(r.verdict == "fail" for r in self.rows) + len(self.missing) + len(self.wrong)

    @property
    def sensitive(self) -> list[PairedRow]:
        """Rows whose figure is within twice the limit: they could have seen a slowdown."""
        return [r for r in self.rows if not r.insensitive and r.detectable is not None]

    @property
    def inconclusive(self) -> bool:
        """Passed, but no row could have seen a slowdown (too few pairs, or too noisy)."""
        return not self.failures and bool(self.rows) and not self.sensitive

    @property
    def pooled_change(self) -> float | None:
        """B's median change over every pair of every row."""
        pooled = [r for r in self.rows if r.key["op"] == "all"]
        if pooled:
            return pooled[0].change
        return self.rows[0].change if self.rows else None


def paired_gate(
    frame: Any,
    variant_a: str,
    variant_b: str,
    check: Check,
    window: SizeWindow,
    alpha: float,
    run: str = "",
    target_power: float = DEFAULT_POWER,
) -> PairedResult:
    """Judge variant B against variant A of one run's rows (a results DataFrame)."""
    result = PairedResult(run, variant_a, variant_b, check, alpha, power=target_power)
    a = _side(frame, variant_a, window, run, result.wrong)
    b = _side(frame, variant_b, window, run, result.wrong)
    result.missing = [f"{variant_b} lacks {_label(a[k])}" for k in sorted(set(a) - set(b))]
    result.missing += [f"{variant_a} lacks {_label(b[k])}" for k in sorted(set(b) - set(a))]
    groups: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for k in sorted(set(a) & set(b)):
        va, vb = a[k][check.metric], b[k][check.metric]
        if va and vb and va > 0 and vb > 0:
            groups.setdefault(k[:-1], []).append((float(va), float(vb)))
    limit = math.log(1 + check.limit) if check.worse_when > 0 else -math.log(1 - check.limit)
    ratios = {k: [math.log(vb / va) for va, vb in pairs] for k, pairs in groups.items()}
    judged = [
        _row(dict(zip(ROW_KEYS, k, strict=True)), logs, check.worse_when, limit, [logs])
        for k, logs in ratios.items()
    ]
    if len(judged) > 1:
        # Every pair of every row in one more test of the family: a slowdown spread over
        # all sizes shows there with many more pairs than any one row has.
        every = [x for logs in ratios.values() for x in logs]
        all_rows = dict.fromkeys(ROW_KEYS, "all")
        judged.append(_row(all_rows, every, check.worse_when, limit, list(ratios.values())))
    result.rows = _family(judged, check, alpha, target_power)
    return result


def _side(
    frame: Any, name: str, window: SizeWindow, run: str, wrong: list[str]
) -> dict[tuple[Any, ...], Any]:
    """One variant's OK rows in the window by key and repeat; its rows with wrong
    elements are added to ``wrong``."""
    rows = frame[frame["variant"] == name]
    if rows.empty:
        known = ", ".join(repr(v) for v in sorted(set(frame["variant"])))
        raise UsageError(f"no rows of variant {name!r} in {run or 'the run'}; it has {known}")
    bad = rows[rows["wrong"].fillna(0) > 0]
    wrong += [f"{name}: {_label(r)}" for _, r in bad.iterrows()]
    return {
        (*(r[c] for c in ROW_KEYS), r["repeat"]): r
        for _, r in rows.iterrows()
        if r["status"] == STATUS_OK and r["size_bytes"] in window
    }


def _family(
    judged: list[PairedRow], check: Check, alpha: float, target_power: float
) -> list[PairedRow]:
    """The rows' verdicts under Holm over all of them, each with what it could detect."""
    family = holm([r.p_value for r in judged], alpha)
    # Holm's strictest step: the level every row's figure holds at.
    level = alpha / max(len(judged), 1)
    rows = []
    for r, q, rejected in zip(judged, family.adjusted, family.rejected, strict=True):
        margin = None if r.log_sd is None else detectable_margin(r.log_sd, r.pairs, level,
                                                                 target_power)  # fmt: skip
        rows.append(
            dataclasses.replace(
                r,
                p_holm=q,
                verdict="fail" if rejected else "pass",
                detectable=None
                if margin is None
                else power.detectable_slowdown(check.limit, check.worse_when, margin),
                insensitive=power.insensitive(check.limit, check.worse_when, margin),
            )
        )
    return rows


def _row(
    key: dict[str, Any],
    logs: Sequence[float],
    worse_when: int,
    limit: float,
    groups: Sequence[Sequence[float]],
) -> PairedRow:
    """One row's test (of ``logs``, the pairs' log(B/A)); its spread from ``groups``."""
    p = rank_tests.signed_rank_p_greater([worse_when * x - limit for x in logs])
    sd = rank_tests.pooled_sd(groups)
    return PairedRow(key, len(logs), math.expm1(median(logs)), p, log_sd=sd)


def detectable_margin(
    sigma: float, pairs: int, level: float, target_power: float = DEFAULT_POWER
) -> float | None:
    """The log shift of B beyond the limit that the one-sided signed-rank test of
    ``pairs`` log-ratios of SD ``sigma`` finds at ``level`` with ``target_power``; None
    when ``pairs`` can never reach ``level`` (the smallest p is 2^-pairs)."""
    if pairs < 1 or not 0 < level < 1 or 2.0**-pairs > level:
        return None
    return sigma * power.signed_rank_margin(pairs, round(level, 12), round(target_power, 12))


def _label(row: Any) -> str:
    place = "in" if int(row["in_place"]) else "out"
    return f"{row['op']} {row['dtype']} {int(row['size_bytes'])} B {place}-of-place"
