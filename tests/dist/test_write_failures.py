"""Writes that fail for real: a file-size limit, a run directory renamed mid-run, a full
filesystem. Each ends in exit 6 and one line naming the file, with the rows already
written still readable (issue 34)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from colbench.results.rows import load
from tests.conftest import REPO, call_colbench
from tests.dist.test_failures import start, wait_for_rows

pytestmark = pytest.mark.dist

SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1K-256K", "-n", "5", "-w", "1", "--no-table"]


def _errors(stderr: str) -> list[str]:
    """The lines that say what failed (a failure the parent reports has no "error:")."""
    return [
        line.replace("colbench: error: ", "colbench: ", 1)
        for line in stderr.splitlines()
        if "cannot write" in line
    ]


def _limited(limit_bytes: int) -> None:
    # The kernel stops a write past RLIMIT_FSIZE with SIGXFSZ unless it is ignored; then
    # the write fails with EFBIG, as it would on a quota. Both carry over to the ranks.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))


def test_a_results_file_that_cannot_grow_is_exit_6_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # meta.json (about 4.5 KB) fits; results.csv outgrows it after about 20 rows.
    proc = subprocess.run(
        [sys.executable, "-m", "colbench", *SWEEP, "--repeat", "3", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=lambda: _limited(6000),
        check=False,
    )
    assert proc.returncode == 6, proc.stderr
    assert _errors(proc.stderr) == [
        f"colbench: cannot write {out / 'results.csv'}: File too large"
    ], proc.stderr
    assert "measured before the failure (of 27 planned)" in proc.stderr
    assert "Traceback" not in proc.stderr
    frame = load(out)  # every whole row stays readable; a torn last one is dropped
    assert 5 <= len(frame) < 33 and (frame["status"] == "ok").all()


def _move_after_rows(out: Path, moved: Path, rows: int, ended: threading.Event) -> None:
    """Renames ``out`` to ``moved`` once its results.csv has ``rows`` rows, unless the run
    has ``ended`` first (then ``moved`` never exists)."""
    table = out / "results.csv"
    deadline = time.monotonic() + 120
    while not ended.is_set() and time.monotonic() < deadline:
        if table.exists() and table.read_text().count("\n") >= 1 + rows:
            pids = [int(p) for p in json.loads((out / "meta.json").read_text())["rank_pids"]]
            # Held still while the directory moves, so the rename falls between two rows.
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            try:
                out.rename(moved)
            finally:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            return
        time.sleep(0.05)


def test_a_run_directory_renamed_mid_run_is_exit_6_and_keeps_its_rows(tmp_path: Path) -> None:
    out, moved = tmp_path / "run", tmp_path / "moved"
    ended = threading.Event()
    mover = threading.Thread(target=_move_after_rows, args=(out, moved, 2, ended))
    mover.start()
    # In-process (no interpreter start): nothing signals the parent; the ranks it forks
    # are held still from the thread as they were from outside.
    try:
        proc = call_colbench(*SWEEP, "--sizes", "1K-4M", "--repeat", "2", "--out", str(out))
    finally:
        ended.set()
        mover.join()
    stderr = proc.stderr
    assert moved.exists(), "the run ended before its directory moved: " + stderr
    assert proc.returncode == 6, stderr
    lines = _errors(stderr)
    assert lines and all(line.startswith(f"colbench: cannot write {out}/") for line in lines)
    assert "renamed" in lines[-1]
    frame = load(moved)
    assert len(frame) >= 2


def test_a_signal_keeps_its_exit_code_when_the_last_write_fails(tmp_path: Path) -> None:
    """SIGTERM with the run directory gone: 143, as the job expects, and one line saying
    the end could not be recorded."""
    out, moved = tmp_path / "run", tmp_path / "moved"
    proc = start(out, "--sizes", "1K-4M", "--repeat", "2")
    pids = wait_for_rows(out, 2, proc)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        out.rename(moved)
        proc.send_signal(signal.SIGTERM)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "the run's end is not recorded in meta.json" in stderr
    assert "Traceback" not in stderr
    assert len(load(moved)) >= 2


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare for a private tmpfs",
)
def test_a_full_filesystem_is_exit_6_naming_the_file(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    command = " ".join(
        [sys.executable, "-m", "colbench", *SWEEP, "--repeat", "3", "--out", str(small / "run")]
    )
    script = f"mount -t tmpfs -o size=16k tmpfs {small} && {command}; code=$?; "
    script += f"cat {small}/run/results.csv > {tmp_path}/kept.csv; exit $code"
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 6, proc.stderr
    # Whichever file fills the disk (results.csv, or meta.json's last replacement, which
    # needs room for the old and the new) is named; meta.json may fail to record the end.
    lines = _errors(proc.stderr)
    assert lines, proc.stderr
    for line in lines:
        assert line.startswith(f"colbench: cannot write {small}/run/"), line
        assert "No space left on device" in line, line
    assert "Traceback" not in proc.stderr
    kept = (tmp_path / "kept.csv").read_text().splitlines()
    assert len(kept) > 5


def test_p2p_keeps_every_finished_pass_when_stopped(tmp_path: Path) -> None:
    """p2p writes each pass's rows as it is measured: a SIGTERM part way keeps them."""
    out = tmp_path / "run"
    args = ["p2p", "--nprocs", "2", "--backend", "gloo", "--size", "4M", "-n", "20", "-w", "1",
            "--repeat", "200", "--no-plot", "--no-progress", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "colbench", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    table = out / "p2p.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if table.exists() and table.read_text().count("\n") >= 1 + 2 * 2:  # two passes
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    rows = table.read_text().splitlines()[1:]
    assert len(rows) >= 4 and len(rows) % 2 == 0  # whole passes of the 2 ordered pairs
