"""Each cost model's terms and times against values computed by hand (the arithmetic is in
each test), and the tree/ring crossover against a hand-solved one."""

from __future__ import annotations

import math

import pytest

from colbench.commands.predict import models, report
from colbench.commands.predict.engine import CrossRow
from colbench.commands.predict.models import (
    DOUBLE_TREE,
    RING,
    SAME,
    TREE,
    Crossing,
    Parameters,
    Terms,
    terms,
)


@pytest.mark.parametrize(
    ("op", "n", "size", "expected"),
    [
        # all_reduce, N=3, S=3000: 2(N-1)=4 steps, 2(N-1)/N*S = 2*2/3*3000 = 4000 sent,
        # (N-1)/N*S = 2000 reduced.
        ("all_reduce", 3, 3000, Terms(4, 4000, 2000)),
        # all_reduce, N=5 (not a power of 2), S=1000: 8 steps, 2*4/5*1000 = 1600, 800.
        ("all_reduce", 5, 1000, Terms(8, 1600, 800)),
        # all_gather, N=5, S=1000: N-1=4 steps, 4/5*1000 = 800 sent, nothing reduced.
        ("all_gather", 5, 1000, Terms(4, 800, 0)),
        # reduce_scatter, N=6, S=600: 5 steps, 5/6*600 = 500 sent and reduced.
        ("reduce_scatter", 6, 600, Terms(5, 500, 500)),
        # broadcast, N=7: a pipelined chain of 6 hops, the root sends all 100 bytes.
        ("broadcast", 7, 100, Terms(6, 100, 0)),
        # reduce, N=3: 2 hops, 100 bytes sent and reduced.
        ("reduce", 3, 100, Terms(2, 100, 100)),
        # N=2: 2 steps, 2*1/2*S = S sent, S/2 reduced.
        ("all_reduce", 2, 4096, Terms(2, 4096, 2048)),
    ],
)
def test_ring_terms(op: str, n: int, size: int, expected: Terms) -> None:
    got = terms(op, RING, n, 1, size)
    assert got.steps == expected.steps
    assert got.link_bytes == pytest.approx(expected.link_bytes)
    assert got.reduced_bytes == pytest.approx(expected.reduced_bytes)


@pytest.mark.parametrize(
    ("algo", "n", "per_node", "expected"),
    [
        # One node of 5 (G=8 is capped at N): a chain, 2*(5-1) = 8 steps, an inner rank
        # sends S up and S down = 2S = 2000, reduces its child's S = 1000.
        (TREE, 5, 8, Terms(8, 2000, 1000)),
        # One node of 2: 2 steps, each rank sends S once.
        (TREE, 2, 2, Terms(2, 1000, 1000)),
        # N=6, G=1: M=6 nodes, depth floor(log2 6)=2, 2*(0+2) = 4 steps; an inner node
        # sends S to its parent and S to each of 2 children: min(6-1,3)=3 -> 3000;
        # reduces 2 children's S -> 2000.
        (TREE, 6, 1, Terms(4, 3000, 2000)),
        # N=12, G=4: M=3 nodes, depth 1, 2*((4-1)+1) = 8 steps; the root's head sends S to
        # 2 remote children: min(3-1,3)=2 -> 2000; reduces 2 remote + 1 local child: 3000.
        (TREE, 12, 4, Terms(8, 2000, 3000)),
        # N=7, G=3: M=ceil(7/3)=3 nodes, 2*((3-1)+1) = 6 steps, 2000 sent, 3000 reduced.
        (TREE, 7, 3, Terms(6, 2000, 3000)),
        # Double tree, N=12, G=4 (M=3): same 8 steps; S/2*min(3,4) = 500*3 = 1500 sent;
        # S/2*(2 remote + 2*1 local) = 2000 reduced.
        (DOUBLE_TREE, 12, 4, Terms(8, 1500, 2000)),
        # Double tree, N=10, G=1: M=10, depth 3, 6 steps; inner in one tree (3 halves)
        # and leaf in the other (1 half): 4*500 = 2000 = 2S; reduces 2 halves = 1000.
        (DOUBLE_TREE, 10, 1, Terms(6, 2000, 1000)),
        # Double tree, N=2, G=1: M=2, 2 steps; S/2*min(2,4) = S = 1000 sent; 500 reduced.
        (DOUBLE_TREE, 2, 1, Terms(2, 1000, 500)),
        # Double tree on one node of 4: two chains, 6 steps, 2S = 2000 sent, S reduced.
        (DOUBLE_TREE, 4, 4, Terms(6, 2000, 1000)),
    ],
)
def test_tree_terms(algo: str, n: int, per_node: int, expected: Terms) -> None:
    got = terms("all_reduce", algo, n, per_node, 1000)
    assert (got.steps, got.link_bytes, got.reduced_bytes) == pytest.approx(
        (expected.steps, expected.link_bytes, expected.reduced_bytes)
    )


