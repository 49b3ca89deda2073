"""Rank start-up: forked before any thread of colbench exists, and a rank that never
starts is named within --init-timeout as a start-up failure, not a collective's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from colbench.host.supervise import STARTUP_GRACE_S
from tests.conftest import REPO

QUICK = ["sweep", "--backend", "gloo", "--op", "all_reduce", "--sizes", "1K", "-n", "1",
         "-w", "0", "--no-table", "--no-progress"]  # fmt: skip
#: Hard limit for one command: a start-up that hangs must fail the test, not the session.
HARD_TIMEOUT_S = 120


def run_hung_start(out: Path, nprocs: int, hung_rank: int, init_timeout_s: float):
    """Run a sweep whose ``hung_rank`` never starts; returns (process, stderr, seconds)."""
    cmd = [sys.executable, "-m", "colbench", *QUICK, "--nprocs", str(nprocs)]
    cmd += ["--init-timeout", f"{init_timeout_s:g}", "--out", str(out)]
    env = {**os.environ, "COLBENCH_FAULT": f"{hung_rank}:start:hang"}
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"the start-up hung for {HARD_TIMEOUT_S} s") from None
    return proc, stderr, time.monotonic() - started


def processes_of(out: Path) -> list[int]:
    """Live processes whose command line names the run directory (forked ranks keep it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(out) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def assert_start_up_verdict(stderr: str, rank: int, nprocs: int, init_timeout_s: float) -> float:
    """The one line names the rank and says start-up; returns the seconds it reports."""
    assert "Traceback" not in stderr, stderr
    assert "collective" not in stderr.replace("before any collective", ""), stderr
    lines = [line for line in stderr.splitlines() if "start-up failed" in line]
    assert len(lines) == 1, stderr
    pattern = (
        rf"rank\(s\) {rank} \(pid \d+\) never joined the rendezvous within "
        rf"--init-timeout {init_timeout_s:g} s \({nprocs - 1} of {nprocs} ranks joined; "
        r"stopped after ([\d.]+) s"
    )
    found = re.search(pattern, lines[0])
    assert found is not None, lines[0]
    return float(found.group(1))


@pytest.mark.serial  # its reported stop time is bounded to the second
def test_a_rank_that_never_starts_is_named_within_init_timeout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    init_timeout_s = 5.0
    proc, stderr, elapsed_s = run_hung_start(out, nprocs=4, hung_rank=3, init_timeout_s=5)
    assert proc.returncode == 4, stderr
    stopped_s = assert_start_up_verdict(stderr, 3, 4, init_timeout_s)
    # The ranks that arrived time out in the rendezvous and the parent stops at once (or
    # its own deadline does, when this busy machine delays them); +1 s for the stopping.
    assert init_timeout_s <= stopped_s <= init_timeout_s + STARTUP_GRACE_S + 1, stderr
    # Plus the parent's own start (importing torch), generous on a busy 2-core machine.
    assert elapsed_s < init_timeout_s + STARTUP_GRACE_S + 30
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["status"], meta["failed_rank"], meta["exit_code"]) == ("failed", 3, 4)
    assert processes_of(out) == [], "a rank outlived its run"


@pytest.mark.serial  # its reported stop time is bounded to the second
def test_when_no_rank_checks_in_the_parent_stops_the_start_up(tmp_path: Path) -> None:
    # No rank reaches the rendezvous, so none can time out there: only the parent's
    # own deadline ends this start-up.
    out = tmp_path / "run"
    init_timeout_s = 3.0
    proc, stderr, _ = run_hung_start(out, nprocs=1, hung_rank=0, init_timeout_s=init_timeout_s)
    assert proc.returncode == 4, stderr
    stopped_s = assert_start_up_verdict(stderr, 0, 1, init_timeout_s)
    assert init_timeout_s + STARTUP_GRACE_S <= stopped_s <= init_timeout_s + STARTUP_GRACE_S + 2
    assert processes_of(out) == [], "a rank outlived its run"


_RECORD_THREADS_AT_FORK = textwrap.dedent(
    """
    import json, os, sys
    import torch.distributed  # its import's own threads are not colbench's (see below)
    from colbench.cli import main

    def threads():
        return {t: open(f"/proc/self/task/{t}/comm").read().strip()
                for t in os.listdir("/proc/self/task")}

    before_run = set(threads())
    started_since = []

    def record():
        started_since.append(sorted(n for t, n in threads().items() if t not in before_run))

    os.register_at_fork(before=record)
    try:
        main(sys.argv[2:])
    except SystemExit as exc:
        code = exc.code
    with open(sys.argv[1], "w") as f:
        json.dump({"code": code, "threads_at_fork": started_since}, f)
    """
)


def test_ranks_are_forked_before_colbench_starts_any_thread(tmp_path: Path) -> None:
    # A child forked while another thread holds a lock inherits the lock, held by a thread
    # it does not have. Threads of torch's import are not colbench's to avoid (the one
    # OpenBLAS starts stops itself at fork); the store's server thread was.
    script, record = tmp_path / "record.py", tmp_path / "record.json"
    script.write_text(_RECORD_THREADS_AT_FORK)
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(script), str(record), *QUICK, "--nprocs", "4", "--out", str(out)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=HARD_TIMEOUT_S, check=False,
    )  # fmt: skip
    result = json.loads(record.read_text())
    assert result["code"] in (0, None), done.stderr
    assert len(result["threads_at_fork"]) == 4, result
    assert result["threads_at_fork"] == [[]] * 4, result
