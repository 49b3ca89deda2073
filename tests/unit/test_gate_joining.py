"""Two runs through the gate: joined rows, their verdicts, warnings, what changed, floors."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.commands.gate import engine as gate
from colbench.commands.gate import report as gate_report
from colbench.commands.gate.checks import SizeWindow, parse_checks
from colbench.commands.gate.verdict import Verdict
from colbench.config.min_bw import BusbwFloor
from colbench.results.rows import load
from tests.unit.gate_runs import (
    BIG,
    GATHER,
    SMALL,
    STEADY,
    KiB,
    run_gate,
    scaled,
    write_run,
)

# --- joining runs --------------------------------------------------------------------


def test_a_run_against_itself_passes(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY, SMALL: STEADY, GATHER: STEADY})
    result = run_gate(tmp_path, run, run, "busbw_gbps:-15%", "time_p50_us:+25%")
    assert result.passed and result.failures == 0
    assert {r.verdict for r in result.rows} == {Verdict.SAME}
    assert len(result.rows) == 3


def test_slower_run_fails_per_row(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY, GATHER: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: scaled(STEADY, 1.5), GATHER: STEADY})
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
    by_op = {r.key["op"]: r for r in result.rows}
    assert by_op["all_reduce"].verdict is Verdict.WORSE
    # The CSV keeps 6 significant digits.
    assert by_op["all_reduce"].checks[0].change == pytest.approx(1 / 1.5 - 1, rel=1e-4)
    assert by_op["all_gather"].verdict is Verdict.SAME
    assert result.failures == 1


def test_window_keeps_small_message_noise_out_of_the_verdict(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {SMALL: STEADY, BIG: STEADY})
    cur = write_run(tmp_path / "cur", {SMALL: scaled(STEADY, 3.0), BIG: STEADY})
    assert not run_gate(tmp_path, base, cur, "busbw_gbps:-15%").passed
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%", window=SizeWindow.parse("64K", None))
    assert result.passed
    small = next(r for r in result.rows if r.key["size_bytes"] == 1024)
    assert small.verdict is Verdict.OK and "correctness only" in small.notes[0]
    assert small.checks == []


def test_max_size_window(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {SMALL: STEADY, BIG: STEADY})
    cur = write_run(tmp_path / "cur", {SMALL: STEADY, BIG: scaled(STEADY, 3.0)})
    result = run_gate(tmp_path, base, cur, "time_us:+10%", window=SizeWindow.parse(None, "4K"))
    assert result.passed
    assert [r.verdict for r in result.rows] == [Verdict.SAME, Verdict.OK]


def test_a_wrong_element_fails_even_when_faster_and_outside_the_window(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {SMALL: STEADY, BIG: STEADY})
    cur = write_run(
        tmp_path / "cur",
        {SMALL: scaled(STEADY, 0.5), BIG: scaled(STEADY, 0.5)},
        wrong={SMALL: 1, BIG: 1},
    )
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%", window=SizeWindow.parse("64K", None))
    assert [r.verdict for r in result.rows] == [Verdict.WORSE, Verdict.WORSE]
    assert all("1 wrong element(s)" in r.notes[0] for r in result.rows)
    big = next(r for r in result.rows if r.key["size_bytes"] == 65536)
    assert {c.check.metric: c.verdict for c in big.checks}["busbw_gbps"] is Verdict.BETTER
    assert result.failures == 2


def test_row_without_measurement_fails(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: STEADY}, oom=[BIG])
    (row,) = run_gate(tmp_path, base, cur, "busbw_gbps:-15%").rows
    assert row.verdict is Verdict.WORSE and "status oom" in row.notes[0]


def test_missing_and_new_rows(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY, SMALL: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: STEADY, GATHER: STEADY})
    result = run_gate(tmp_path, base, cur)
    verdicts = {(r.key["op"], r.key["size_bytes"]): r.verdict for r in result.rows}
    assert verdicts == {
        ("all_reduce", 65536): Verdict.SAME,
        ("all_reduce", 1024): Verdict.MISSING,
        ("all_gather", 65536): Verdict.NEW,
    }
    assert result.failures == 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"world_size": 4}, "world_size 2 vs 4"),
        ({"backend": "nccl"}, "backend gloo vs nccl"),
        ({"dtype": "bfloat16"}, "dtype float32 vs bfloat16"),
        ({"variant": "NCCL_ALGO=Tree"}, "variant  vs NCCL_ALGO=Tree"),
        ({"device": "NVIDIA H100"}, "device cpu vs NVIDIA H100"),
        ({"average": "max"}, "average avg vs max"),
    ],
)
def test_not_comparable_rows_fail_with_the_reason(
    tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY, GATHER: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: STEADY, GATHER: STEADY}, **change)  # type: ignore[arg-type]
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
    assert [r.verdict for r in result.rows] == [Verdict.NOT_COMPARABLE] * 2
    assert all(reason in r.notes[0] for r in result.rows), [r.notes for r in result.rows]
    assert result.failures == 2


def test_barrier_has_no_bandwidth_to_compare(tmp_path: Path) -> None:
    barrier = ("barrier", 0, "out")
    base = write_run(tmp_path / "base", {barrier: STEADY})
    cur = write_run(tmp_path / "cur", {barrier: STEADY})
    (row,) = run_gate(tmp_path, base, cur, "busbw_gbps:-15%", "time_us:+10%").rows
    assert row.verdict is Verdict.SAME
    assert [c.check.metric for c in row.checks] == ["time_us"]
    assert row.notes == []


def test_absolute_bound(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: scaled(STEADY, 2.0)})
    assert run_gate(tmp_path, base, cur, "time_p50_us:250").passed
    result = run_gate(tmp_path, base, cur, "time_p50_us:150")
    assert result.rows[0].verdict is Verdict.WORSE
    assert result.rows[0].notes == ["median 200 beyond 150"]
    (line,) = [x for x in gate_report.console_lines(result) if x.startswith("! worse")]
    assert line.endswith("200 (limit 150)         median 200 beyond 150")
    assert "| 200 (limit 150) | median 200 beyond 150 |" in gate_report.markdown(result)


def test_pooled_runs_and_sample_warnings(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: [100.0]})
    cur = write_run(tmp_path / "cur", {BIG: [100.0, 140.0, 60.0]})
    result = run_gate(tmp_path, base, cur, "time_us:+10%")
    assert any("too few for the rank test" in w for w in result.warnings)
    assert result.rows[0].wide and any("spread" in w for w in result.warnings)
    other = write_run(tmp_path / "cur2", {BIG: [100.0, 101.0]})
    pooled = gate.run_gate(
        base, [cur, other], gate.GateRules(tuple(parse_checks(["time_us:+10%"])))
    )
    assert pooled.rows[0].n_current == 5
    assert pooled.current == f"{cur} + {other}"


def test_unfinished_current_run_is_warned_about(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY})
    cur = write_run(tmp_path / "cur", {BIG: STEADY}, status="failed")
    result = run_gate(tmp_path, base, cur)
    assert "has status 'failed', not complete" in result.warnings[0]


def test_what_changed_between_the_runs(tmp_path: Path) -> None:
    def meta(torch: str, cpu: str, algo: str | None) -> dict[str, object]:
        env = {"NCCL_ALGO": algo} if algo else {}
        return {"versions": {"torch": torch, "nccl": None}, "cpu": {"model": cpu}, "env": env}

    base = write_run(tmp_path / "base", {BIG: STEADY}, meta=meta("2.13.0", "EPYC", None))
    cur = write_run(tmp_path / "cur", {BIG: STEADY}, meta=meta("2.14.0", "Xeon", "Ring"))
    result = run_gate(tmp_path, base, cur)
    assert result.changes == [
        ("torch", "2.13.0", "2.14.0"),
        ("cpu", "EPYC", "Xeon"),
        ("$NCCL_ALGO", "-", "Ring"),
    ]
    assert any("different CPUs (EPYC vs Xeon)" in w for w in result.warnings)
    text = gate_report.markdown(result)
    assert "| torch | 2.13.0 | 2.14.0 |" in text
    assert "# changed: torch: 2.13.0 -> 2.14.0" in gate_report.console_lines(result)


def test_nccl_tests_min_bw_floor(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY, ("all_reduce", 128 * KiB, "in"): STEADY})
    frame = load(run)
    expected = (65536 / 100e-6 + 131072 / 100e-6) / 2 / 1e9 * 2 * (2 - 1) / 2
    # NCCL_TESTS_MIN_BW = 1.05x the average: nccl-tests' 0.9x rule passes it.
    (floor,) = gate.average_busbw_floors(frame, BusbwFloor(expected * 1.05))
    assert floor.op == "all_reduce" and floor.avg_busbw_gbps == pytest.approx(expected, rel=0.01)
    assert not floor.fails
    assert gate.average_busbw_floors(frame, BusbwFloor(expected * 1.2))[0].fails
    # The same value as colbench's explicit floor asks for itself: it fails.
    explicit = BusbwFloor(expected * 1.05, "--min-avg-busbw-gbps", 1.0)
    assert gate.average_busbw_floors(frame, explicit)[0].fails
    result = gate.run_gate(
        run, run, gate.GateRules(tuple(parse_checks([])), floor=BusbwFloor(expected * 1.2))
    )
    assert result.failures == 1 and not result.passed


def test_a_run_without_subgroup_columns_is_not_comparable_and_says_why(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY})
    text = (run / "results.csv").read_text().splitlines()
    header = text[0].split(",")
    blanked = [header]
    for line in text[1:]:
        cells = line.split(",")
        cells[header.index("group_size")] = cells[header.index("groups")] = ""
        blanked.append(cells)
    imported = tmp_path / "imported"
    imported.mkdir()
    (imported / "results.csv").write_text("\n".join(",".join(c) for c in blanked) + "\n")
    result = run_gate(tmp_path, imported, run, "busbw_gbps:-15%")
    (row,) = result.rows
    assert row.verdict is Verdict.NOT_COMPARABLE
    assert row.notes == ["group_size None vs 2; groups None vs 1"]
