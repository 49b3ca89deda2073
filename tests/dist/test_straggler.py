"""A rank starved of CPU is named as the straggler; a uniform run names none.

Two ranks in two network namespaces joined by a veth pair (tests/netns.py: one rank
per "node", launched mode, as under a real launcher on two hosts). In the first run
rank 1's process sits in a cgroup of its own whose CPU quota is cut to 20% once the
run has started (so its start-up is not slowed too); the second run is the same
without a quota. Skipped, with the reason, where namespaces or cgroups cannot be made.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from colbench.results import load
from colbench.skew import PER_RANK
from tests import cgroups, netns

SWEEP = ["--op", "all_reduce,all_gather,reduce_scatter", "--sizes", "1K-64K", "-n", "10"]
SWEEP += ["--repeat", "2", "--backend", "gloo", "--per-rank"]
#: all_reduce in place, all_gather and reduce_scatter in both placements, 7 sizes, 2 repeats.
ROWS = (7 + 2 * 7 + 2 * 7) * 2
#: 1 ms of CPU in every 10 ms: the rank stalls for 9 ms whenever its share runs out.
QUOTA_US, PERIOD_US = 1_000, 10_000
STRAGGLER_LINE = "# Straggler            : "

_reason = netns.unavailable() or cgroups.unavailable()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"cannot run: {_reason}")


@pytest.fixture(scope="module")
def pair() -> Iterator[netns.VethPair]:
    with netns.veth_pair("s") as made:
        yield made


def _sweep(
    pair: netns.VethPair, out: Path, group: cgroups.CpuGroup | None
) -> tuple[Any, dict[str, Any]]:
    """The sweep, with rank 1 in ``group`` (limited as soon as meta.json exists)."""
    done: dict[str, Any] = {}

    def run() -> None:
        procs = {1: group.procs} if group else None
        done["proc"] = pair.sweep(SWEEP, out, timeout_s=120, cgroup_procs=procs)

    worker = threading.Thread(target=run)
    worker.start()
    if group is not None:
        # Rank 0 writes meta.json after the rendezvous, before the first row.
        while worker.is_alive() and not (out / "meta.json").exists():
            time.sleep(0.01)
        group.limit(QUOTA_US, PERIOD_US)
    worker.join()
    proc = done["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "meta.json").read_text())


def _straggler_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith(STRAGGLER_LINE)]
    assert len(lines) <= 1
    return lines[0] if lines else ""


def test_a_rank_starved_of_cpu_is_named_and_a_uniform_run_names_none(
    pair: netns.VethPair, tmp_path: Path
) -> None:
    with cgroups.cpu_group("s") as group:
        slow, meta = _sweep(pair, tmp_path / "slow", group)
    line = _straggler_line(slow.stdout)
    print(line)
    node = meta["rank_hosts"][1]
    assert meta["straggler"] is not None, slow.stdout[-3000:]
    assert (meta["straggler"]["rank"], meta["straggler"]["node"]) == (1, node)
    assert line.startswith(f"{STRAGGLER_LINE}rank 1 on {node}, the slowest in "), slow.stdout
    assert meta["straggler"]["p_value"] < meta["straggler"]["threshold"]

    # Every row names its straggler, and per_rank.csv holds both ranks' share of it.
    rows = load(tmp_path / "slow")
    assert len(rows) == ROWS and rows["slowest_rank"].notna().all()
    assert (rows["skew_us"] >= 0).all()
    per_rank = pd.read_csv(tmp_path / "slow" / PER_RANK.file_name)
    assert list(per_rank.columns) == list(PER_RANK.columns) and len(per_rank) == 2 * ROWS
    assert set(per_rank["rank"]) == {0, 1} and list(per_rank["node"][:2]) == meta["rank_hosts"]
    named = per_rank[per_rank["slowest"] == 1]["rank"].tolist()
    assert named == rows["slowest_rank"].tolist()

    uniform, meta = _sweep(pair, tmp_path / "uniform", None)
    line = _straggler_line(uniform.stdout)
    print(line or "(no straggler line: too few skewed rows to judge)")
    assert meta["straggler"] is None, uniform.stdout[-3000:]
    assert not line or line.startswith(f"{STRAGGLER_LINE}none"), line
