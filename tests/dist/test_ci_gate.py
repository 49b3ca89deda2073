"""scripts/ci-gate.sh as CI and `make gate-smoke` run it: twice on a fresh runner (no
baseline, then judged), and against a baseline from another machine (correctness and
presence judged, performance not compared, as `make gate-smoke` on any machine but the
one that measured results/baselines/gloo-smoke)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from colbench.results.rows import load
from tests.conftest import REPO, call_colbench, run_main, run_script

# A small suite of the same shape as configs/smoke-cpu.yaml, so the test takes seconds.
SUITE = """\
op: all_reduce
sizes: [1K, 4M]
backend: gloo
nprocs: 2
iters: 2
warmup: 1
repeat: 3
check: true
plot: false
"""


def _ci_gate(tmp_path: Path, out: str) -> subprocess.CompletedProcess[str]:
    return run_script(
        "scripts/ci-gate.sh", "--accept", str(tmp_path / "baseline"), str(tmp_path / out),
        env={"SMOKE_SUITE": str(tmp_path / "suite.yaml")},
    )  # fmt: skip


def test_first_run_starts_the_baseline_and_the_second_is_judged(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    first = _ci_gate(tmp_path, "one")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "performance not judged: no baseline at" in first.stdout
    meta = json.loads((tmp_path / "baseline" / "meta.json").read_text())
    assert meta["machine"]["cpu_cores"] == os.cpu_count()

    second = _ci_gate(tmp_path, "two")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "no baseline" not in second.stdout
    # Judged: the 4M row was compared, and its power stated (sensitive or too noisy).
    report = (tmp_path / "two" / "gate.txt").read_text()
    assert "Holm over the 1 row judged" in report
    assert "sensitive" in report.splitlines()[-1] or "too noisy" in report.splitlines()[-1]
    # Both accepted runs now pool in the baseline's window.
    assert load(tmp_path / "baseline")["run_id"].nunique() == 2


# --- a baseline measured on another machine (issue 33) -------------------------------

#: A machine unlike any this test runs on: its CPU model and core count differ.
OTHER_MACHINE = {"cpu_model": "colbench test CPU of another machine", "cpu_cores": 512}
#: How much faster the other machine measured every row than this one will.
FASTER = 20.0
_TIME_COLUMNS = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")
_BANDWIDTH_COLUMNS = ("algbw_gbps", "busbw_gbps", "aggbw_gbps")
#: Damages one element of all_reduce's output on rank 1, in every rank this Python
#: starts (ranks are forked from the parent): a real wrong result, the op itself real.
_CORRUPTING_SITE = """\
import os
from colbench.bench import ops
from tests.corrupting import Corrupting

ops.BY_NAME["all_reduce"] = Corrupting(ops.BY_NAME["all_reduce"], lambda c, b, ctx: ctx.rank == 1)
"""


def _measured_elsewhere(ours: Path, to: Path, machine: dict[str, object]) -> Path:
    """``ours`` as if measured on ``machine``, FASTER times faster on every row."""
    shutil.copytree(ours, to)
    frame = pd.read_csv(to / "results.csv")
    for column in _TIME_COLUMNS:
        frame[column] /= FASTER
    for column in _BANDWIDTH_COLUMNS:
        frame[column] *= FASTER
    frame.to_csv(to / "results.csv", index=False)
    meta = json.loads((to / "meta.json").read_text())
    meta["machine"] = {**meta["machine"], **machine}
    (to / "meta.json").write_text(json.dumps(meta))
    return to


def test_a_baseline_from_another_machine_judges_correctness_not_performance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    # A run directory is a baseline of one run (what --accept would keep of it).
    measured = call_colbench("run", str(suite), "--no-table", "--out", str(tmp_path / "ours"))
    assert measured.returncode == 0, measured.stderr
    elsewhere = _measured_elsewhere(tmp_path / "ours", tmp_path / "elsewhere", OTHER_MACHINE)

    def ci_gate(out: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return run_script("scripts/ci-gate.sh", str(elsewhere), str(tmp_path / out),
                          env={"SMOKE_SUITE": str(suite), **extra})  # fmt: skip

    # 20 times slower than the other machine's baseline, and correct: it passes, on
    # correctness and presence only, and says why performance was not compared.
    slower = ci_gate("slower")
    assert slower.returncode == 0, slower.stdout + slower.stderr
    last = slower.stdout.strip().splitlines()[-1]
    assert last.startswith("colbench gate: PASS on correctness and presence only: "), last
    assert "performance not comparable: the baseline's machine differs (cpu_model " in last
    # The same baseline with this machine's facts: the slowdown is judged, and fails.
    same = _measured_elsewhere(tmp_path / "ours", tmp_path / "here-faster", {})
    (run,) = (tmp_path / "slower").glob("run-*")
    code, out, _ = run_main(capsys, "gate", str(same), str(run), "--check", "busbw_gbps:-25%",
                            "--min-size", "4M")  # fmt: skip
    assert code == 1 and "! worse" in out, out

    # One wrong element: the other machine's baseline still fails the run.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_CORRUPTING_SITE)
    wrong = ci_gate("wrong", PYTHONPATH=f"{site}{os.pathsep}{REPO}")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "wrong element" in wrong.stdout and "performance not comparable" in wrong.stdout
