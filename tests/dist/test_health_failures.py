"""``health --drain-list`` when a rank dies or hangs (exit 3 or 4): the failed rank's node
is written, for the scheduler to drain (issue 26).

Real gloo ranks, spawned or started by hand as a launcher's workers, each with its own
node name (NODE_NAME, as Kubernetes gives it); COLBENCH_FAULT stops one rank at a
chosen health step. Nothing else is judged in a failed run, so the list holds that node
alone; a failure before the ranks met (no names yet) leaves the list empty.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import call_colbench, finish_ranks, start_ranks

HEALTH = ["health", "--backend", "gloo", "--level", "quick"]


def test_a_rank_that_hangs_names_its_node_launched(tmp_path: Path) -> None:
    drain = tmp_path / "drain.txt"
    # Not in sorted order: the name must be rank 2's, not the 3rd of the sorted hosts.
    names = ["node-c", "node-a", "node-b"]

    def argv(rank: int) -> list[str]:
        out = ["--out", str(tmp_path / "run"), "--drain-list", str(drain)] if rank == 0 else []
        return [*HEALTH, "--timeout", "6", *out]

    def env(rank: int) -> dict[str, str]:
        return {"NODE_NAME": names[rank], "COLBENCH_FAULT": "2:3:hang"}

    results = finish_ranks(start_ranks(3, argv, env), 180)
    code, stderr = results[0]
    assert code == 4, stderr
    assert "rank(s) 2" in stderr, stderr
    assert drain.read_text() == "node-b\n"
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert (meta["status"], meta["failed_rank"]) == ("failed", 2)
    assert meta["verdict"]["critical"] == ["node-b"]
    assert meta["verdict"]["lines"] == [
        f"health: CRITICAL node-b: rank 2 hung (exit 4); written to {drain}"
    ]


def test_a_rank_that_dies_names_its_node_spawned(tmp_path: Path) -> None:
    drain = tmp_path / "drain.txt"
    proc = call_colbench(
        *HEALTH, "--nprocs", "2", "--out", str(tmp_path / "run"), "--drain-list", str(drain),
        env={"NODE_NAME": "node-x", "COLBENCH_FAULT": "1:2:exit"}, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    # Rank 0 only lost its peer ("Connection closed by peer"): rank 1 is named.
    assert "rank 1 on " in proc.stderr and "exited with code 7" in proc.stderr, proc.stderr
    assert drain.read_text() == "node-x\n"
    assert "health: CRITICAL node-x: rank 1 failed (exit 3); written to" in proc.stderr
    # Before the ranks meet, no rank has a node name yet: the list is left empty, and a
    # list from an earlier run does not survive.
    early = tmp_path / "early.txt"
    early.write_text("node-from-an-earlier-run\n")
    proc = call_colbench(
        *HEALTH, "--nprocs", "2", "--out", str(tmp_path / "early"), "--drain-list", str(early),
        env={"NODE_NAME": "node-x", "COLBENCH_FAULT": "1:init:exit"}, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert early.read_text() == ""


def test_one_node_alone_runs_its_own_checks_and_judges_nothing(tmp_path: Path) -> None:
    """A Slurm prolog's case: the ranks of one node, no job-wide world. The node-alone
    and intra-node checks run; there is no pair of nodes, and one node has no fleet."""
    drain = tmp_path / "drain.txt"
    drain.write_text("stale\n")
    proc = call_colbench(
        *HEALTH, "--nprocs", "2", "--out", str(tmp_path / "run"), "--drain-list", str(drain),
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert " s for 1 node (2 ranks)" in proc.stderr
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "health.jsonl").read_text().splitlines()
    ]
    assert sorted({r["check"] for r in rows}) == [
        "intra_all_gather",
        "intra_all_reduce",
        "node",
        "world",
    ]
    assert {r["verdict"] for r in rows} == {"not judged"}
    assert drain.read_text() == ""
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["steps"]["pair"] == meta["steps"]["pair_all_reduce"] == 0
    assert meta["measured_s"] <= meta["estimate_s"]
    assert meta["verdict"]["lines"][0] == (
        "health: no node named among 1 node (0 checks judged: fewer than 3 nodes)"
    )
