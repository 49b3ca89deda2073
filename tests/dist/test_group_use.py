"""The measured group carries only the measured collective (issue: the NCCL path).

Every run here goes through the real CLI with real gloo ranks, with a spy on
torch.distributed (tests/spy/sitecustomize.py) that records the group of every call
in every process. The rule, the same on every backend: calls on the measured group
(the world group, or the subgroups of --group-size) are the measured op's own torch
calls, made while that op is in flight; every other call (barriers, agreement on the
plan and the memory budget, gathering times and wrong counts) goes over the gloo side
group colbench makes at start-up. On NCCL, bookkeeping on the measured communicator
would be timed with it and would fail under NCCL_ALGO=Tree, which has no all_gather.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from colbench.host.watchdog import process_group_timeout_s
from colbench.results.rows import load
from tests.conftest import REPO

SPY = REPO / "tests" / "spy"

#: The torch.distributed functions each op's measured call may use.
OWN_CALLS = {
    "all_reduce": {"all_reduce"},
    "all_gather": {"all_gather_single", "all_gather_into_tensor"},
    "reduce_scatter": {"reduce_scatter_single", "reduce_scatter_tensor"},
    "broadcast": {"broadcast"},
    "reduce": {"reduce"},
    "all_to_all": {"all_to_all_single"},
    "all_to_allv": {"all_to_all_single"},
    "gather": {"gather"},
    "scatter": {"scatter"},
    "sendrecv": {"batch_isend_irecv"},
    "barrier": {"barrier"},
}
ALL_OPS = set(OWN_CALLS)


def _spied(cmd: list[str], spy_dir: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    spy_dir.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": f"{SPY}{os.pathsep}{REPO}",
        "COLBENCH_SPY_DIR": str(spy_dir),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO, check=False, **kwargs
    )


def _colbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "colbench", "sweep", "--no-table", *args]


def _records(spy_dir: Path) -> list[dict[str, Any]]:
    lines = [line for f in spy_dir.glob("*.jsonl") for line in f.read_text().splitlines()]
    return [json.loads(line) for line in lines]


def assert_measured_group_carries_only_the_op(
    spy_dir: Path, ops: set[str], subgroups: bool = False, timeout_s: float | None = None
) -> None:
    records = _records(spy_dir)
    made = [r for r in records if r["fn"] == "new_group"]
    calls = [r for r in records if r["fn"] != "new_group"]
    side = {r["group"] for r in made if r["backend"] == "gloo" and r["ranks"] is None}
    split = {r["group"] for r in made if r["ranks"] is not None}
    measured = split if subgroups else {"WORLD"}
    on_measured = [r for r in calls if r["group"] in measured]
    intruders = [
        r for r in on_measured if r["op"] is None or r["fn"] not in OWN_CALLS.get(r["op"], ())
    ]
    assert not intruders, f"bookkeeping on the measured group: {intruders[:5]}"
    assert side, "no side group was made"
    assert measured and not measured & side
    elsewhere = [r for r in calls if r["group"] not in measured]
    assert elsewhere, "no bookkeeping seen at all"
    stray = [r for r in elsewhere if r["group"] not in side]
    assert not stray, f"calls outside the measured and side groups: {stray[:5]}"
    assert {r["op"] for r in on_measured} == ops
    # Every group gets --timeout (plus the margin that lets colbench's hang watchdog
    # report first), never torch's own default (10 minutes on NCCL).
    group_timeout_s = None if timeout_s is None else process_group_timeout_s(timeout_s)
    if subgroups:
        # With --group-size the world group exists but carries nothing at all.
        assert not [r for r in calls if r["group"] == "WORLD"]
        assert {r["timeout_s"] for r in made if r["ranks"] is not None} == {group_timeout_s}
    if timeout_s is not None:
        assert {r["timeout_s"] for r in made if r["group"] in side} == {group_timeout_s}


def test_every_op_with_repeat_rotate_time_budget_and_variants(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _spied(
        _colbench(
            "--op", "all", "--sizes", "1K-4K", "--nprocs", "2", "-n", "2", "-w", "1",
            "--repeat", "2", "--rotate", "2", "--time-budget", "0.002",
            "--memory-check", "refuse", "--env", "COLBENCH_SPY_VARIANT=a,b",
            "--timeout", "77", "--out", str(out),
        ),
        tmp_path / "spy",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = load(out)
    assert set(frame["variant"]) == {"COLBENCH_SPY_VARIANT=a", "COLBENCH_SPY_VARIANT=b"}
    assert (frame["wrong"].fillna(0) == 0).all()
    assert_measured_group_carries_only_the_op(tmp_path / "spy", ALL_OPS, timeout_s=77)


def test_subgroups_without_check_and_memory_check_off(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _spied(
        _colbench(
            "--op", "all", "--sizes", "1K,4K", "--nprocs", "4", "--group-size", "2",
            "-n", "2", "-w", "1", "-c", "0", "--memory-check", "off", "--timeout", "66",
            "--out", str(out),
        ),
        tmp_path / "spy",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(load(out)["groups"]) == {2}
    assert_measured_group_carries_only_the_op(
        tmp_path / "spy", ALL_OPS, subgroups=True, timeout_s=66
    )


def test_the_out_of_memory_agreement(tmp_path: Path) -> None:
    limit = 2500 * 2**20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    out = tmp_path / "run"
    proc = _spied(
        _colbench(
            "--op", "all_reduce", "--sizes", "1M,2G", "-n", "2", "-w", "1",
            "--memory-check", "off", "--out", str(out),
        ),
        tmp_path / "spy",
        preexec_fn=cap,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert set(load(out)["status"]) == {"ok", "oom"}
    assert_measured_group_carries_only_the_op(tmp_path / "spy", {"all_reduce"})


def test_launched_by_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "colbench", "sweep", "--no-table", "--op", "all_reduce,all_gather,sendrecv,barrier",
        "--sizes", "1K,8K", "-n", "2", "-w", "1", "--out", str(out),
    ]  # fmt: skip
    proc = _spied(cmd, tmp_path / "spy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (load(out)["wrong"].fillna(0) == 0).all()
    assert_measured_group_carries_only_the_op(
        tmp_path / "spy", {"all_reduce", "all_gather", "sendrecv", "barrier"}
    )


def test_the_spy_catches_bookkeeping_on_the_measured_group(tmp_path: Path) -> None:
    """The check itself can fail: a barrier on the world group during an op is caught."""
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir()
    rows: list[Callable[[], dict[str, Any]]] = [
        lambda: {"fn": "new_group", "group": "1", "ranks": None, "backend": "gloo", "timeout_s": 1},
        lambda: {"fn": "all_reduce", "group": "WORLD", "backend": "gloo", "op": "all_reduce"},
        lambda: {"fn": "all_reduce", "group": "1", "backend": "gloo", "op": "all_reduce"},
        lambda: {"fn": "barrier", "group": "WORLD", "backend": "gloo", "op": "all_reduce"},
    ]
    (spy_dir / "1.jsonl").write_text("".join(json.dumps(r()) + "\n" for r in rows))
    with pytest.raises(AssertionError, match="bookkeeping on the measured group"):
        assert_measured_group_carries_only_the_op(spy_dir, {"all_reduce"})
