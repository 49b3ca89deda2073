"""Real p2p runs: spawned gloo ranks on loopback, through the CLI a user runs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from colbench.commands.p2p import load
from colbench.commands.p2p.options import DEFAULT_PASSES
from colbench.commands.p2p.results import COLUMNS, P2P_SCHEMA_VERSION
from tests.conftest import call_colbench, finish_ranks, start_ranks


def test_four_ranks_measure_every_ordered_pair(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "p2p", "--nprocs", "4", "--backend", "gloo", "--size", "1M", "-n", "3", "-w", "1",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    frame = load(out)
    assert list(frame.columns) == list(COLUMNS)
    assert set(frame["schema_version"]) == {P2P_SCHEMA_VERSION}
    pairs = sorted(set(zip(frame["src_rank"], frame["dst_rank"], strict=True)))
    assert pairs == sorted(itertools.permutations(range(4), 2))
    assert set(frame["size_bytes"]) == {1024**2} and set(frame["latency_bytes"]) == {8}
    assert set(frame["mode"]) == {"uni"} and set(frame["backend"]) == {"gloo"}
    assert (frame["time_min_us"] <= frame["time_p50_us"]).all()
    assert (frame["time_p50_us"] <= frame["time_max_us"]).all()
    bw = frame["size_bytes"] / frame["time_us"] / 1e3
    assert ((frame["bw_gbps"] - bw).abs() / bw < 1e-4).all()
    assert (frame["latency_us"] > 0).all()
    # One node: every rank carries the same label.
    assert frame["src_node"].nunique() == 1
    meta = json.loads((out / "meta.json").read_text())
    assert meta["kind"] == "p2p" and meta["status"] == "complete"
    # The default passes, each a row per ordered pair, and the verdict on every row.
    assert meta["rows"] == 12 * DEFAULT_PASSES
    assert sorted(set(frame["repeat"])) == list(range(DEFAULT_PASSES))
    assert meta["verdict"]["judged"] is True
    assert set(frame["link_verdict"]) <= {"ok", "slow link"}
    assert frame["link_p_value"].between(0, 1).all()
    assert (out / "p2p.png").stat().st_size > 0
    lines = proc.stdout.strip().splitlines()
    # The verdict comes last: a clean bill over 6 links, or names of slow ones.
    verdict = [ln for ln in lines if ln.startswith(("verdict:", "slow "))]
    assert verdict and lines[-len(verdict) :] == verdict
    assert verdict == meta["verdict"]["lines"]
    if verdict[0].startswith("verdict:"):
        assert "among 6 links" in verdict[0]


def test_three_ranks_bidirectional_serial_are_measured_but_not_judged(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "p2p", "--nprocs", "3", "--backend", "gloo", "--size", "256K", "-n", "2", "-w", "1",
        "--bidirectional", "--serial", "--repeat", "1", "--no-plot", "--window", "2",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    # Two messages per timed iteration each way, reported per message.
    assert json.loads((out / "meta.json").read_text())["bandwidth_window"] == 2
    assert set(frame["link_verdict"]) == {"not judged"} and frame["link_p_value"].isna().all()
    assert sorted(zip(frame["src_rank"], frame["dst_rank"], strict=True)) == sorted(
        itertools.permutations(range(3), 2)
    )
    assert set(frame["mode"]) == {"bi"}
    assert not (out / "p2p.png").exists()
    assert proc.stdout.strip().splitlines()[-1] == (
        "verdict: not judged: telling a slow link from the others needs at least 4 ranks "
        "(nodes with --per-node); this matrix has 3"
    )


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = [
        (["--nprocs", "1"], "--nprocs must be 2 or more"),
        (["--nprocs", "3", "--fail-below", "20"], "--fail-below needs at least 4 ranks"),
        # A health check that could never fail is refused before measuring.
        (
            ["--nprocs", "4", "--fail-below", "20", "--repeat", "2"],
            "--fail-below over 6 links needs --repeat 3 or more",
        ),
        (["--size", "12Q"], "12Q"),
        (["--per-node", "--rail"], "choose one"),
        # Ranks spawned here share one node: refused before the run directory is made.
        (["--nprocs", "2", "--per-node"], "all 2 ranks run on one node"),
        (["--nprocs", "4", "--rail"], "all 4 ranks run on one node"),
    ]
    for index, (args, message) in enumerate(cases):
        out = tmp_path / f"run{index}"
        proc = call_colbench("p2p", "--backend", "gloo", *args, "--out", str(out))
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("colbench: error: "), proc.stderr
        assert message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        # Every case is refused before measuring: no run directory, no rank logs.
        assert not out.exists(), (args, sorted(out.iterdir()))


@pytest.mark.parametrize(
    ("flag", "pairs"),
    [
        # Nodes A (ranks 0, 1) and B (ranks 2, 3): one rank per node ...
        ("--per-node", [(0, 2), (2, 0)]),
        # ... or local rank k with local rank k of the other node.
        ("--rail", [(0, 2), (1, 3), (2, 0), (3, 1)]),
    ],
)
def test_per_node_and_rail_pick_their_ranks_and_the_others_idle(
    tmp_path: Path, flag: str, pairs: list[tuple[int, int]]
) -> None:
    out = tmp_path / "run"
    argv = ["p2p", "--backend", "gloo", "--size", "64K", "-n", "2", "-w", "1", flag]
    argv += ["--no-plot", "--out", str(out)]
    labels = ["nodeA", "nodeA", "nodeB", "nodeB"]
    procs = start_ranks(4, lambda rank: argv, lambda rank: {"COLBENCH_NODE_LABEL": labels[rank]})
    for rank, (code, stderr) in enumerate(finish_ranks(procs, 120)):
        assert code == 0, f"rank {rank}: {stderr[-2000:]}"
    frame = load(out)
    assert set(frame["repeat"]) == set(range(DEFAULT_PASSES))
    first = frame[frame["repeat"] == 0]
    assert sorted(zip(first["src_rank"], first["dst_rank"], strict=True)) == pairs
    assert all(frame["src_node"] != frame["dst_node"])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ranks_taking_part"] == sorted({r for pair in pairs for r in pair})
    assert meta["rank_hosts"] == labels
