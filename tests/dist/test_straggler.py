"""A rank starved of CPU is named as the straggler; a uniform run names none.

Two ranks in two network namespaces joined by a veth pair (tests/netns.py: one rank
per "node", launched mode, as under a real launcher on two hosts). In the first run
rank 1's process sits in a cgroup of its own whose CPU quota is cut to 5% once the
run has started (so its start-up is not slowed too); the second run is the same
without a quota. Both ranks' cgroups get CPU_WEIGHT times the default share of a busy
CPU, so that other work on a small shared machine hardly delays them: the quota is then
the one difference between the ranks. Skipped, with the reason, where
namespaces or cgroups cannot be made.
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

from colbench.results.reporters.stragglers import PER_RANK
from colbench.results.rows import load
from tests import cgroups, netns

SWEEP = ["--op", "all_reduce", "--sizes", "1K-32K", "-n", "5"]
SWEEP += ["--repeat", "12", "--backend", "gloo", "--per-rank"]
#: all_reduce (in place only), 6 sizes, 12 repeats (8 left as few as 16 late-arrival
#: rows beside a busy core: too few for p < 0.0005). all_reduce's ranks leave each call
#: together; gloo lets other ops' ranks leave apart (reduce_scatter out of place here:
#: rank 0 last in 36 of 52 skewed rows of uniform runs), which biases who arrives last
#: without any rank being slow.
ROWS = 6 * 12
#: 1 ms of CPU in every 50 ms: the rank stalls for 49 ms whenever its share runs out,
#: far longer than a busy core delays the other rank (at 1 in 20 a busy loop beside the
#: test made rank 0 last in 6 of 26 late-arrival rows, below the 83% share needed).
QUOTA_US, PERIOD_US = 1_000, 50_000
#: Both ranks' groups' share of a busy CPU, in default groups' shares (the most cgroup
#: v2 allows): another job's processes, a default share each, then take next to no time
#: from the ranks, and the quota is the one difference between them. At 4, beside a busy
#: loop, rank 1 went unnamed in 4 of 10 runs of the file (issue 33); at 100 in none of 4.
CPU_WEIGHT = 100
STRAGGLER_LINE = "# Straggler            : "

_reason = netns.unavailable() or cgroups.unavailable()
pytestmark = [
    pytest.mark.skipif(_reason is not None, reason=f"cannot run: {_reason}"),
    # Alone, as make test-fabric runs these files: beside a second pytest worker's ranks
    # and a busy loop on 2 cores, the unquota'd rank starved too and no rank stood out
    # (a lone-clone make test beside one busy loop: "Straggler: none").
    pytest.mark.fabric,
]


@pytest.fixture(scope="module")
def pair() -> Iterator[netns.VethPair]:
    with netns.veth_pair("s") as made:
        yield made


def _sweep(
    pair: netns.VethPair, out: Path, groups: tuple[cgroups.CpuGroup, cgroups.CpuGroup]
) -> tuple[Any, dict[str, Any]]:
    """The sweep, rank r in ``groups[r]``; a group that differs from rank 0's gets the
    quota as soon as meta.json exists."""
    done: dict[str, Any] = {}

    def run() -> None:
        procs = {rank: group.procs for rank, group in enumerate(groups)}
        done["proc"] = pair.sweep(SWEEP, out, timeout_s=120, cgroup_procs=procs)

    worker = threading.Thread(target=run)
    worker.start()
    if groups[1] != groups[0]:
        # Rank 0 writes meta.json after the rendezvous, before the first row.
        while worker.is_alive() and not (out / "meta.json").exists():
            time.sleep(0.01)
        groups[1].limit(QUOTA_US, PERIOD_US)
    worker.join()
    proc = done["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "meta.json").read_text())


def _straggler_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith(STRAGGLER_LINE)]
    assert len(lines) <= 1
    return lines[0] if lines else ""


def _show(stdout: str, meta: dict[str, Any]) -> None:
    """With -s: the marked lines, the summary and each rank's count of skewed rows."""
    for text in stdout.splitlines():
        if "!" in text or text.startswith(("# Rank-skewed", STRAGGLER_LINE)):
            print(text)
    print("slowest_rank_rows", meta["slowest_rank_rows"])


def test_a_rank_starved_of_cpu_is_named_and_a_uniform_run_names_none(
    pair: netns.VethPair, tmp_path: Path
) -> None:
    with cgroups.cpu_group("f") as fast, cgroups.cpu_group("s") as slow_group:
        for group in (fast, slow_group):
            group.weigh(CPU_WEIGHT)
        slow, meta = _sweep(pair, tmp_path / "slow", (fast, slow_group))
        uniform, uniform_meta = _sweep(pair, tmp_path / "uniform", (fast, fast))
    line = _straggler_line(slow.stdout)
    _show(slow.stdout, meta)
    node = meta["rank_hosts"][1]
    assert meta["straggler"] is not None, slow.stdout[-3000:]
    assert (meta["straggler"]["rank"], meta["straggler"]["node"]) == (1, node)
    assert line.startswith(f"{STRAGGLER_LINE}rank 1 on {node}, the last to arrive in "), slow.stdout
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

    meta = uniform_meta
    line = _straggler_line(uniform.stdout)
    _show(uniform.stdout, meta)
    assert meta["straggler"] is None, uniform.stdout[-3000:]
    assert not line or line.startswith(f"{STRAGGLER_LINE}none"), line
