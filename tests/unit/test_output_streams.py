"""Losing stdout is an exit code, never a traceback (colbench/output.py): a reader that
stops early (``| head``) is exit 141 without a word, a full disk or a closed stream one
line and exit 2; names from a trace print on an ASCII-only stdout, and go into the
suites replay writes even when they are not UTF-8 on disk. Shown through
``colbench replay --dry-run``, whose only product is its stdout; each runs colbench as a
process, since what matters is the real stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.unit.replay_traces import param_trace


def _colbench(
    *args: str, stdout: Any = subprocess.PIPE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args],
        stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
        env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip


@pytest.fixture
def plan_file(tmp_path: Path) -> str:
    path = tmp_path / "param.json"
    # A name no ASCII stdout can print, with a newline and a terminal escape in it.
    trace = param_trace() + param_trace(comms="frob\u00e9\n\x1b[31m")
    path.write_text(json.dumps(trace))
    return str(path)


def test_a_reader_that_stops_early_is_exit_141_without_a_word(plan_file: str) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before colbench writes: `| head` that ended
    try:
        proc = _colbench("replay", plan_file, "--dry-run", stdout=write)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.parametrize("stdout", ["/dev/full", "closed"])
def test_stdout_that_cannot_be_written_is_one_line(plan_file: str, stdout: str) -> None:
    if stdout == "closed":  # `>&-`: Python's sys.stdout is then None
        cmd = ["sh", "-c", '"$0" -m colbench replay "$1" --dry-run >&-', sys.executable, plan_file]
        proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    else:
        with open(stdout, "w") as full:
            proc = _colbench("replay", plan_file, "--dry-run", stdout=full)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("colbench: error: cannot write to standard output: ")


def test_trace_names_print_on_an_ascii_stdout(plan_file: str) -> None:
    proc = _colbench("replay", plan_file, "--dry-run", env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert "  frob\\xe9\\n\\x1b[31m 16 float32 x2 ranks: 1 call:" in proc.stdout


def test_a_suite_names_traces_whose_names_are_not_utf8() -> None:
    from colbench.commands.replay import command as report

    sweep = report.Sweep("01-all_reduce", {"op": "all_reduce", "sizes": "16", "nprocs": 2}, ())
    # A file name of latin-1 bytes reaches Python as a surrogate (os.fsdecode).
    text = report.suite_yaml(sweep, os.fsdecode(b"rank\xe9.json") + ", a\nb.json")
    assert "# Replayed from rank\\udce9.json, a\\nb.json by colbench replay" in text
    text.encode("utf-8")
