"""sweep --init-only: communicator set-up as init.csv's rows.

On real gloo ranks, torch's set-up is real: a new group's connections and its first
call, timed in every rank. The direct engine's set-up (NCCL's unique-id bootstrap and
ncclCommInitRank) runs on fake GPUs with the recording nccl4py (tests/fakegpu,
tests/fakenccl), whose records show one communicator made and destroyed per rank and
repeat, and the free-memory readings taken around each.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path

import pytest

from colbench.results import load
from colbench.results.init_rows import load_init
from tests.conftest import call_colbench
from tests.fakegpu import FAKE_GPU, REPO, gpu, run_on_fake_gpus
from tests.fakenccl import FAKE_NCCL, records

pytestmark = pytest.mark.dist


def test_torch_group_setup_on_gloo_is_timed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = call_colbench(
        *("sweep", "--backend", "gloo", "--nprocs", "2", "--init-only", "--repeat", "3"),
        *("--out", str(run)),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    frame = load_init(run)
    assert list(frame["repeat"]) == [0, 1, 2]
    assert set(frame["engine"]) == {"torch"} and set(frame["backend"]) == {"gloo"}
    assert set(frame["world_size"]) == {2} and set(frame["device"]) == {"cpu"}
    for row in frame.to_dict("records"):
        # A gloo group's connections take real time: well above a clock's resolution.
        assert row["create_us"] > 10 and row["first_call_us"] > 1
        assert row["init_us"] >= row["init_ranks_avg_us"] > 0
        assert row["slowest_rank"] in (0, 1)
        assert math.isnan(row["device_mem_bytes"])  # no GPU: not measured, not 0
    # No collective was measured: results.csv holds its header only.
    assert load(run).empty
    assert "3 communicator set-ups in" in done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("  torch")]
    assert len(table) == 3 and "communicator set-up (--init-only) on gloo" in done.stdout


def test_direct_engine_setup_is_nccls_init_on_fake_gpus(tmp_path: Path) -> None:
    nccl_dir = tmp_path / "nccl"
    nccl_dir.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join(map(str, (FAKE_GPU, FAKE_NCCL, REPO))),
        "COLBENCH_FAKE_NCCL_DIR": str(nccl_dir),
    }
    out = tmp_path / "run"
    args = ("sweep", "--engine", "nccl", "--init-only", "--repeat", "2", "--out", str(out))
    run = run_on_fake_gpus(tmp_path, [gpu(0), gpu(1)], *args, env=env)
    assert run.returncode == 0, run.stderr
    calls = records(nccl_dir)
    made = [c for c in calls if c["call"] == "get_unique_id"]
    inits = [c for c in calls if c["call"] == "comm_init"]
    # One id per repeat, made by rank 0 and carried to both ranks; each communicator
    # destroyed before the next is made; no buffer allocated, no collective called.
    assert len(made) == 2 and sorted(c["id"] for c in inits) == sorted(2 * [m["id"] for m in made])
    assert Counter(c["call"] for c in calls) == {
        "get_unique_id": 2,
        "comm_init": 4,
        "comm_destroy": 4,
    }
    # Free memory read before and after each rank's set-up (and for the plan's budget).
    assert len(run.calls("mem_get_info", role="rank")) >= 2 * 2 * 2
    frame = load_init(out)
    assert list(frame["repeat"]) == [0, 1] and set(frame["engine"]) == {"nccl"}
    assert set(frame["device"]) == {"Fake H100"}
    # The fake GPU's free memory never changes: 0 bytes taken, measured (not empty).
    assert list(frame["device_mem_bytes"]) == [0, 0]
    assert frame["first_call_us"].isna().all()  # NCCL's init is eager: no first call
    assert (frame["init_us"] == frame["create_us"]).all() and (frame["init_us"] > 0).all()
