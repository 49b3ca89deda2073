"""The paired gate: variant B against variant A of one interleaved run.

An interleaved run (``sweep --env K=A,B --repeat R``) measures A and B of the same size
and repeat within a turn of each other, so the pair shares the machine's state; their
log-ratio cancels the drift that makes two separate runs incomparable. For each row
(op, dtype, size, placement...) the gate takes the R pairs' log-ratios, oriented so that
positive means B is worse, and asks with a one-sided Wilcoxon signed-rank test whether B
is worse *by more than the check's limit* (the test runs on log-ratio minus the limit's
log), so A against an identical A fails far less often than alpha. Holm's step-down
method over the rows keeps the chance that any row of an A-vs-A run fails at most alpha.

**What it could see.** Each row states the smallest slowdown of B its test would have
caught with the gate's power at Holm's strictest level (alpha / rows), from the SD of its
pairs' log-ratios (:func:`detectable_margin`). A gate none of whose rows could see a
slowdown of about twice its limit (R pairs cannot go below p = 2^-R) is *inconclusive*:
it passes, says so, and exits 5 under ``--fail-inconclusive``. Its console table and
Markdown share one wording, so that a terminal and a job summary never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench import text
from colbench.commands.gate.checks import DEFAULT_POWER, Check, SizeWindow
from colbench.errors import UsageError
from colbench.output import plural
from colbench.results.rows import KEY_COLUMNS, STATUS_OK
from colbench.stats import power, rank_tests
from colbench.stats.holm import holm
from colbench.stats.rank_tests import median
from colbench.text import Column

#: Columns that name a row of the paired table: every key but the variant, and but the
#: engine, which an ``--engine torch,nccl`` run's variants differ by (engine=torch vs
#: engine=nccl: the torch tax, colbench.results.join).
ROW_KEYS = tuple(c for c in KEY_COLUMNS if c not in ("variant", "engine"))


@dataclass
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
    #: The smallest slowdown of B its test would have caught at the gate's power (None:
    #: its pairs cannot reach Holm's strictest level), and whether that is insensitive.
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
    #: Why the run is not whole ("" when it is): a failure whatever its pairs say.
    incomplete: str = ""

    @property
    def failures(self) -> int:
        judged = sum(r.verdict == "fail" for r in self.rows) + len(self.missing) + len(self.wrong)
        return judged + bool(self.incomplete)

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
        first = self.rows[0] if self.rows else None
        pooled = next((r for r in self.rows if r.key["op"] == "all"), first)
        return pooled.change if pooled else None


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
    ratios = {k: [math.log(vb / va) for va, vb in pairs] for k, pairs in groups.items()}
    judged = [
        _row(dict(zip(ROW_KEYS, k, strict=True)), logs, check, [logs]) for k, logs in ratios.items()
    ]
    if len(judged) > 1:
        # Every pair of every row in one more test of the family: a slowdown spread over
        # all sizes shows there with many more pairs than any one row has.
        every = [x for logs in ratios.values() for x in logs]
        all_rows = dict.fromkeys(ROW_KEYS, "all")
        judged.append(_row(all_rows, every, check, list(ratios.values())))
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
    for r, q, rejected in zip(judged, family.adjusted, family.rejected, strict=True):
        r.p_holm, r.verdict = q, "fail" if rejected else "pass"
        margin = detectable_margin(r.log_sd, r.pairs, level, target_power)
        r.insensitive = power.insensitive(check.limit, check.worse_when, margin)
        if margin is not None:
            r.detectable = power.detectable_slowdown(check.limit, check.worse_when, margin)
    return judged


def _row(
    key: dict[str, Any], logs: Sequence[float], check: Check, groups: Sequence[Sequence[float]]
) -> PairedRow:
    """One row's test (of ``logs``, the pairs' log(B/A)); its spread from ``groups``."""
    w = check.worse_when
    limit = math.log(1 + check.limit) if w > 0 else -math.log(1 - check.limit)
    p = rank_tests.signed_rank_p_greater([w * x - limit for x in logs])
    sd = rank_tests.pooled_sd(groups)
    return PairedRow(key, len(logs), math.expm1(median(logs)), p, log_sd=sd)


def detectable_margin(
    sigma: float | None, pairs: int, level: float, target_power: float = DEFAULT_POWER
) -> float | None:
    """The log shift of B beyond the limit that the one-sided signed-rank test of
    ``pairs`` log-ratios of SD ``sigma`` finds at ``level`` with ``target_power``; None
    without an SD, or when ``pairs`` can never reach ``level`` (the smallest p is 2^-pairs)."""
    if sigma is None or pairs < 1 or not 0 < level < 1 or 2.0**-pairs > level:
        return None
    return sigma * power.signed_rank_margin(pairs, round(level, 12), round(target_power, 12))


def _label(row: Any) -> str:
    place = "in" if int(row["in_place"]) else "out"
    return f"{row['op']} {row['dtype']} {int(row['size_bytes'])} B {place}-of-place"


_COLUMNS = (
    Column("op", 16), Column("dtype", 9), Column("size_bytes", 12), Column("place", 5),
    Column("pairs", 5), Column("B vs A", 8), Column("p_holm", 8), Column("detect", 7),
    Column("verdict", gap="  "),
)  # fmt: skip


def _is_all(row: PairedRow) -> bool:
    return row.key["op"] == "all"


def sensitivity_text(result: PairedResult) -> str:
    """What the gate could see: the pooled row's figure and the rows' alone; or why not."""
    if result.inconclusive:
        smallest = min(r.pairs for r in result.rows)
        reach = 2.0 ** -max(r.pairs for r in result.rows) * len(result.rows)
        why = (
            f"{smallest} pairs per row cannot reach alpha {result.alpha:g} over "
            f"{plural(len(result.rows), 'row')} (more --repeat, or fewer rows)"
            if reach >= result.alpha
            else f"too noisy to see a slowdown of twice the limit at {result.power:.0%} power"
        )
        return f"performance inconclusive: {why}"
    parts = []
    pooled = next((r for r in result.sensitive if _is_all(r) or len(result.rows) == 1), None)
    if pooled is not None and pooled.detectable is not None:
        parts.append(
            f"sensitive to slowdowns >= {pooled.detectable:.0%} over all {pooled.pairs} pairs"
        )
    alone = [r.detectable for r in result.sensitive if r is not pooled and r.detectable]
    if alone:
        parts.append(f">= {max(alone):.0%} on {plural(len(alone), 'row')} alone")
    if not parts:
        # A failing gate whose rows were too noisy to promise a figure.
        parts.append("sensitive on no row to twice the limit")
    return ", ".join(parts) + f" ({result.power:.0%} power)"


def verdict_line(result: PairedResult) -> str:
    if result.incomplete:
        verdict = "FAILED (incomplete run)"
    elif result.failures:
        verdict = "FAILED"
    elif result.inconclusive:
        verdict = "passed on correctness and presence only"
    else:
        verdict = "passed"
    pooled = result.pooled_change
    pooled_text = f"; B's median change {pooled:+.1%}" if pooled is not None else ""
    return (
        f"paired gate {verdict}: {result.failures} failure(s) of {plural(len(result.rows), 'row')}"
        f"{pooled_text}; {sensitivity_text(result)}"
    )


def _rule(result: PairedResult) -> str:
    return (
        f"{result.check.describe()}: a row fails when B is worse than that (one-sided "
        "Wilcoxon signed-rank on log(B/A) of same-size same-repeat pairs; row 'all' pools "
        f"every pair; Holm over {plural(len(result.rows), 'row')}, alpha {result.alpha:g}); "
        "detect: "
        f"the smallest slowdown of B a row would have shown at {result.power:.0%} power "
        f"(at alpha/{len(result.rows)}, from its pairs' spread)"
    )


def _cells(row: PairedRow) -> tuple[str, ...]:
    k = row.key
    place = k["in_place"] if _is_all(row) else ("in" if int(k["in_place"]) else "out")
    detect = "none" if row.detectable is None else f"{row.detectable:.0%}"
    return (
        str(k["op"]), str(k["dtype"]), str(k["size_bytes"]), str(place), str(row.pairs),
        f"{row.change:+.1%}", f"{row.p_holm:.3g}", detect, row.verdict,
    )  # fmt: skip


def console_lines(result: PairedResult) -> list[str]:
    """The paired table and its verdict line."""
    lines = [
        f"# paired gate: {result.variant_b} (B) against {result.variant_a} (A) in {result.run}",
        f"# {_rule(result)}",
        text.header(_COLUMNS, lead=""),
    ]
    lines += [text.line(_cells(row), _COLUMNS, lead="") for row in result.rows]
    lines += [f"missing: {m}" for m in result.missing]
    lines += [f"wrong elements: {w}" for w in result.wrong]
    lines += [f"incomplete run {result.run}: {result.incomplete}"] if result.incomplete else []
    lines.append(verdict_line(result))
    return lines


def markdown(result: PairedResult) -> str:
    """A report for a job summary: the verdict, the rule, the table."""
    icon = "❌" if result.failures else "✅"
    head = ("op", "dtype", "size (B)", "place", "pairs", "B vs A", "p (Holm)", "detect", "verdict")
    lines = [
        f"## {icon} {verdict_line(result)}",
        "",
        f"Interleaved run `{result.run}`: `{result.variant_b}` (B) against "
        f"`{result.variant_a}` (A).",
        "",
        f"Rule: {_rule(result)}.",
        "",
        *text.markdown(head, [_cells(r) for r in result.rows]),
        "",
        *(f"- missing: {m}" for m in result.missing),
        *(f"- wrong elements: {w}" for w in result.wrong),
        *([f"- incomplete run: {result.incomplete}"] if result.incomplete else []),
    ]
    return "\n".join(lines).rstrip() + "\n"


def junit_xml(result: PairedResult) -> str:
    """--junit: one test case per row, and one each for the pairs missing, the wrong
    elements and an incomplete run."""
    import xml.etree.ElementTree as ET

    from colbench.commands.gate.report import junit_document, junit_suite, test_case

    suite = junit_suite(
        "colbench paired gate",
        [("run", result.run), ("a", result.variant_a), ("b", result.variant_b),
         ("check", result.check.describe()), ("alpha", f"{result.alpha:g}"),
         ("sensitivity", sensitivity_text(result))],
    )  # fmt: skip
    cases = [(" ".join(_cells(r)[:4]), r.verdict == "fail", f"B vs A {r.change:+.1%}")
             for r in result.rows]  # fmt: skip
    cases += [(f"missing: {m}", True, m) for m in result.missing]
    cases += [(f"wrong elements: {w}", True, w) for w in result.wrong]
    cases += [("the run is complete", True, result.incomplete)] if result.incomplete else []
    for name, failed, why in cases:
        case = test_case(suite, "colbench.gate.paired", name)
        if failed:
            ET.SubElement(case, "failure", message=why)
    return junit_document(suite)
