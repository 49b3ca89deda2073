"""The gate's exit codes keep their promise: a gate that could not fail never looks, to a
job reading only the exit code, like one that passed (issue 21).

`--fail-inconclusive` turns every pass without a performance verdict into exit 5: no
baseline at all (whatever the checks), and the paired gate whose pairs could not have
seen a slowdown. The command line runs in-process (tests.conftest.run_main)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.unit.gate_runs import BIG, STEADY, write_run
from tests.unit.rows import row
from tests.unit.rows import write_run as write_rows

SIZES = [1 << 22, 1 << 24]


@pytest.mark.parametrize("checks", [(), ("--check", "busbw_gbps:-25%")])
def test_no_baseline_is_inconclusive_whatever_the_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], checks: tuple[str, ...]
) -> None:
    cur = write_run(tmp_path / "cur", {BIG: STEADY})
    missing = str(tmp_path / "nosuchbase")
    argv = ("gate", missing, str(cur), "--missing-baseline-ok", *checks)
    code, out, _ = run_main(capsys, *argv)
    assert code == 0
    last = out.splitlines()[-1]
    assert last.startswith("colbench gate: PASS on correctness and presence only"), last
    assert f"no baseline at {missing}" in last
    code, out, _ = run_main(capsys, *argv, "--fail-inconclusive")
    assert code == 5, out
    # A wrong element still fails: 1, not 5.
    wrong = write_run(tmp_path / "wrong", {BIG: STEADY}, wrong={BIG: 3})
    code, _, _ = run_main(capsys, "gate", missing, str(wrong), "--missing-baseline-ok",
                          "--fail-inconclusive", *checks)  # fmt: skip
    assert code == 1


def _interleaved(directory: Path, repeats: int, slowdown: float, seed: int) -> Path:
    """An interleaved run's rows: A and B per size and repeat, B slowed by ``slowdown``."""
    rng = random.Random(seed)
    rows = []
    for repeat in range(repeats):
        drift = math.exp(rng.gauss(0, 0.3))  # the machine's state, shared by the pair
        for size in SIZES:
            for variant, factor in (("A", 1.0), ("B", 1 / (1 - slowdown))):
                time_us = size / 1e3 * drift * factor * math.exp(rng.gauss(0, 0.05))
                rows.append({**row("all_reduce", size, time_us, variant=variant), "repeat": repeat})
    return write_rows(directory, rows)


def _paired(capsys: pytest.CaptureFixture[str], run: Path, *extra: str) -> tuple[int, str]:
    code, out, _ = run_main(
        capsys, "gate", str(run), "--variant-a", "A", "--variant-b", "B",
        "--check", "busbw_gbps:-10%", *extra,
    )  # fmt: skip
    return code, out.splitlines()[-1]


def test_the_paired_gate_honours_fail_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One pair per row: p >= 1/2 in every row, and 2 pairs pooled cannot reach alpha.
    one = _interleaved(tmp_path / "one", 1, 0.0, 1)
    code, last = _paired(capsys, one)
    assert code == 0
    assert last.startswith("paired gate passed on correctness and presence only: ")
    assert "performance inconclusive: 1 pairs per row cannot reach alpha 0.05" in last
    assert _paired(capsys, one, "--fail-inconclusive")[0] == 5
    # Enough pairs to see a slowdown: a pass is a pass, with what it could see.
    many = _interleaved(tmp_path / "many", 12, 0.0, 2)
    code, last = _paired(capsys, many, "--fail-inconclusive")
    assert code == 0 and last.startswith("paired gate passed: 0 failure(s) of 3 rows"), last
    assert "sensitive to slowdowns >= " in last and "over all 24 pairs" in last
    # And a failure stays a failure.
    slow = _interleaved(tmp_path / "slow", 12, 0.3, 3)
    assert _paired(capsys, slow, "--fail-inconclusive")[0] == 1


def test_the_paired_gate_writes_its_report_and_the_job_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier steps\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = _interleaved(tmp_path / "ab", 12, 0.0, 4)
    report = tmp_path / "gate-ab.md"
    code, last = _paired(capsys, run, "--report", str(report))
    assert code == 0
    text = report.read_text()
    assert text.startswith(f"## ✅ {last}\n")
    assert "| all_reduce | float32 | 4194304 |" in text
    assert summary.read_text() == "# earlier steps\n" + text + "\n"
