"""Launched ranks started with different flags get one clear error, never a hang.

Each flag here changes the sequence of collectives a rank calls (--time-budget adds an
agreement and a second batch, --memory-check off drops the budget agreement,
--rotate changes allocations, --repeat the number of passes). The plan digest covers
them and is compared in the very first collective, before the memory budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from colbench.launch import free_port
from tests.conftest import REPO


def _launch_two(tmp_path: Path, rank1_flags: list[str]) -> list[tuple[int, str]]:
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        cmd = [sys.executable, "-m", "colbench", "sweep", "--sizes", "1K,4K", "--no-table"]
        cmd += ["--timeout", "20", "--out", str(tmp_path / "run")]
        cmd += rank1_flags if rank == 1 else []
        procs.append(
            subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
            )
        )
    results = []
    for proc in procs:
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        results.append((proc.returncode, stderr))
    return results


@pytest.mark.parametrize(
    "flags",
    [
        ["--time-budget", "0.01"],
        ["--memory-check", "off"],
        ["--rotate", "2"],
        ["--repeat", "2"],
    ],
)
def test_ranks_with_different_flags_are_told_so(tmp_path: Path, flags: list[str]) -> None:
    started = time.monotonic()
    results = _launch_two(tmp_path, flags)
    assert time.monotonic() - started < 50
    for code, stderr in results:
        assert code == 2, stderr[-2000:]
        assert "ranks disagree on the sweep: rank(s) 1" in stderr, stderr[-2000:]
