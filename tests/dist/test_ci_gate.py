"""scripts/ci-gate.sh as CI runs it, twice on a fresh runner: no baseline, then judged."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from colbench.store.results import load
from tests.conftest import run_script

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
    assert "Holm over the 1 rows judged" in report
    assert "sensitive" in report.splitlines()[-1] or "too noisy" in report.splitlines()[-1]
    # Both accepted runs now pool in the baseline's window.
    assert load(tmp_path / "baseline")["run_id"].nunique() == 2
