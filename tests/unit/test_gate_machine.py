"""Baselines know their machine; no baseline at all; the rolling window of accepted runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.commands.gate import report as gate_report
from colbench.commands.gate.command import update_baseline
from colbench.commands.gate.verdict import Verdict
from colbench.results import metafile, rundir
from colbench.results.rows import load
from tests.conftest import run_main
from tests.unit.gate_runs import BIG, STEADY, run_gate, scaled, write_run

HERE = {
    "cpu_model": "Xeon A",
    "cpu_id": "vendor_id GenuineIntel, cpu family 6, model 143, stepping 8",
    "cpu_cores": 2,
    "memory_bytes": 8 << 30,
    "kernel": "6.1",
    "gpus": [],
    "torch": "2.13.0+cpu",
    "cuda": None,
    "nccl": None,
}


def _machine(**changes: object) -> dict[str, object]:
    return {"machine": {**HERE, **changes}}


def test_meta_records_the_fingerprint() -> None:
    here = rundir.machine()
    assert set(metafile.MUST_MATCH) <= set(here) and set(metafile.SHOWN) <= set(here)
    assert here["cpu_cores"] and here["memory_bytes"] and here["kernel"]
    # Read from the processor, as its vendor's fields: x86's or Arm's (None elsewhere).
    assert here["cpu_id"] is None or here["cpu_id"].startswith(("vendor_id ", "CPU implementer "))
    old = {"cpu": {"model": "Xeon A", "cores": 2}, "versions": {"torch": "2.13.0+cpu"}}
    assert metafile.fingerprint(old) == {
        "cpu_model": "Xeon A",
        "cpu_cores": 2,
        "torch": "2.13.0+cpu",
    }


#: A hypervisor's generic model name over another generation of CPU (issue 33).
MASKED_ELSEWHERE = {"cpu_id": "vendor_id GenuineIntel, cpu family 6, model 85, stepping 7"}


@pytest.mark.parametrize(
    "change",
    [{"cpu_model": "Epyc B"}, MASKED_ELSEWHERE, {"cpu_cores": 4}, {"gpus": ["H100"]},
     {"torch": "2.14"}],
)  # fmt: skip
def test_another_machine_is_not_comparable_on_performance(
    tmp_path: Path, change: dict[str, object]
) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY}, meta=_machine())
    cur = write_run(tmp_path / "cur", {BIG: scaled(STEADY, 2.0)}, meta=_machine(**change))
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
    (row,) = result.rows
    assert row.verdict is Verdict.OK and result.passed
    assert "performance not comparable: the baseline's machine differs" in row.notes[0]
    assert "performance not comparable" in gate_report.summary_line(result)
    told = run_gate(tmp_path, base, cur, "busbw_gbps:-15%", any_machine=True)
    assert told.rows[0].verdict is Verdict.WORSE and not told.passed


def test_another_machine_still_judges_correctness(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY}, meta=_machine())
    cur = write_run(tmp_path / "cur", {BIG: STEADY}, wrong={BIG: 3}, meta=_machine(cpu_cores=8))
    assert not run_gate(tmp_path, base, cur, "busbw_gbps:-15%").passed


def test_memory_and_kernel_are_shown_not_required(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY}, meta=_machine())
    cur = write_run(
        tmp_path / "cur", {BIG: scaled(STEADY, 2.0)}, meta=_machine(kernel="6.8", memory_bytes=1)
    )
    result = run_gate(tmp_path, base, cur, "busbw_gbps:-15%")
    assert result.rows[0].verdict is Verdict.WORSE
    assert ("kernel", "6.1", "6.8") in result.changes


def test_no_baseline_judges_the_run_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY, ("all_gather", 1024, "out"): STEADY})
    missing = str(tmp_path / "fresh-runner")
    code, out, _ = run_main(capsys, "gate", missing, str(run), "--missing-baseline-ok",
                            "--check", "busbw_gbps:-15%")  # fmt: skip
    assert code == 0
    assert out.splitlines()[-1] == (
        "colbench gate: PASS on correctness and presence only: 2 rows: 2 new; "
        f"performance not judged: no baseline at {missing}"
    )
    broken = write_run(tmp_path / "broken", {BIG: STEADY}, wrong={BIG: 1})
    code, out, _ = run_main(capsys, "gate", missing, str(broken), "--missing-baseline-ok")
    assert code == 1 and "wrong element" in out
    lost = write_run(tmp_path / "lost", {BIG: STEADY}, oom=[BIG])
    code, out, _ = run_main(capsys, "gate", missing, str(lost), "--missing-baseline-ok")
    assert code == 1 and "no measurement in the current run" in out
    # Without the flag a missing baseline is a usage error, as a misspelt path should be.
    code, _, err = run_main(capsys, "gate", missing, str(run))
    assert code == 2 and "no results file at" in err


def test_update_baseline_keeps_a_rolling_window(tmp_path: Path) -> None:
    target = tmp_path / "baseline"
    for i in range(4):
        run = write_run(tmp_path / f"run{i}", {BIG: STEADY}, meta=_machine())
        update_baseline(run, target, keep=3)
    frame = load(target)
    assert list(dict.fromkeys(frame["run_id"])) == ["run1", "run2", "run3"]
    assert json.loads((target / "meta.json").read_text())["pooled_runs"] == [
        "run1",
        "run2",
        "run3",
    ]
    # A run from another machine starts the window again.
    other = write_run(tmp_path / "other", {BIG: STEADY}, meta=_machine(cpu_model="Epyc B"))
    update_baseline(other, target, keep=3)
    assert set(load(target)["run_id"]) == {"other"}
    # keep=1, the default, replaces the baseline as before.
    update_baseline(tmp_path / "run0", target)
    assert set(load(target)["run_id"]) == {"run0"}
