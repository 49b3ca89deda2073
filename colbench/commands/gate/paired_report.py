"""The paired gate's readers of one PairedResult: the console table and Markdown.

One wording for both (the verdict line, what the gate could see), so that a terminal
and a job summary never disagree; every verdict comes from colbench.commands.gate.paired.
"""

from __future__ import annotations

from colbench import text
from colbench.commands.gate.paired import PairedResult, PairedRow
from colbench.output import plural
from colbench.text import Column

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
    return ", ".join(parts) + f" ({result.power:.0%} power)"


def verdict_line(result: PairedResult) -> str:
    if result.failures:
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
    ]
    return "\n".join(lines).rstrip() + "\n"
