"""Rank start-up: ranks are forked before any thread of colbench exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

QUICK = ["sweep", "--backend", "gloo", "--op", "all_reduce", "--sizes", "1K", "-n", "1",
         "-w", "0", "--no-table", "--no-progress"]  # fmt: skip
#: Hard limit for one command: a start-up that hangs must fail the test, not the session.
HARD_TIMEOUT_S = 120


_RECORD_THREADS_AT_FORK = textwrap.dedent(
    """
    import json, os, sys
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
