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
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colbench.analysis.checks import Check, SizeWindow, parse_checks
from colbench.analysis.stats import median, midranks
from colbench.errors import ExitCode, UsageError
from colbench.results import KEY_COLUMNS, STATUS_OK

#: Above this many pairs the signed-rank distribution is approximated by a normal one.
EXACT_MAX_PAIRS = 60
#: Columns that name a row of the paired table (every key but the variant).
ROW_KEYS = tuple(c for c in KEY_COLUMNS if c != "variant")


def signed_rank_p_greater(diffs: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value that ``diffs`` are centred above 0.

    Zeros are dropped (Wilcoxon's convention); ties share mid-ranks. Exact (all 2^n sign
    patterns counted by dynamic programming on doubled ranks) up to
    :data:`EXACT_MAX_PAIRS`, normal with tie and continuity corrections beyond.
    """
    values = [float(d) for d in diffs if d != 0]
    n = len(values)
    if n == 0:
        return 1.0
    ranks = midranks([abs(v) for v in values])
    w_plus = sum(r for r, v in zip(ranks, values, strict=True) if v > 0)
    if n <= EXACT_MAX_PAIRS:
        doubled = [round(2 * r) for r in ranks]
        total = sum(doubled)
        ways = np.zeros(total + 1, dtype=np.float64)
        ways[0] = 1.0
        for r in doubled:
            ways[r:] = ways[r:] + ways[: total + 1 - r].copy()
        observed = round(2 * w_plus)
        return float(ways[observed:].sum() / ways.sum())
    mean = n * (n + 1) / 4
    ties = sum(t**3 - t for t in (ranks.count(r) for r in set(ranks)))
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties / 48)
    z = (w_plus - mean - 0.5) / sd
    return 0.5 * math.erfc(z / math.sqrt(2))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (reject where adjusted < alpha)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


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

    @property
    def failures(self) -> int:
        return sum(r.verdict == "fail" for r in self.rows) + len(self.missing) + len(self.wrong)

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
) -> PairedResult:
    """Judge variant B against variant A of one run's rows (a results DataFrame)."""
    result = PairedResult(run, variant_a, variant_b, check, alpha)
    sides = {}
    for name in (variant_a, variant_b):
        rows = frame[frame["variant"] == name]
        if rows.empty:
            known = ", ".join(repr(v) for v in sorted(set(frame["variant"])))
            raise UsageError(f"no rows of variant {name!r} in {run or 'the run'}; it has {known}")
        bad = rows[rows["wrong"].fillna(0) > 0]
        result.wrong += [f"{name}: {_label(r)}" for _, r in bad.iterrows()]
        sides[name] = {
            (*(r[c] for c in ROW_KEYS), r["repeat"]): r
            for _, r in rows.iterrows()
            if r["status"] == STATUS_OK and r["size_bytes"] in window
        }
    a, b = sides[variant_a], sides[variant_b]
    result.missing = [f"{variant_b} lacks {_label(a[k])}" for k in sorted(set(a) - set(b))]
    result.missing += [f"{variant_a} lacks {_label(b[k])}" for k in sorted(set(b) - set(a))]
    groups: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for k in sorted(set(a) & set(b)):
        va, vb = a[k][check.metric], b[k][check.metric]
        if va and vb and va > 0 and vb > 0:
            groups.setdefault(k[:-1], []).append((float(va), float(vb)))
    limit = math.log(1 + check.limit) if check.worse_when > 0 else -math.log(1 - check.limit)
    judged = []
    for k, pairs in groups.items():
        worse = [check.worse_when * math.log(vb / va) for va, vb in pairs]
        change = math.exp(median([math.log(vb / va) for va, vb in pairs])) - 1
        p = signed_rank_p_greater([d - limit for d in worse])
        judged.append(PairedRow(dict(zip(ROW_KEYS, k, strict=True)), len(pairs), change, p))
    if len(judged) > 1:
        # Every pair of every row in one more test of the family: a slowdown spread over
        # all sizes shows there with many more pairs than any one row has.
        every = [
            check.worse_when * math.log(vb / va) - limit for ps in groups.values() for va, vb in ps
        ]
        pooled = [math.log(vb / va) for ps in groups.values() for va, vb in ps]
        p = signed_rank_p_greater(every)
        all_rows = dict.fromkeys(ROW_KEYS, "all")
        judged.append(PairedRow(all_rows, len(every), math.exp(median(pooled)) - 1, p))
    adjusted = holm([r.p_value for r in judged])
    result.rows = [
        PairedRow(r.key, r.pairs, r.change, r.p_value, q, "fail" if q < alpha else "pass")
        for r, q in zip(judged, adjusted, strict=True)
    ]
    return result


def _label(row: Any) -> str:
    place = "in" if int(row["in_place"]) else "out"
    return f"{row['op']} {row['dtype']} {int(row['size_bytes'])} B {place}-of-place"


def console_lines(result: PairedResult) -> list[str]:
    """The paired table and its verdict line."""
    check = result.check
    smallest = min((r.pairs for r in result.rows), default=0)
    lines = [
        f"# paired gate: {result.variant_b} (B) against {result.variant_a} (A) in {result.run}",
        f"# {check.describe()}: a row fails when B is worse than that (one-sided Wilcoxon "
        f"signed-rank on log(B/A) of same-size same-repeat pairs; row 'all' pools every "
        f"pair; Holm over {len(result.rows)} rows, alpha {result.alpha:g})",
        f"#{'op':>15} {'dtype':>9} {'size_bytes':>12} {'place':>5} {'pairs':>5} "
        f"{'B vs A':>8} {'p_holm':>8}  verdict",
    ]
    for r in result.rows:
        k = r.key
        place = k["in_place"] if k["op"] == "all" else ("in" if int(k["in_place"]) else "out")
        lines.append(
            f"{k['op']:>16} {k['dtype']:>9} {k['size_bytes']!s:>12} {place:>5} {r.pairs:>5} "
            f"{r.change:>+8.1%} {r.p_holm:>8.3g}  {r.verdict}"
        )
    lines += [f"missing: {m}" for m in result.missing]
    lines += [f"wrong elements: {w}" for w in result.wrong]
    if result.rows and 2.0**-smallest * len(result.rows) >= result.alpha:
        lines.append(
            f"# note: {smallest} pairs per row cannot reach alpha {result.alpha:g} over "
            f"{len(result.rows)} rows: more --repeat, or fewer rows (--min-size/--max-size)"
        )
    pooled = result.pooled_change
    pooled_text = f"; B's median change {pooled:+.1%}" if pooled is not None else ""
    verdict = "FAILED" if result.failures else "passed"
    lines.append(
        f"paired gate {verdict}: {result.failures} failure(s) of {len(result.rows)} rows"
        f"{pooled_text}"
    )
    return lines


def paired_command(
    run: str,
    variant_a: str | None,
    variant_b: str | None,
    check_texts: Sequence[str],
    *,
    min_size: str | None = None,
    max_size: str | None = None,
    alpha: float = 0.05,
) -> int:
    """``colbench gate RUN --variant-a A --variant-b B --check METRIC:X%``; the exit code."""
    from colbench.rundir import RunDir

    if not variant_a or not variant_b:
        raise UsageError("the paired gate needs both --variant-a and --variant-b")
    relative = [c for c in parse_checks(check_texts) if c.relative]
    if len(relative) != 1 or len(relative) != len(check_texts):
        raise UsageError(
            "the paired gate takes one relative check, e.g. --check busbw_gbps:-10% "
            "(B may be at most 10% worse than A)"
        )
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {alpha:g}")
    frame = RunDir.of(run).results()
    result = paired_gate(
        frame, variant_a, variant_b, relative[0], SizeWindow.parse(min_size, max_size), alpha, run
    )
    if not result.rows:
        raise UsageError(
            f"no pairs of {variant_a} and {variant_b} rows to judge in {run} "
            "(an interleaved run, within --min-size/--max-size?)"
        )
    print("\n".join(console_lines(result)), flush=True)
    sys.stdout.flush()
    return int(ExitCode.DATA_ERROR) if result.failures else int(ExitCode.OK)
