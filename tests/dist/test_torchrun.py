"""colbench under a real external launcher (torchrun), and a rendezvous that never completes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from colbench.host.launchers.rendezvous import free_port
from colbench.results.rows import COLUMNS, load
from tests.conftest import REPO


def test_torchrun_two_ranks_give_the_rows_of_a_spawned_run(tmp_path: Path) -> None:
    out, logs = tmp_path / "run", tmp_path / "logs"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "--log-dir", str(logs), "--redirects", "3",
        "-m", "colbench", "sweep", "--op", "all_reduce,all_gather,broadcast",
        "--sizes", "1K-64K", "-n", "3", "-w", "1", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=180, env=env, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = load(out)
    # Exactly the schema a spawned run writes (tests/dist/test_sweep.py checks those).
    assert list(frame.columns) == list(COLUMNS)
    assert (frame["wrong"] == 0).all()
    assert set(frame["world_size"]) == {2} and set(frame["nnodes"]) == {1}
    assert set(frame["groups"]) == {1} and set(frame["group_size"]) == {2}
    # 7 sizes: all_reduce and broadcast in place only, all_gather both placements.
    assert len(frame) == 7 * 4
    meta = json.loads((out / "meta.json").read_text())
    assert meta["launcher"] == "torchrun" and meta["status"] == "complete"
    assert (meta["world_size"], meta["nnodes"], meta["local_world_size"]) == (2, 1, 2)
    # Rank 0 speaks; rank 1 prints nothing at all on success.
    by_rank: dict[int, str] = {}
    for path in logs.rglob("*.log"):  # <log-dir>/<run>/attempt_0/<rank>/std{out,err}.log
        by_rank[int(path.parent.name)] = by_rank.get(int(path.parent.name), "") + path.read_text()
    assert set(by_rank) == {0, 1}
    assert by_rank[1] == ""
    assert "# Wrong elements       : 0 OK" in by_rank[0]


def test_a_rendezvous_that_never_completes_ends_within_init_timeout(tmp_path: Path) -> None:
    # Ranks 0 and 1 of a world of 3; rank 2 never comes.
    port = free_port()
    init_timeout_s = 3
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "RANK": str(rank),
            "WORLD_SIZE": "3",
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        cmd = [sys.executable, "-m", "colbench", "sweep", "--sizes", "1K", "--out"]
        cmd += [str(tmp_path / "run"), "--init-timeout", str(init_timeout_s)]
        procs.append(
            subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
            )
        )
    started = time.monotonic()
    results = [p.communicate(timeout=90) for p in procs]
    elapsed_s = time.monotonic() - started
    # Far below the default 120 s: the flag bounded it (start-up of torch is the rest).
    assert elapsed_s < 60
    for proc, (stdout, stderr) in zip(procs, results, strict=True):
        # A start-up that never completes is a timeout (exit 4), as for spawned ranks.
        assert proc.returncode == 4, stderr
        line = stderr.strip().splitlines()[-1]
        assert line.startswith("colbench: error: rank ")
        # colbench's line is what the user reads: no torch socket warning ahead of it
        # ("[c10d] waitForInput ... timed out" once printed first).
        assert all(other.startswith("colbench: ") for other in stderr.splitlines()), stderr
        assert f"start-up failed: rendezvous of 3 ranks at 127.0.0.1:{port}" in line
        took = re.search(r"did not complete after (\d+) s \(--init-timeout 3 s\)", line)
        # Rounded to whole seconds, and this 2-core machine is often busy.
        assert took is not None and int(took.group(1)) <= init_timeout_s + 2, line
        assert stdout == ""
    # Rank 0 hosts the store, so it can always say who is missing; rank 1 can too,
    # unless rank 0 gave up first and took the store with it.
    assert "2 of 3 ranks arrived, missing rank(s) 2" in results[0][1]
    assert any(why in results[1][1] for why in ("missing rank(s) 2", "the store went away")), (
        results[1][1]
    )
