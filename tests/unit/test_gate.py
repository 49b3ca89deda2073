"""colbench.gate and its reports: check parsing, direction, windows, joins, verdicts, formats.

Runs here are written through the real row builder (bench.make_row) and RowWriter and
read back with results.load, so the gate sees exactly what a sweep would leave; only
the timings are chosen, to put the judgement in a known situation.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from colbench import ops
from colbench.analysis import gate
from colbench.analysis.checks import Check, SizeWindow, parse_checks
from colbench.analysis.verdict import Verdict, judge
from colbench.bench import RunInfo, Work, make_row, unmeasured_row
from colbench.config import SweepConfig
from colbench.errors import UsageError
from colbench.report import gate_report
from colbench.results import STATUS_OOM, RowWriter, load
from tests.conftest import run_main

KiB = 1024


def write_run(
    run_dir: Path,
    times_us: dict[tuple[str, int, str], Sequence[float]],
    *,
    world_size: int = 2,
    backend: str = "gloo",
    dtype: str = "float32",
    variant: str = "",
    device: str = "cpu",
    average: str = "avg",
    wrong: dict[tuple[str, int, str], int] | None = None,
    oom: Sequence[tuple[str, int, str]] = (),
    status: str = "complete",
    meta: dict[str, object] | None = None,
) -> Path:
    """A run directory: {(op, requested bytes, "in"/"out"): per-repeat batch times}."""
    run_dir.mkdir(parents=True)
    writer = RowWriter(run_dir / "results.csv")
    info = RunInfo(run_dir.name, backend, device, world_size, 1, variant)
    for (op_name, requested, placement), samples in times_us.items():
        coll = ops.get(op_name)
        cfg = SweepConfig(ops=(op_name,), sizes_bytes=(requested,), average=average)  # type: ignore[arg-type]
        elem = 4 if dtype == "float32" else 2
        layout = coll.layout(requested, elem, world_size)
        redop = "sum" if coll.uses_redop else "none"
        work = Work(coll, dtype, redop, (requested,), (layout,), (placement,))
        for repeat, t in enumerate(samples):
            key = (op_name, requested, placement)
            if key in oom:
                row = unmeasured_row(
                    info, cfg, work, requested, layout, placement == "in", STATUS_OOM, repeat
                )
            else:
                times = dict.fromkeys(
                    ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us"), t
                )
                bad = (wrong or {}).get(key, 0) if repeat == 0 else 0
                row = make_row(
                    info, cfg, work, requested, layout, placement == "in", times, bad, repeat
                )
            writer.write(row)
    writer.close()
    record = {"run_id": run_dir.name, "status": status, **(meta or {})}
    (run_dir / "meta.json").write_text(json.dumps(record))
    return run_dir


STEADY = [100.0, 101.0, 99.0, 100.5, 99.5]
BIG = ("all_reduce", 64 * KiB, "in")
SMALL = ("all_reduce", 1 * KiB, "in")
GATHER = ("all_gather", 64 * KiB, "out")


def scaled(samples: Sequence[float], factor: float) -> list[float]:
    return [t * factor for t in samples]


# --- check parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "limit", "relative", "normal"),
    [
        ("busbw_gbps:-15%", "busbw_gbps", 0.15, True, "busbw_gbps:-15%"),
        ("busbw_gbps:15%", "busbw_gbps", 0.15, True, "busbw_gbps:-15%"),
        ("time_p50_us:+25%", "time_p50_us", 0.25, True, "time_p50_us:+25%"),
        (" time_us : 2.5% ", "time_us", 0.025, True, "time_us:+2.5%"),
        ("time_p99_us:5000", "time_p99_us", 5000.0, False, "time_p99_us:5000"),
        ("busbw_gbps:0.5", "busbw_gbps", 0.5, False, "busbw_gbps:0.5"),
        ("wrong:0", "wrong", 0.0, False, "wrong:0"),
    ],
)
def test_checks_parse(text: str, metric: str, limit: float, relative: bool, normal: str) -> None:
    check = Check.parse(text)
    assert (check.metric, check.relative, check.text) == (metric, relative, normal)
    assert check.limit == pytest.approx(limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("busbw_gbps", "METRIC:+X%"),
        ("busbw_gbps:", "METRIC:+X%"),
        ("busbw:-15%", "did you mean busbw_gbps"),
        ("latency:+5%", "unknown metric"),
        ("busbw_gbps:+15%", "a regression is a drop, so its limit is written busbw_gbps:-15%"),
        ("time_us:-10%", "a regression is a rise, so its limit is written time_us:+10%"),
        ("busbw_gbps:-100%", "could never fail"),
        ("busbw_gbps:-x%", "not a percentage"),
        ("time_us:fast", "neither a percentage"),
        ("time_us:-5", ">= 0"),
        ("wrong:5", "only wrong:0"),
        ("wrong:+1%", "absolute count"),
    ],
)
def test_bad_checks_say_why(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        Check.parse(text)


def test_wrong_check_is_always_on_and_once() -> None:
    assert [c.text for c in parse_checks([])] == ["wrong:0"]
    checks = parse_checks(["busbw_gbps:-15%", "wrong:0", "time_p50_us:+25%"])
    assert [c.text for c in checks] == ["wrong:0", "busbw_gbps:-15%", "time_p50_us:+25%"]
    with pytest.raises(UsageError, match="two checks on busbw_gbps"):
        parse_checks(["busbw_gbps:-15%", "busbw_gbps:-5%"])


def test_size_window() -> None:
    window = SizeWindow.parse("64K", "1M")
    assert 65536 in window and 1048576 in window
    assert 65535 not in window and 1048577 not in window
    assert 0 in SizeWindow() and 10**12 in SizeWindow.parse("1K", None)
    assert window.describe() == "sizes 65536-1048576 B"
    with pytest.raises(UsageError, match="larger than --max-size"):
        SizeWindow.parse("1M", "64K")
    with pytest.raises(UsageError, match="bad size"):
        SizeWindow.parse("64Q", None)


# --- the verdict rule ----------------------------------------------------------------


def test_direction_a_faster_run_never_fails_a_time_check() -> None:
    fast = judge(STEADY, scaled(STEADY, 0.5), worse_when=+1, threshold=0.1)
    assert fast.verdict is Verdict.BETTER and fast.change == pytest.approx(-0.5)
    slow = judge(STEADY, scaled(STEADY, 1.5), worse_when=+1, threshold=0.1)
    assert slow.verdict is Verdict.WORSE and slow.p_value == pytest.approx(1 / 252)


def test_direction_bandwidth_fails_on_a_drop_only() -> None:
    assert judge(STEADY, scaled(STEADY, 0.6), -1, 0.15).verdict is Verdict.WORSE
    assert judge(STEADY, scaled(STEADY, 1.4), -1, 0.15).verdict is Verdict.BETTER


def test_within_the_limit_is_same_even_when_significant() -> None:
    result = judge(STEADY, scaled(STEADY, 1.05), +1, 0.10)
    assert result.verdict is Verdict.SAME and result.p_value is None


def test_a_change_beyond_the_limit_must_be_real_beyond_the_limit() -> None:
    # The medians moved 20% against a 15% limit, but the samples overlap the baseline
    # moved by 15%: the extra 5% is not shown real.
    base = [100.0, 90.0, 110.0, 95.0, 105.0]
    cur = [120.0, 105.0, 135.0, 112.0, 128.0]
    result = judge(base, cur, +1, 0.15)
    assert result.change == pytest.approx(0.20)
    assert result.verdict is Verdict.NOISY and result.p_value is not None
    assert result.p_value > 0.05


def test_noisy_big_change() -> None:
    base = [100.0, 300.0, 120.0]
    cur = [110.0, 400.0, 250.0]
    assert judge(base, cur, +1, 0.25).verdict is Verdict.NOISY


def test_small_sample_rule_needs_twice_the_limit_and_no_overlap() -> None:
    # One sample a side: the rank test can never reach alpha.
    assert judge([100.0], [125.0], +1, 0.15).verdict is Verdict.NOISY
    worse = judge([100.0], [131.0], +1, 0.15)
    assert worse.verdict is Verdict.WORSE and worse.rule == "small-sample rule"
    assert worse.p_value is None
    # Two a side: the medians moved 40%, but one current sample lies inside the moved range.
    assert judge([100.0, 110.0], [126.0, 160.0], +1, 0.15).verdict is Verdict.NOISY
    assert judge([100.0, 110.0], [130.0, 160.0], +1, 0.15).verdict is Verdict.WORSE


def test_three_a_side_use_the_rank_test_when_it_can_reach_alpha() -> None:
    base, cur = [100.0, 101.0, 99.0], [125.0, 126.0, 124.0]
    result = judge(base, cur, +1, 0.15)
    assert result.rule == "rank test" and result.p_value == pytest.approx(0.05)
    assert result.verdict is Verdict.WORSE
    # At alpha 0.01 three a side are too few: the small-sample rule wants a 30% change.
    strict = judge(base, cur, +1, 0.15, alpha=0.01)
    assert (strict.rule, strict.verdict) == ("small-sample rule", Verdict.NOISY)


# --- joining runs --------------------------------------------------------------------


def run_gate(tmp_path: Path, base: Path, cur: Path, *checks: str, **kw: object) -> gate.GateResult:
    return gate.run_gate(base, cur, parse_checks(checks), **kw)  # type: ignore[arg-type]


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
    pooled = gate.run_gate(base, [cur, other], parse_checks(["time_us:+10%"]))
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
    (floor,) = gate.average_busbw_floors(frame, expected * 0.9)
    assert floor.op == "all_reduce" and floor.avg_busbw_gbps == pytest.approx(expected, rel=0.01)
    assert not floor.fails
    assert gate.average_busbw_floors(frame, expected * 1.1)[0].fails
    result = gate.run_gate(run, run, parse_checks([]), floor_gbps=expected * 1.1)
    assert result.failures == 1 and not result.passed
    assert gate.parse_floor("", "NCCL_TESTS_MIN_BW") is None
    with pytest.raises(UsageError, match="NCCL_TESTS_MIN_BW='fast'"):
        gate.parse_floor("fast", "NCCL_TESTS_MIN_BW")


# --- baselines -----------------------------------------------------------------------


def test_update_baseline_copies_and_merges(tmp_path: Path) -> None:
    one = write_run(tmp_path / "one", {BIG: STEADY})
    two = write_run(tmp_path / "two", {BIG: STEADY[:2]})
    target = gate.update_baseline([one, two], tmp_path / "baselines" / "smoke")
    merged = load(target)
    assert len(merged) == 7 and set(merged["run_id"]) == {"one", "two"}
    meta = json.loads((target / "meta.json").read_text())
    assert meta["pooled_runs"] == ["one", "two"]
    gate.update_baseline(one, target)
    assert len(load(target)) == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wrong": {BIG: 1}}, "wrong elements"),
        ({"oom": [BIG]}, "no measurement"),
        ({"status": "interrupted"}, "status is 'interrupted'"),
    ],
)
def test_update_baseline_refuses_a_broken_run(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY}, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        gate.update_baseline(run, tmp_path / "base")
    assert not (tmp_path / "base").exists()


# --- report formats ------------------------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path) -> gate.GateResult:
    base = write_run(tmp_path / "base", {BIG: STEADY, GATHER: STEADY, SMALL: STEADY})
    cur = write_run(
        tmp_path / "cur",
        {BIG: scaled(STEADY, 1.5), GATHER: STEADY, ("reduce", 4 * KiB, "in"): STEADY},
    )
    return run_gate(tmp_path, base, cur, "busbw_gbps:-15%", "time_p50_us:+25%")


def test_console_table(mixed: gate.GateResult) -> None:
    lines = gate_report.console_lines(mixed)
    assert lines[-1] == (
        "colbench gate: FAIL (2 failure(s)): 4 rows: 1 worse, 1 same, 1 missing, 1 new"
    )
    assert "busbw_gbps:-15%" in lines[1] and "all sizes" in lines[1]
    worse = next(line for line in lines if " worse " in line)
    assert worse.startswith("!") and "all_reduce" in worse and "-33.3% p=0.004" in worse
    assert "+50.0% p=0.004" in worse
    new = next(line for line in lines if " new " in line)
    assert new.startswith(" ") and "reduce" in new


def test_markdown_report(mixed: gate.GateResult) -> None:
    text = gate_report.markdown(mixed)
    assert text.startswith("## ❌ colbench gate: FAIL")
    look = text.split("### Rows that need a look\n\n")[1].split("\n\n")[0]
    rows = [line for line in look.splitlines() if line.startswith("| ")][1:]
    # Failures come first, then the rest that is not plainly the same.
    assert [r.split("|")[1].strip() for r in rows] == ["**worse**", "**missing**", "new"]
    assert "100 → 150 (**+50.0%**, p=0.004)" in rows[0]
    assert "<details><summary>All 4 rows</summary>" in text
    assert "`wrong:0` (no wrong element)" in text


def test_markdown_escapes_pipes(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY}, variant="A|B")
    cur = write_run(tmp_path / "cur", {BIG: STEADY}, variant="A|C")
    text = gate_report.markdown(run_gate(tmp_path, base, cur))
    assert "variant A\\|B vs A\\|C" in text


def test_junit_xml(mixed: gate.GateResult) -> None:
    root = ET.fromstring(gate_report.junit_xml(mixed))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("4", "2")
    cases = suite.findall("testcase")
    failures = {c.get("name"): c.find("failure") for c in cases}
    assert len(cases) == 4
    worse = failures["all_reduce float32 sum in-place 65536 B"]
    assert worse is not None and worse.get("type") == "worse"
    assert "busbw_gbps: -33.3% p=0.004 (worse)" in (worse.get("message") or "")
    assert failures["all_reduce float32 sum in-place 1024 B"] is not None
    assert failures["all_gather float32 none out-of-place 65536 B"] is None


def test_passing_reports(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY})
    result = run_gate(tmp_path, run, run, "busbw_gbps:-15%")
    assert gate_report.markdown(result).startswith("## ✅ colbench gate: PASS: 1 rows: 1 same")
    root = ET.fromstring(gate_report.junit_xml(result))
    assert root.get("failures") == "0" and root.find(".//failure") is None


# --- the command line ----------------------------------------------------------------


def test_cli_pass_fail_and_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY})
    slow = write_run(tmp_path / "slow", {BIG: scaled(STEADY, 2.0)})
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    code, out, _ = run_main(capsys, "gate", str(base), str(base), "--check", "busbw_gbps:-15%")
    assert code == 0 and out.splitlines()[-1].startswith("colbench gate: PASS")
    report, junit = tmp_path / "gate.md", tmp_path / "gate.xml"
    code, out, _ = run_main(
        capsys, "gate", str(base), str(slow), "--check", "busbw_gbps:-15%",
        "--report", str(report), "--junit", str(junit),
    )  # fmt: skip
    assert code == 1 and "FAIL (1 failure(s))" in out.splitlines()[-1]
    assert report.read_text().startswith("## ❌")
    assert ET.parse(junit).getroot().get("failures") == "1"
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    headlines = [line[:5] for line in text.splitlines() if line.startswith("## ")]
    assert headlines == ["## ✅ ", "## ❌ "]


def test_cli_min_bw_from_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = write_run(tmp_path / "a", {BIG: STEADY})
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "1000")
    code, out, _ = run_main(capsys, "gate", str(run), str(run))
    assert code == 1 and "below the floor 1000 GB/s" in out
    code, _, _ = run_main(capsys, "gate", str(run), str(run), "--min-avg-busbw-gbps", "0")
    assert code == 0


def test_cli_update_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY})
    code, _, err = run_main(capsys, "gate", str(tmp_path / "base"), str(run), "--update-baseline")
    assert code == 0 and "is the new baseline" in err
    assert len(load(tmp_path / "base")) == 5
    broken = write_run(tmp_path / "broken", {BIG: STEADY}, wrong={BIG: 3})
    code, _, err = run_main(
        capsys, "gate", str(tmp_path / "base"), str(broken), "--update-baseline"
    )
    assert code == 2 and err.startswith("colbench: error: refusing")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--check", "busbw_gbps:+15%"], "a regression is a drop"),
        (["--min-size", "1M", "--max-size", "1K"], "larger than --max-size"),
        (["--alpha", "1.5"], "--alpha"),
        (["--max-cv-pct", "0"], "--max-cv-pct"),
        (["--min-avg-busbw-gbps", "lots"], "--min-avg-busbw-gbps"),
    ],
)
def test_cli_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY})
    code, out, err = run_main(capsys, "gate", str(run), str(run), *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("colbench: error: ")
    assert message in err


def test_cli_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY})
    code, _, err = run_main(capsys, "gate", str(tmp_path / "nope"), str(run))
    assert code == 2 and "no results file at" in err


# --- the committed smoke baseline ----------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "results" / "baselines" / "gloo-smoke"


def _suite_flags(text: str, prefix: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.strip().startswith(prefix)]
    return line.split(prefix, 1)[1].split()


def test_committed_baseline_matches_the_smoke_suite_and_is_clean() -> None:
    # load() reads every schema; the baseline is re-measured when the columns change.
    frame = load(BASELINE)
    assert (frame["wrong"] == 0).all() and (frame["status"] == "ok").all()
    keys = ["op", "dtype", "redop", "root", "in_place", "size_bytes"]
    samples = frame.groupby(keys).size()
    # Three runs of --repeat 3, pooled: enough for the rank test against a --repeat 3 run.
    assert samples.min() >= 9 and frame["run_id"].nunique() >= 3
    assert set(frame["op"]) == set(ops.BY_NAME)
    meta = json.loads((BASELINE / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["world_size"] == 2
    # The baseline was measured with the flags `make gate-smoke` and the workflow use.
    argv = meta["command_line"]
    measured = argv[argv.index("sweep") + 1 : argv.index("--repeat")]
    makefile = (REPO / "Makefile").read_text()
    workflow = (REPO / ".github" / "workflows" / "colbench-gate.yml").read_text()
    assert _suite_flags(makefile, "SMOKE_FLAGS ?=") == measured
    assert _suite_flags(workflow, "SMOKE_FLAGS:") == measured
