"""Rows without a measurement (status unsupported or oom) in the gate and in compare.

``unsupported`` is a fact of the variant: NCCL has no tree algorithm for all_gather, so
under NCCL_ALGO=Tree those rows say so in every run. The gate must not fail on that fact
alone, must fail when the current run lost a measurement the baseline had, and must
accept such rows in a baseline; compare names the status as the reason.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.compare.comparison import format_table
from colbench.commands.compare.pairs import compare_runs
from colbench.commands.gate import engine as gate
from colbench.commands.gate import report as gate_report
from colbench.commands.gate.checks import parse_checks
from colbench.commands.gate.command import update_baseline
from colbench.commands.gate.verdict import RowResult, Verdict
from colbench.config.min_bw import BusbwFloor
from colbench.errors import UsageError
from colbench.results.rows import STATUS_UNSUPPORTED, load
from tests.unit.rows import row, write_run

TREE = "NCCL_ALGO=Tree"
SIZES = (64 << 10, 1 << 20)


def without_measurement(r: dict[str, Any], status: str = STATUS_UNSUPPORTED) -> dict[str, Any]:
    numbers = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")
    gone = dict.fromkeys((*numbers, "algbw_gbps", "busbw_gbps", "aggbw_gbps", "wrong"))
    return {**r, **gone, "status": status}


def tree_run(
    path: Path,
    gather: str | None = STATUS_UNSUPPORTED,
    repeats: int = 3,
    wrong: int = 0,
) -> Path:
    """all_reduce measured, all_gather with status ``gather`` (None: measured)."""
    rows: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for size in SIZES:
            t = 100.0 + size / 1e4 + repeat
            rows.append(row("all_reduce", size, t, variant=TREE) | {"repeat": repeat})
            gathered = row("all_gather", size, t, variant=TREE, wrong=wrong) | {"repeat": repeat}
            rows.append(without_measurement(gathered, gather) if gather else gathered)
    write_run(path, rows)
    (path / "meta.json").write_text(json.dumps({"run_id": path.name, "status": "complete"}))
    return path


def verdicts(result: gate.GateResult) -> dict[tuple[str, int], Verdict]:
    return {(r.key["op"], r.key["size_bytes"]): r.verdict for r in result.rows}


def by_op(result: gate.GateResult, op: str) -> Iterable[RowResult]:
    return [r for r in result.rows if r.key["op"] == op]


def test_unsupported_on_both_sides_is_skipped_and_passes(tmp_path: Path) -> None:
    # Five repeats: enough for the two measured rows beside the pooled test (3 against 3
    # reaches p = 0.05 at best, above their 0.05 / 4, and would leave them to it).
    base, cur = tree_run(tmp_path / "base", repeats=5), tree_run(tmp_path / "cur", repeats=5)
    result = gate.run_gate(
        base, cur, gate.GateRules(tuple(parse_checks(["busbw_gbps:-15%", "time_p50_us:250"])))
    )
    assert result.passed, gate_report.console_lines(result)
    assert {v for (op, _), v in verdicts(result).items() if op == "all_gather"} == {Verdict.SKIPPED}
    assert {v for (op, _), v in verdicts(result).items() if op == "all_reduce"} == {Verdict.SAME}
    note = next(iter(by_op(result, "all_gather"))).notes
    assert note == ["no measurement on either side (unsupported in the baseline, unsupported "
                    "in the current run)"]  # fmt: skip
    lines = gate_report.console_lines(result)
    assert lines[-1] == (
        "colbench gate: PASS: 4 rows: 2 same, 2 skipped; sensitive to slowdowns >= 18% on 2 rows"
        "; pooled >= 16% over 2 rows; within-run spread only: a baseline of 1 run(s) (the "
        "drift test needs 5) cannot tell a slowdown from a busy machine; gate variants run "
        "interleaved for that (--variant-a/--variant-b)"
    )
    suite = ET.fromstring(gate_report.junit_xml(result)).find("testsuite")
    assert suite is not None and suite.get("skipped") == "2"
    assert len(suite.findall("testcase/skipped")) == 2 and not suite.findall("testcase/failure")
    assert "skipped: no measurement on either side" in gate_report.markdown(result)


def test_unsupported_now_but_measured_before_fails(tmp_path: Path) -> None:
    base = tree_run(tmp_path / "base", gather=None)
    cur = tree_run(tmp_path / "cur")
    result = gate.run_gate(base, cur, gate.GateRules(tuple(parse_checks(["busbw_gbps:-15%"]))))
    assert result.failures == 2
    for r in by_op(result, "all_gather"):
        assert r.verdict is Verdict.NOT_COMPARABLE
        assert r.notes == ["unsupported in the current run, measured in the baseline"]


def test_measured_now_but_unsupported_before_is_new(tmp_path: Path) -> None:
    base = tree_run(tmp_path / "base")
    cur = tree_run(tmp_path / "cur", gather=None)
    result = gate.run_gate(base, cur, gate.GateRules(tuple(parse_checks(["busbw_gbps:-15%"]))))
    assert result.passed
    assert [r.verdict for r in by_op(result, "all_gather")] == [Verdict.NEW] * 2
    # ... but a wrong element fails it, as it fails every row.
    broken = tree_run(tmp_path / "broken", gather=None, wrong=4)
    result = gate.run_gate(base, broken, gate.GateRules(tuple(parse_checks(["busbw_gbps:-15%"]))))
    assert [r.verdict for r in by_op(result, "all_gather")] == [Verdict.WORSE] * 2
    assert all(r.notes[0] == "4 wrong element(s)" for r in by_op(result, "all_gather"))


def test_oom_on_both_sides_is_skipped_oom_now_only_fails(tmp_path: Path) -> None:
    base = tree_run(tmp_path / "base", gather="oom")
    result = gate.run_gate(
        base, tree_run(tmp_path / "cur", gather="oom"), gate.GateRules(tuple(parse_checks([])))
    )
    assert [r.verdict for r in by_op(result, "all_gather")] == [Verdict.SKIPPED] * 2
    measured = tree_run(tmp_path / "measured", gather=None)
    oom = tree_run(tmp_path / "oom", gather="oom")
    result = gate.run_gate(measured, oom, gate.GateRules(tuple(parse_checks(["busbw_gbps:-15%"]))))
    assert [r.verdict for r in by_op(result, "all_gather")] == [Verdict.WORSE] * 2
    assert all("status oom" in r.notes[0] for r in by_op(result, "all_gather"))


def test_a_baseline_may_hold_unsupported_rows_but_not_oom(tmp_path: Path) -> None:
    run = tree_run(tmp_path / "run")
    target = update_baseline(run, tmp_path / "base")
    assert (load(target)["status"] == STATUS_UNSUPPORTED).sum() == 6
    with pytest.raises(UsageError, match="status other than ok or unsupported"):
        update_baseline(tree_run(tmp_path / "oom", gather="oom"), tmp_path / "base2")


def test_average_busbw_floor_leaves_unsupported_rows_out(tmp_path: Path) -> None:
    frame = load(tree_run(tmp_path / "run"))
    assert [f.op for f in gate.average_busbw_floors(frame, BusbwFloor(0.0))] == ["all_reduce"]


# --- compare -------------------------------------------------------------------------


def test_compare_names_the_status_as_the_reason(tmp_path: Path) -> None:
    ring = tree_run(tmp_path / "ring", gather=None)
    tree = tree_run(tmp_path / "tree")
    comparison = compare_runs(ring, tree, "busbw")
    table = comparison.table
    gather = table[table["op"] == "all_gather"]
    assert gather["reason"].tolist() == ["unsupported in B"] * 2
    assert not gather["comparable"].any()
    assert table[table["op"] == "all_reduce"]["comparable"].all()
    text = format_table(comparison)
    assert "x             -  unsupported in B" in text and "2 row(s) not comparable" in text
    back = compare_runs(tree, ring, "time").table
    assert back[back["op"] == "all_gather"]["reason"].tolist() == ["unsupported in A"] * 2


def test_compare_keeps_keys_neither_run_measured(tmp_path: Path) -> None:
    a, b = tree_run(tmp_path / "a"), tree_run(tmp_path / "b", gather="oom")
    comparison = compare_runs(a, b, "busbw")
    table = comparison.table
    gather = table[table["op"] == "all_gather"]
    assert gather["reason"].tolist() == ["unsupported in A, oom in B"] * 2
    both = compare_runs(a, a, "busbw").table
    assert both[both["op"] == "all_gather"]["reason"].tolist() == ["unsupported in A and B"] * 2
    line = next(x for x in format_table(comparison).splitlines() if "all_gather" in x)
    assert line.endswith("-           -        x             -  unsupported in A, oom in B")
