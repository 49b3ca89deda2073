"""The environment is checked before ranks start, with real ranks and real commands.

A launcher's world of one left in the shell (or a single-task Slurm step) yields to an
explicit --nprocs, which spawns its ranks and names the variables it ignored; a larger
world refuses --nprocs in one line. A GLOO_SOCKET_IFNAME gloo cannot use is one line,
exit 2, spawned or launched, instead of gloo's C++ enforce message and exit 3."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import run_colbench

QUICK = ["sweep", "--backend", "gloo", "--op", "all_reduce", "--sizes", "1K", "-n", "1",
         "-w", "0", "--no-table", "--no-progress"]  # fmt: skip
STALE_SHELL = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}  # fmt: skip
# `salloc -n 1` then `srun --pty bash`: the shell is task 0 of a step of one task.
ONE_TASK_STEP = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
                 "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
                 "SLURM_NNODES": "1", "SLURM_STEP_NODELIST": "localhost",
                 "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_NTASKS_PER_NODE": "1"}  # fmt: skip


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (STALE_SHELL, "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "
                      "MASTER_ADDR=127.0.0.1 MASTER_PORT=29500"),
        (ONE_TASK_STEP, "SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NTASKS_PER_NODE=1"),
    ],
    ids=["stale-shell", "one-task-step"],
)  # fmt: skip
def test_nprocs_beside_a_world_of_one_spawns_its_ranks_and_names_what_it_ignored(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    out = tmp_path / "run"
    proc = run_colbench(*QUICK, "--nprocs", "2", "--out", str(out), env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["world_size"], meta["launcher"]) == (2, "colbench-spawn")
    notes = [line for line in proc.stderr.splitlines() if "ignoring" in line]
    assert notes == [
        "colbench: note: --nprocs 2: spawning 2 ranks here, ignoring (and unsetting) the "
        f"launcher variables of a world of one: {named}"
    ]


@pytest.mark.parametrize(
    "env",
    [STALE_SHELL | {"WORLD_SIZE": "2"}, ONE_TASK_STEP | {"SLURM_NTASKS": "2"}],
    ids=["env", "srun"],
)
def test_nprocs_beside_a_larger_world_is_refused_before_anything_starts(
    tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = run_colbench(*QUICK, "--nprocs", "2", "--out", str(out), env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("colbench: error: --nprocs 2 asks colbench to start the ranks")
    assert "rank 0 of 2" in lines[0] and "drop --nprocs" in lines[0]
    assert not out.exists()
    # Refused before any rank or rendezvous: no --init-timeout to wait out.
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("launched", [False, True], ids=["spawned", "launched"])
def test_a_socket_interface_that_does_not_exist_is_one_line_before_any_rank(
    tmp_path: Path, launched: bool
) -> None:
    out = tmp_path / "run"
    env = {"GLOO_SOCKET_IFNAME": "nosuch0"}
    if launched:
        env |= {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500"}  # fmt: skip
    args = [*QUICK, "--out", str(out)] + ([] if launched else ["--nprocs", "2"])
    started = time.monotonic()
    proc = run_colbench(*args, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    prefix = "colbench: error: " + ("rank 1: " if launched else "")
    said = "GLOO_SOCKET_IFNAME=nosuch0: no interface nosuch0 on this host (interfaces with"
    assert lines[0].startswith(f"{prefix}{said} an address here: "), lines[0]
    assert re.search(r"here: (.*, )?lo[,)]", lines[0]), lines[0]
    assert not out.exists()
    # Refused before the rendezvous: nothing waits for the (absent) rank 0.
    assert time.monotonic() - started < 60
