"""p2p names a real slow node and a real slow link on a shaped namespace fabric, and
nothing on a uniform one, with its default passes and thresholds.

Four "nodes" (network namespaces, one launched-mode rank each, as torchrun starts them)
hang off one bridge; ``tc`` shapes every link to RATE_MBIT, so the network, not the
2-core CPU, sets each message's time (1M takes about 21 ms at 400 Mbit/s, against a
millisecond of scheduling noise). Then one node's whole link, or the traffic of one pair
alone, is throttled to a quarter. The 8-byte latencies are the scheduler's (40 us to
2 ms, whichever pair meets a busy moment): the verdict must see through them too.
benchmarks/p2p_fabric.py repeats the uniform and the quarter runs. Skipped, with the
reason, where namespaces cannot be made.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.p2p import load
from colbench.commands.p2p.options import DEFAULT_PASSES
from colbench.commands.p2p.report import matrices
from tests import netns

RATE_MBIT = 400.0
THROTTLED_MBIT = RATE_MBIT / 4
# The default passes (--repeat) and thresholds: what a user gets.
P2P = ["p2p", "--backend", "gloo", "--size", "1M", "-n", "4", "-w", "1", "--no-plot"]

_reason = netns.unavailable()
pytestmark = [
    pytest.mark.fabric,  # namespaces and shaped links
    pytest.mark.skipif(_reason is not None, reason=f"no network namespaces: {_reason}"),
]


@pytest.fixture(scope="module")
def fabric() -> Iterator[netns.Fabric]:
    with netns.fabric(4, "p2p") as made:
        yield made


def _p2p(fabric: netns.Fabric, out: Path, *extra: str, rank0_exit: int = 0) -> dict[str, Any]:
    """Run p2p across the fabric; rank 0's stdout (matrix, verdict) and meta.json.

    Only rank 0 reports, so only its exit code carries the verdict of --fail-below.
    """
    results = fabric.colbench([*P2P, *extra, "--out", str(out)])
    codes = [proc.returncode for proc in results]
    why = f"exit codes {codes}\n{results[0].stdout}" + "".join(
        f"\n[rank {rank}] {proc.stderr[-1500:]}" for rank, proc in enumerate(results)
    )
    assert codes == [rank0_exit, 0, 0, 0], why
    print(results[0].stdout)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["rows"] == 12 * DEFAULT_PASSES
    lines = results[0].stdout.strip().splitlines()
    verdict: dict[str, Any] = meta["verdict"]
    assert lines[-len(verdict["lines"]) :] == verdict["lines"]
    return verdict


def test_uniform_links_name_no_outlier(fabric: netns.Fabric, tmp_path: Path) -> None:
    fabric.shape(RATE_MBIT)
    verdict = _p2p(fabric, tmp_path / "run")
    assert verdict["judged"] and verdict["slow_nodes"] == [] and verdict["slow_links"] == []
    assert verdict["lines"][0].startswith("verdict: no slow link or node among 6 links over 5 ")
    frame = load(tmp_path / "run")
    assert set(frame["link_verdict"]) == {"ok"} and (frame["link_p_value"] > 0.05).all()


def test_a_node_throttled_to_a_quarter_is_named_and_no_other(
    fabric: netns.Fabric, tmp_path: Path
) -> None:
    fabric.shape(RATE_MBIT, node_mbit={2: THROTTLED_MBIT})
    # --fail-below makes it a failed health check: exit 1.
    verdict = _p2p(fabric, tmp_path / "run", "--fail-below", "30", rank0_exit=1)
    assert verdict["slow_nodes"] == ["nodeC"] and verdict["slow_links"] == []
    assert verdict["lines"][0].startswith("slow node nodeC (ranks 2): 3 of 3 links slow, ")
    # Each of node C's links against the links without node C: a quarter, 75% below.
    assert sorted(map(tuple, verdict["failing_links"])) == [(0, 2), (1, 2), (2, 3)]
    frame = load(tmp_path / "run")
    through_c = (frame["src_rank"] == 2) | (frame["dst_rank"] == 2)
    assert set(frame[through_c]["link_verdict"]) == {"slow node"}
    assert (frame[through_c]["link_p_value"] <= 0.05).all()
    assert set(frame[~through_c]["link_verdict"]) == {"ok"}
    _assert_a_quarter(tmp_path / "run", lambda src, dst: 2 in (src, dst))


def test_a_single_throttled_pair_is_named_as_a_link(fabric: netns.Fabric, tmp_path: Path) -> None:
    fabric.shape(RATE_MBIT, pair_mbit={(1, 3): THROTTLED_MBIT})
    verdict = _p2p(fabric, tmp_path / "run")
    assert verdict["slow_links"] == [[1, 3]] and verdict["slow_nodes"] == []
    (line,) = verdict["lines"]
    assert line.startswith("slow link 1 <-> 3 (nodeB <-> nodeD): bandwidth ")
    _assert_a_quarter(tmp_path / "run", lambda src, dst: {src, dst} == {1, 3})


def _assert_a_quarter(run: Path, throttled: Callable[[int, int], bool]) -> None:
    """The throttled directions measured at a quarter of the others (the shaping, not noise)."""
    bw, _ = matrices(load(run))
    fast = statistics.median(v for pair, v in bw.items() if not throttled(*pair))
    slow = [v / fast for pair, v in bw.items() if throttled(*pair)]
    assert slow and all(0.2 < ratio < 0.32 for ratio in slow), slow
    assert all(v / fast > 0.8 for pair, v in bw.items() if not throttled(*pair))
