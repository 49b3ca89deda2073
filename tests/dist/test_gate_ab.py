"""scripts/gate-ab.sh, the interleaved A/B gate CI runs on a pull request (`make gate-ab`).

The base's environment is the one thing faked here: building it is `make install` of
another commit (minutes of pip), so the test puts a ready one where the script keeps it
(OUT_DIR/base-<sha>/.venv, marked installed), an interpreter wrapper around this one.
Everything else is real: the probe, the interleaved run of both interpreters taking
turns, the paired gate, the job summary; and a base that speaks another turn protocol,
as an older colbench would, is no verdict and says so.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_script

REPO = Path(__file__).resolve().parents[2]
# 20 calls per pair and 10 pairs: with 3 calls and 6 pairs one fresh-clone make test saw
# pairs so scattered (a 99% detectable slowdown) that the gate could not judge a 90% limit.
SUITE = """\
op: all_reduce
sizes: [64K]
backend: gloo
nprocs: 2
iters: 20
warmup: 1
repeat: 10
"""


def _head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def _base_env(out: Path, sha: str, pythonpath: Path | None = None) -> None:
    """A ready environment for the base: a wrapper around this interpreter."""
    venv = out / f"base-{sha[:12]}" / ".venv"
    (venv / "bin").mkdir(parents=True)
    path = f"PYTHONPATH={pythonpath} " if pythonpath else ""
    wrapper = venv / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\n{path}exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    (venv / ".installed").touch()


def _gate_ab(tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "ab.yaml"
    suite.write_text(SUITE)
    env = {
        "AB_SUITE": str(suite),
        "AB_CHECK": "busbw_gbps:-90%",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        # No stored baseline to fall back on: the workflow's stored gate is a step of its own.
        "STORED_BASELINE": "",
    }
    return run_script("scripts/gate-ab.sh", "HEAD", str(out), env=env)


def test_the_base_and_this_checkout_run_interleaved_and_the_paired_gate_judges(
    tmp_path: Path,
) -> None:
    sha = _head()
    out = tmp_path / "ab-out"
    _base_env(out, sha)
    proc = _gate_ab(tmp_path, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert re.match(r"paired gate passed: 0 failure\(s\) of 1 row[;:]", last), proc.stdout
    assert "sensitive to slowdowns >= " in last
    variants = (out / "ab" / "meta.json").read_text()
    assert str(out / f"base-{sha[:12]}" / ".venv" / "bin" / "python") in variants
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith(f"### Interleaved A/B gate: this checkout against `{sha[:12]}`")
    assert f"## ✅ {last}" in summary
    assert (out / "gate-ab.md").read_text().startswith(f"## ✅ {last}")


def test_a_base_that_cannot_take_turns_is_no_verdict(tmp_path: Path) -> None:
    # The base's colbench speaks another turn protocol, as another version would.
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(
        "import colbench.host.turns as t\nt.PROTOCOL_VERSION = 99\n"
    )
    sha = _head()
    out = tmp_path / "ab-out"
    _base_env(out, sha, pythonpath=patch)
    proc = _gate_ab(tmp_path, out)
    # No stored baseline to fall back on: it says so and passes nothing off as a verdict.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot run interleaved with this checkout" in proc.stderr
    assert "turn protocol v99" in proc.stderr
    assert not (out / "ab").exists() and not (out / "gate-ab.txt").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("### Interleaved A/B gate: not run")
    assert "Performance is judged by the stored-baseline gate only" in summary
