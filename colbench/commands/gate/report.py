"""The gate's three readers of one GateResult: a console table for the terminal, Markdown
for a pull request or ``$GITHUB_STEP_SUMMARY``, JUnit XML for CI systems that list failed
tests. They never judge anything themselves."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from colbench import text
from colbench.commands.gate.result import (
    FloorResult,
    GateResult,
    overall_change,
    overall_lines,
    power_rule,
    power_text,
    rule_text,
)
from colbench.commands.gate.sensitivity import OverallResult
from colbench.commands.gate.verdict import CheckResult, RowResult, Verdict
from colbench.output import plural
from colbench.text import Column

#: The console table's key columns; a column per judged metric and the notes follow.
_KEYS = (
    Column("verdict", 15, "<", ""), Column("op", 16, "<", ""), Column("dtype", 10, "<", ""),
    Column("redop", 6, "<", ""), Column("place", 6, "<", ""), Column("size(B)", 11, gap=""),
    Column("n(b/c)", 8, gap=""), Column("detect", 8, gap=""),
)  # fmt: skip

#: Rows with these verdicts are listed first in the Markdown report.
_NEEDS_A_LOOK = tuple(
    map(Verdict, ("worse", "missing", "not comparable", "noisy", "insensitive", "better", "new"))
)

LEGEND = (
    "worse: beyond a limit, and the samples say it is real (or a wrong element, or no "
    "measurement); better: the same the other way; same: within every limit; noisy: "
    "beyond a limit but not shown real; not comparable: world size, backend, dtype, "
    "variant, device or averaging differ, or the op is unsupported in the current run "
    "only; missing: in the baseline only; new: in the current run only (or unsupported "
    "in the baseline); ok: correct, outside the size window (performance not judged); "
    "skipped: no measurement on either side (unsupported or oom); insensitive: within "
    "the limits, but too noisy to have seen a slowdown of about twice the limit. "
    "worse, missing and not comparable fail the gate."
)


def summary_line(result: GateResult) -> str:
    parts = ", ".join(f"{n} {v.value}" for v, n in result.counts().items())
    floors = sum(f.fails for f in result.floors)
    floor_text = f", {floors} average-busbw floor(s) not met" if floors else ""
    if result.incomplete:
        verdict = f"FAIL (incomplete run; {result.failures} failure(s))"
    elif not result.passed:
        verdict = f"FAIL ({result.failures} failure(s))"
    elif result.not_judged or result.inconclusive:
        verdict = "PASS on correctness and presence only"
    else:
        verdict = "PASS"
    line = f"colbench gate: {verdict}: {plural(len(result.rows), 'row')}: {parts}{floor_text}"
    power = power_text(result)
    return f"{line}; {power}" if power else line


def _cell(c: CheckResult | None) -> str:
    if c is None:
        return "-"
    if c.change is None:
        # An absolute bound: the median against its limit (the note says what failed).
        return _absolute(c) if c.current_median is not None else "-"
    return f"{c.change:+.1%} {_p_text(c)}".rstrip()


def _absolute(c: CheckResult) -> str:
    return f"{c.current_median:.4g} (limit {c.check.limit:g})"


def _p_text(c: CheckResult) -> str:
    if c.p_value is not None:
        return f"p={c.p_value:.3f}"
    return "small-R" if c.rule == "small-sample rule" else ""


def _perf_metrics(result: GateResult) -> list[str]:
    return [c.metric for c in result.rules.checks if c.metric != "wrong"]


def _window_text(result: GateResult) -> str:
    """Where performance was judged, or why nowhere (another machine, no baseline)."""
    window = result.rules.window
    return window.closed or f"performance judged at {window.describe()}"


def console_lines(result: GateResult) -> list[str]:
    """The table on stdout: one line per row, failures marked, then warnings and the verdict."""
    metrics = _perf_metrics(result)
    p_test = "rank test (the pooled test's over the rows)" if result.overall else "rank test"
    p_test = "drift t test" if result.drift else p_test
    variant = _variant_width(result)
    shown = (*_KEYS[:2], Column("variant", variant, "<", ""), *_KEYS[2:]) if variant else _KEYS
    columns = (
        *shown,
        *(Column(m, 23, "<", " " if i else "  ") for i, m in enumerate(metrics)),
        Column("note", gap=" " if metrics else "  "),
    )
    lines = [
        f"# colbench gate: {result.current} against baseline {result.baseline}",
        "# checks: " + ", ".join(c.text for c in result.rules.checks) + f"; {_window_text(result)}",
        f"# {rule_text(result)}",
        "# change: (current - baseline) / baseline of the medians; p: one-sided " + p_test,
        f"# {power_rule(result)}",
        "#",
        text.header(columns),
    ]
    for row in result.rows:
        cells = _cells(row, metrics, variant=bool(variant))
        lines.append(text.line(cells, columns, lead="! " if row.fails else "  "))
    for f in result.floors:
        state = "below" if f.fails else "meets"
        average = f"average busbw {f.avg_busbw_gbps:.4g} GB/s"
        lines.append(f"# {f.label}: {average} {state} the floor {f.limit_text()}")
    lines.extend(f"# {line}" for line in overall_lines(result))
    lines.extend(f"# changed: {what}: {a} -> {b}" for what, a, b in result.changes)
    lines.extend(f"# warning: {w}" for w in result.warnings)
    lines.extend(f"# FAIL: {why}" for why in result.incomplete)
    lines.append(summary_line(result))
    return lines


def _detect(row: RowResult) -> str:
    if row.detectable is not None:
        return f"{row.detectable:.0%}"
    return "none" if row.judged else "-"


def _md_cell(c: CheckResult | None) -> str:
    if c is None or c.current_median is None:
        return ""
    if c.change is None or c.baseline_median is None:
        return _absolute(c)
    p = _p_text(c)
    bold = "**" if c.verdict is Verdict.WORSE else ""
    change = f"{bold}{c.change:+.1%}{bold}" + (f", {p}" if p else "")
    return f"{c.baseline_median:.4g} → {c.current_median:.4g} ({change})"


def _variant_width(result: GateResult) -> int:
    """The variant column's width; 0 when no row names a variant (the column is left out):
    a run of several variants has a row per variant at each size."""
    names = [str(r.key.get("variant") or "") for r in result.rows]
    return max(len(n) for n in names) + 1 if any(names) else 0


def _cells(
    row: RowResult, metrics: Sequence[str], markdown: bool = False, variant: bool = False
) -> list[object]:
    """One row of the console table, or of the Markdown one (failures bold, notes escaped);
    ``variant``: with the row's variant after its op."""
    k, notes = row.key, "; ".join(row.notes)
    verdict = f"**{row.verdict.value}**" if markdown and row.fails else row.verdict.value
    # One check per metric (parse_checks refuses two).
    found = {c.check.metric: c for c in row.checks}
    figures = [(_md_cell if markdown else _cell)(found.get(m)) for m in metrics]
    return [
        verdict,
        k["op"],
        *([k.get("variant") or ""] if variant else []),
        *(k[c] for c in ("dtype", "redop")),
        "in" if int(k["in_place"]) else "out",
        k["size_bytes"],
        f"{row.n_baseline}/{row.n_current}",
        _detect(row),
        *figures,
        text.escape(notes) if markdown else notes,
    ]


