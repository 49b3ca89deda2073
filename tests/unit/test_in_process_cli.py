"""conftest.call_colbench answers as run_colbench's real process does, and leaves the
calling process as it found it: the dist tests that call the CLI in-process rely on both."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import call_colbench, run_colbench


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("sweep", "--backend", "nccl"), ("gate", "no-such-baseline", "no-such-run")],
)
def test_an_in_process_call_answers_as_the_process_does(argv: tuple[str, ...]) -> None:
    real, called = run_colbench(*argv, timeout=120), call_colbench(*argv)
    assert (called.returncode, called.stdout, called.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_the_call_leaves_environment_directory_and_streams_as_they_were(tmp_path: Path) -> None:
    before = (dict(os.environ), os.getcwd(), sys.stdout, sys.stderr)
    proc = call_colbench("--help", env={"COLBENCH_TEST_MARK": "1"}, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout
    assert (dict(os.environ), os.getcwd(), sys.stdout, sys.stderr) == before


def test_merged_output_keeps_stderr_in_stdout() -> None:
    proc = call_colbench("sweep", "--backend", "nccl", merged=True)
    assert proc.returncode == 2 and "colbench: error" in proc.stdout and proc.stderr == ""
