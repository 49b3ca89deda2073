"""The gate's outputs: console table, Markdown, JUnit XML, and the command line's exit codes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from colbench.commands.gate import engine as gate
from colbench.commands.gate import report as gate_report
from colbench.results.rows import load
from tests.conftest import run_main
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
    # Two rows judged: each a 5/5 rank test at 0.05 / 4, and one pooled test per check
    # (the slower row is beyond the limits, the other is not: the pooled busbw median of
    # the two rows' changes is beyond -15%, but not shown real).
    assert lines[-1] == (
        "colbench gate: FAIL (2 failure(s)): 4 rows: 1 worse, 1 same, 1 missing, 1 new; "
        "sensitive to slowdowns >= 17% on 2 rows; pooled busbw_gbps >= 16% over 2 rows "
        "(noisy: median change -18.4%, p=0.529); pooled time_p50_us >= 21% over 2 rows; "
        "within-run spread only: a baseline of 1 run(s) (the drift test needs 5) cannot tell "
        "a slowdown from a busy machine; gate variants run interleaved for that "
        "(--variant-a/--variant-b)"
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
    # The 4 rows and the pooled test of each of the 2 checks.
    assert (suite.get("tests"), suite.get("failures")) == ("6", "2")
    cases = suite.findall("testcase")
    failures = {c.get("name"): c.find("failure") for c in cases}
    assert len(cases) == 6
    pooled = [c for c in cases if c.get("classname") == "colbench.gate.pooled"]
    assert [c.get("name") for c in pooled] == [
        "busbw_gbps: median change over 2 rows",
        "time_p50_us: median change over 2 rows",
    ]
    worse = failures["all_reduce float32 sum in-place 65536 B"]
    assert worse is not None and worse.get("type") == "worse"
    assert "busbw_gbps: -33.3% p=0.004 (worse)" in (worse.get("message") or "")
    assert failures["all_reduce float32 sum in-place 1024 B"] is not None
    assert failures["all_gather float32 none out-of-place 65536 B"] is None


def test_passing_reports(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a", {BIG: STEADY})
    result = run_gate(tmp_path, run, run, "busbw_gbps:-15%")
    assert gate_report.markdown(result).startswith("## ✅ colbench gate: PASS: 1 row: 1 same")
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
    code, out, err = run_main(capsys, "gate", str(run), str(run))
    assert "is the baseline itself" in err
    # The same run spelled as its CSV file is still the same run.
    assert (
        "is the baseline itself" in run_main(capsys, "gate", str(run), str(run / "results.csv"))[2]
    )
    assert code == 1 and "below the floor 900 GB/s (0.9 x NCCL_TESTS_MIN_BW=1000)" in out
    code, _, _ = run_main(capsys, "gate", str(run), str(run), "--min-avg-busbw-gbps", "0")
    assert code == 0


def test_cli_update_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY})
    code, _, err = run_main(capsys, "gate", str(tmp_path / "base"), str(run), "--update-baseline")
    assert code == 0 and "is the new baseline" in err
    assert len(load(tmp_path / "base")) == 5
    # Gating the accepted run again compares it with its own copy: said, not silent.
    code, _, err = run_main(capsys, "gate", str(tmp_path / "base"), str(run))
    assert code == 0 and "shares its run_id with a run in the baseline" in err
    other = write_run(tmp_path / "other", {BIG: STEADY})
    code, _, err = run_main(capsys, "gate", str(tmp_path / "base"), str(other))
    assert code == 0 and "warning" not in err
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


def test_a_run_of_several_variants_names_each_rows_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.rows import row, write_run

    def run(name: str, slower_b: float) -> Path:
        rows = [
            {**row("all_reduce", 1 << 20, t * (slower_b if v == "X=b" else 1.0), variant=v,
                   run_id=name), "repeat": repeat}
            for repeat, t in enumerate((100.0, 101.0, 99.0, 100.5, 99.5))
            for v in ("X=a", "X=b")
        ]  # fmt: skip
        return write_run(tmp_path / name, rows)

    base, cur = run("base", 1.0), run("cur", 3.0)
    report = tmp_path / "gate.md"
    code, out, err = run_main(
        capsys, "gate", str(base), str(cur), "--check", "busbw_gbps:-10%", "--report", str(report)
    )
    assert code == 1, out + err
    table = [line for line in out.splitlines() if "all_reduce" in line]
    # Two rows of one size: the variant tells which got worse.
    assert len(table) == 2 and "variant" in out
    assert [("X=b" in line, line.startswith("!")) for line in table] == [
        (False, False),
        (True, True),
    ]
    assert "| verdict | op | variant |" in report.read_text()