def test_time_is_the_terms_times_the_parameters() -> None:
    params = Parameters(overhead_us=10, alpha_us=2, beta_us_per_byte=0.001, gamma_us_per_byte=5e-4)
    # Ring all_reduce, N=3, S=3000: 10 + 4*2 + 4000*0.001 + 2000*0.0005 = 10+8+4+1 = 23 us.
    assert params.time_us(terms("all_reduce", RING, 3, 1, 3000)) == pytest.approx(23.0)
    # Double tree, N=10, G=1, S=1000: 10 + 6*2 + 2000*0.001 + 1000*0.0005 = 24.5 us.
    assert params.time_us(terms("all_reduce", DOUBLE_TREE, 10, 1, 1000)) == pytest.approx(24.5)
    # 1e-3 us per byte is 1e6 bytes/s... per us: 1 / (0.001 * 1e3) = 1 GB/s.
    assert models.rate_gbps(0.001) == pytest.approx(1.0)
    assert math.isinf(models.rate_gbps(0.0))


def test_tree_models_exist_for_all_reduce_only() -> None:
    assert models.algorithms_for("all_reduce") == (RING, TREE, DOUBLE_TREE)
    assert models.algorithms_for("all_gather") == (RING,)
    assert models.algorithms_for("all_to_all") == ()
    with pytest.raises(ValueError, match="no tree model"):
        terms("all_gather", TREE, 4, 1, 100)
    with pytest.raises(ValueError, match="at least 2 ranks"):
        terms("all_reduce", RING, 1, 1, 100)


def _crossing(n: int, ring: Parameters, tree: Parameters, algo: str = DOUBLE_TREE) -> Crossing:
    ends = [terms("all_reduce", a, n, 1, s) for a in (RING, algo) for s in (0, 1)]
    return models.crossover((ends[0], ends[1]), (ends[2], ends[3]), ring, tree)


def test_crossover_solves_the_two_lines() -> None:
    params = Parameters(overhead_us=10, alpha_us=5, beta_us_per_byte=0.01, gamma_us_per_byte=0)
    # N=8. Ring: a = 10 + 2*7*5 = 80 us, b = 2*7/8 * 0.01 = 0.0175 us/B.
    # Double tree (M=8, depth 3): a = 10 + 6*5 = 40 us, b = 2 * 0.01 = 0.02 us/B.
    # 80 + 0.0175 S = 40 + 0.02 S  ->  S = 40 / 0.0025 = 16000 B; the tree is faster below.
    crossing = _crossing(8, params, params)
    assert crossing.size_bytes == pytest.approx(16000)
    assert crossing.faster_below == TREE
    # N=6 (not a power of 2). Ring: a = 10 + 10*5 = 60, b = 2*5/6*0.01 = 1/60.
    # Double tree (M=6, depth 2): a = 10 + 4*5 = 30, b = 0.02.
    # S = 30 / (0.02 - 1/60) = 30 / (1/300) = 9000 B.
    assert _crossing(6, params, params).size_bytes == pytest.approx(9000)
    # Binary tree, N=8: a = 40, b = 3*0.01 = 0.03: S = 40 / (0.03 - 0.0175) = 3200 B.
    assert _crossing(8, params, params, TREE).size_bytes == pytest.approx(3200)


def test_no_crossover_when_one_line_is_below_the_other() -> None:
    ring = Parameters(10, 5, 0.01, 0)
    fast_tree = Parameters(10, 5, 0.001, 0)
    # N=8: tree a = 40 < 80 and b = 0.002 < 0.0175: the tree is faster at every size.
    assert _crossing(8, ring, fast_tree) == Crossing(None, TREE)
    # A tree with a latency of 200 us and more cost per byte never wins.
    slow_tree = Parameters(200, 5, 0.01, 0)
    assert _crossing(8, ring, slow_tree) == Crossing(None, RING)
    # N=2: both algorithms are one exchange each way: identical lines, neither faster.
    assert _crossing(2, ring, ring) == Crossing(None, SAME)
    # A fit that held alpha and beta at 0 (a loaded CPU, every size alike) predicts the
    # overhead alone for both: the same, not "ring faster".
    flat = Parameters(52783.9, 0, 0, 0)
    assert _crossing(64, flat, flat) == Crossing(None, SAME)
    row = CrossRow("all_reduce", 64, DOUBLE_TREE, Crossing(None, SAME))
    assert report.crossover_lines([row])[1] == (
        "  all_reduce double_tree vs ring, 64 ranks: ring and tree take the same time at every size"
    )
