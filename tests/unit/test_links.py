"""The p2p verdict rules on hand-made matrices: slow nodes, slow links, too few ranks."""

from __future__ import annotations

import itertools

from colbench.analysis.links import judge, links


def _matrix(
    n: int, bw: float = 10.0, lat: float = 20.0, slow: dict[tuple[int, int], float] | None = None
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """Every ordered pair at ``bw`` GB/s and ``lat`` us, except ``slow`` (pair -> bw)."""
    bw_gbps = {p: bw for p in itertools.permutations(range(n), 2)}
    latency_us = dict.fromkeys(bw_gbps, lat)
    bw_gbps.update(slow or {})
    return bw_gbps, latency_us


def _labels(n: int, per_node: int = 1) -> dict[int, str]:
    return {r: f"node{chr(ord('A') + r // per_node)}" for r in range(n)}


def test_uniform_matrix_names_nothing() -> None:
    bw, lat = _matrix(6)
    verdict = judge(bw, lat, _labels(6))
    assert verdict.judged and not verdict.slow_nodes and not verdict.slow_links
    assert verdict.lines == (
        "verdict: no slow link or node among 15 links: bandwidth within 25% of the median "
        "10 GB/s, latency within 100% of the median 20 us",
    )


def test_a_node_with_most_links_slow_is_blamed_and_its_links_not_listed() -> None:
    # 4 nodes of 2 ranks; every link of node B's ranks to other nodes at 4 GB/s.
    nodes = _labels(8, per_node=2)
    slow = {}
    for a in (2, 3):
        for b in (0, 1, 4, 5, 6, 7):
            slow[(a, b)] = slow[(b, a)] = 4.0
    bw, lat = _matrix(8, slow=slow)
    verdict = judge(bw, lat, nodes)
    assert verdict.slow_nodes == ("nodeB",) and verdict.slow_links == ()
    assert verdict.lines == (
        "slow node nodeB (ranks 2,3): 12 of 12 links 60% below the median bandwidth",
    )


def test_one_slow_direction_makes_the_link_slow() -> None:
    bw, lat = _matrix(5, slow={(0, 4): 2.0})
    verdict = judge(bw, lat, _labels(5))
    assert verdict.slow_links == ((0, 4),) and verdict.slow_nodes == ()
    assert verdict.lines == ("slow link 0 <-> 4 (nodeA <-> nodeE): 80% below the median bandwidth",)


def test_a_single_slow_link_does_not_blame_its_nodes() -> None:
    bw, lat = _matrix(4, slow={(1, 2): 3.0, (2, 1): 3.5})
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_nodes == ()
    assert verdict.slow_links == ((1, 2),)
    # Judged by the worse direction: 3 GB/s against the median 10.
    assert verdict.lines == ("slow link 1 <-> 2 (nodeB <-> nodeC): 70% below the median bandwidth",)


def test_one_node_slow_among_four_is_blamed_alone() -> None:
    # Half the links are slow: the median falls between, and only node A has most slow.
    slow = {p: 10 / 3 for p in itertools.permutations(range(4), 2) if 0 in p}
    bw, lat = _matrix(4, slow=slow)
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_nodes == ("nodeA",) and verdict.slow_links == ()
    assert verdict.lines == (
        "slow node nodeA (ranks 0): 3 of 3 links 50% below the median bandwidth",
    )


def test_slow_latency_is_judged_against_its_own_threshold() -> None:
    bw, lat = _matrix(4)
    lat[(3, 0)] = 50.0  # 150% above the median 20 us
    lat[(2, 1)] = 35.0  # 75%: below the default 100% threshold
    verdict = judge(bw, lat, _labels(4))
    assert verdict.lines == ("slow link 0 <-> 3 (nodeA <-> nodeD): latency 150% above the median",)
    tighter = judge(bw, lat, _labels(4), latency_pct=50)
    assert tighter.slow_links == ((0, 3), (1, 2))


def test_fewer_than_four_ranks_are_not_judged() -> None:
    bw, lat = _matrix(3, slow={(0, 1): 1.0})
    verdict = judge(bw, lat, _labels(3), fail_below_pct=10)
    assert not verdict.judged and verdict.failing == ()
    assert verdict.lines == (
        "verdict: not judged: the median rule needs at least 4 ranks (nodes with --per-node); "
        "this matrix has 3",
    )


def test_fail_below_lists_the_links_past_it() -> None:
    bw, lat = _matrix(4, slow={(0, 1): 8.5, (2, 3): 6.0})
    assert judge(bw, lat, _labels(4), fail_below_pct=50).failing == ()
    verdict = judge(bw, lat, _labels(4), fail_below_pct=10)
    assert [(f.low, f.high) for f in verdict.failing] == [(0, 1), (2, 3)]
    assert verdict.lines[-1] == (
        "verdict: FAIL: 2 link(s) more than 10% below the median bandwidth "
        "(worst 2 <-> 3, 40% below)"
    )
    # 15% below is within the 25% slow threshold: failing, yet not named slow.
    assert verdict.slow_links == ((2, 3),)


def test_links_pair_both_directions() -> None:
    bw, lat = _matrix(4, slow={(1, 0): 5.0})
    lat[(0, 1)] = 30.0
    first = links(bw, lat)[0]
    assert (first.low, first.high, first.bw_gbps, first.latency_us) == (0, 1, 5.0, 30.0)
    assert len(links(bw, lat)) == 6