def _md_table(result: GateResult, rows: Sequence[RowResult]) -> list[str]:
    metrics = _perf_metrics(result)
    variant = bool(_variant_width(result))
    head = ["verdict", "op", *(["variant"] if variant else []), "dtype", "redop", "place"]
    head += ["size (B)", "samples", "detect"]
    cells = [_cells(r, metrics, True, variant) for r in rows]
    return text.markdown([*head, *metrics, "note"], cells)


def markdown(result: GateResult) -> str:
    """A report for people: the verdict first, rows that need a look, then everything."""
    icon = "✅" if result.passed else "❌"
    lines = [
        f"## {icon} {summary_line(result)}",
        "",
        f"Current run `{result.current}` against baseline `{result.baseline}`.",
        "",
        "Checks: "
        + ", ".join(f"`{c.text}` ({c.describe()})" for c in result.rules.checks)
        + f"; {_window_text(result)}.",
        "",
        f"Rule: {rule_text(result)}. Changes are (current - baseline) / baseline of medians.",
        "",
        f"Power: {power_rule(result)}.",
        "",
        *(f"{line[0].upper()}{line[1:]}.\n" for line in overall_lines(result)),
        *text.markdown(["verdict", "rows"], [(v.value, n) for v, n in result.counts().items()]),
        "",
    ]
    lines += _md_floors(result)
    lines += [f"- ❌ {text.escape(why)}" for why in result.incomplete]
    look = [r for v in _NEEDS_A_LOOK for r in result.rows if r.verdict is v]
    if look:
        lines += ["### Rows that need a look", "", *_md_table(result, look), ""]
    if result.warnings:
        lines += ["### Warnings", "", *(f"- {text.escape(w)}" for w in result.warnings), ""]
    if result.changes:
        escaped = [[text.escape(cell) for cell in change] for change in result.changes]
        table = text.markdown(["what", "baseline", "current"], escaped)
        lines += ["### What changed between the runs", "", *table, ""]
    lines += [
        f"<details><summary>All {plural(len(result.rows), 'row')}</summary>",
        "",
        *_md_table(result, result.rows),
        "",
        "</details>",
        "",
        f"_{LEGEND}_",
        "",
    ]
    return "\n".join(lines)


def _md_floors(result: GateResult) -> list[str]:
    if not result.floors:
        return []
    cells = []
    for f in result.floors:
        state = "**below**" if f.fails else "ok"
        cells.append((f.label, f"{f.avg_busbw_gbps:.4g}", f"{f.floor.floor_gbps:.4g}", state))
    head = ["op", "average busbw (GB/s)", "floor (GB/s)", ""]
    title = f"### Average bus bandwidth floor (`{result.floors[0].floor.describe()}`)"
    return [title, "", *text.markdown(head, cells), ""]


def junit_xml(result: GateResult) -> str:
    """One test case per row (and per average-busbw floor); failing verdicts are failures."""
    overall = result.overall
    properties = (
        ("baseline", result.baseline),
        ("current", result.current),
        ("checks", " ".join(c.text for c in result.rules.checks)),
        ("window", result.rules.window.describe()),
        ("alpha", f"{result.rules.alpha:g}"),
        ("power", f"{result.rules.power:g}"),
        ("fwer", result.rules.fwer),
        ("sensitivity", power_text(result)),
    )
    suite = junit_suite("colbench gate", properties)
    suite.set("skipped", str(sum(r.verdict is Verdict.SKIPPED for r in result.rows)))
    for row in result.rows:
        _junit_row(suite, row)
    for floor in result.floors:
        _junit_floor(suite, floor)
    for o in overall:
        _junit_overall(suite, o, "overall" if result.drift else "pooled")
    for why in result.incomplete:
        case = test_case(suite, "colbench.gate.run", "the current run is complete")
        ET.SubElement(case, "failure", message=why, type="incomplete")
    return junit_document(suite)


def junit_suite(name: str, properties: Sequence[tuple[str, str]]) -> ET.Element:
    """A JUnit test suite with its properties, for :func:`test_case` and
    :func:`junit_document` (the stored gate's and the paired gate's)."""
    # The counts' places kept in the order the files have always had (junit_document fills them).
    suite = ET.Element("testsuite", name=name, tests="0", failures="0", errors="0")
    props = ET.SubElement(suite, "properties")
    for key, value in properties:
        ET.SubElement(props, "property", name=key, value=value)
    return suite


def test_case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    """One JUnit test case; the gate times nothing per case, so its time is 0."""
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def junit_document(suite: ET.Element) -> str:
    """The XML file of ``suite``, its cases and failures counted from what it holds."""
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    root = ET.Element(
        "testsuites", name=suite.get("name", ""), tests=suite.get("tests", "0"),
        failures=suite.get("failures", "0"),
    )  # fmt: skip
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _junit_row(suite: ET.Element, row: RowResult) -> None:
    case = test_case(suite, f"colbench.gate.{row.key['op']}", row.label())
    checks = [f"{c.check.metric}: {_cell(c)} ({c.verdict.value})" for c in row.checks]
    detail = "; ".join(checks + row.notes)
    said = f"{row.verdict.value}: {detail}"
    if row.fails:
        ET.SubElement(case, "failure", message=said, type=row.verdict.value).text = detail
    elif row.verdict is Verdict.SKIPPED:
        ET.SubElement(case, "skipped", message=detail)
    else:
        ET.SubElement(case, "system-out").text = said.strip()


def _junit_floor(suite: ET.Element, floor: FloorResult) -> None:
    name = f"{floor.op} average busbw >= {floor.limit_text()}"
    case = test_case(suite, "colbench.gate.floor", name)
    if floor.fails:
        message = f"average busbw {floor.avg_busbw_gbps:.4g} GB/s below {floor.limit_text()}"
        ET.SubElement(case, "failure", message=message, type="floor")


def _junit_overall(suite: ET.Element, o: OverallResult, name: str) -> None:
    title = f"{o.check.metric}: median change over {plural(o.rows, 'row')}"
    case = test_case(suite, f"colbench.gate.{name}", title)
    detail = f"{o.verdict.value}: {overall_change(o)}"
    if o.fails:
        ET.SubElement(case, "failure", message=detail, type="worse").text = detail
    else:
        ET.SubElement(case, "system-out").text = detail
