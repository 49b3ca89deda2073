"""Every op's layout against an independent restatement of nccl-tests' rules.

The table below is written from the spec, not from colbench.bench.ops: b is the per-rank
chunk in elements, the requested bytes split by rank and rounded down to a multiple
of 16 bytes.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from colbench.bench import ops
from colbench.bench.ops.base import Layout

WORLD_SIZES = (1, 2, 3, 8)
ELEM_BYTES = (1, 2, 4, 8)
REQUESTED = (1, 15, 16, 100, 1000, 1024, 4096, 65536, 1_000_003, 1 << 26)


def chunk(requested: int, e: int, n: int) -> int:
    elems = requested // e // n
    whole_16 = (elems * e) // 16 * 16
    return whole_16 // e


def expected(name: str, requested: int, e: int, n: int) -> tuple[int, int, Fraction]:
    """(size_bytes, count, busbw factor) straight from the spec."""
    b = chunk(requested, e, n)
    elems = requested // e
    ring = Fraction(n - 1, n)
    table = {
        "all_reduce": (elems * e, elems, 2 * ring),
        "all_gather": (b * n * e, b, ring),
        "reduce_scatter": (b * n * e, b, ring),
        "all_to_all": (n * b * e, b, ring),
        # Its default pattern (--splits uniform) is all_to_all's exchange.
        "all_to_allv": (n * b * e, b, ring),
        "gather": (n * b * e, b, ring),
        "scatter": (n * b * e, b, ring),
        "broadcast": (elems * e, elems, Fraction(1)),
        "reduce": (elems * e, elems, Fraction(1)),
        "sendrecv": (elems * e, elems, Fraction(1)),
    }
    return table[name]


def expected_numel(name: str, requested: int, e: int, n: int) -> tuple[int, int]:
    """(send_numel, recv_numel) of one rank (the largest over ranks)."""
    b = chunk(requested, e, n)
    elems = requested // e
    table = {
        "all_reduce": (elems, elems),
        "broadcast": (elems, elems),
        "reduce": (elems, elems),
        "sendrecv": (elems, elems),
        "all_gather": (b, n * b),
        "gather": (b, n * b),
        "reduce_scatter": (n * b, b),
        "scatter": (n * b, b),
        "all_to_all": (n * b, n * b),
        "all_to_allv": (n * b, n * b),
    }
    return table[name]


SIZED = [op for op in ops.REGISTRY if op.sized]


def test_the_spec_covers_every_registered_op() -> None:
    names = {op.name for op in ops.REGISTRY}
    assert names == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "all_to_allv",
        "gather",
        "scatter",
        "broadcast",
        "reduce",
        "sendrecv",
        "barrier",
    }
    assert [op.name for op in ops.REGISTRY if not op.sized] == ["barrier"]


def test_chunk_helper_matches_the_worked_example() -> None:
    # 1024 B of float32 over 3 ranks: 85 elements = 340 B, down to 336 B = 84 elements.
    assert chunk(1024, 4, 3) == 84


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("op", SIZED, ids=lambda op: op.name)
def test_layout_and_factor_follow_the_spec(op: ops.Collective, n: int) -> None:
    for e in ELEM_BYTES:
        for requested in REQUESTED:
            size_bytes, count, factor = expected(op.name, requested, e, n)
            send, recv = expected_numel(op.name, requested, e, n)
            lay = op.layout(requested, e, n)
            where = f"{op.name} n={n} e={e} requested={requested}"
            assert lay.size_bytes == size_bytes, where
            assert lay.count == count, where
            assert (lay.send_numel, lay.recv_numel) == (send, recv), where
            # size_bytes is max(send, recv) bytes of one rank (nccl-tests).
            assert lay.size_bytes == max(lay.send_numel, lay.recv_numel) * e, where
            assert lay.size_bytes <= requested, where
            if op.name not in ("all_reduce", "broadcast", "reduce", "sendrecv"):
                assert (lay.count * e) % 16 == 0, where
        assert op.busbw_factor(n) == pytest.approx(float(factor), abs=1e-15)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_barrier_has_no_size(n: int) -> None:
    barrier = ops.get("barrier")
    for e in ELEM_BYTES:
        assert barrier.layout(4096, e, n) == Layout(0, 0, 0, 0)
    assert barrier.busbw_factor(n) == 0.0


def test_worked_example_all_gather_three_ranks() -> None:
    lay = ops.get("all_gather").layout(1024, 4, 3)
    assert lay.count == 84
    assert lay.size_bytes == 1008
    assert lay.send_numel == 84
    assert lay.recv_numel == 3 * 84


@pytest.mark.parametrize(
    ("name", "send_in_chunks", "recv_in_chunks"),
    [
        ("all_gather", 1, "n"),
        ("gather", 1, "n"),
        ("reduce_scatter", "n", 1),
        ("scatter", "n", 1),
        ("all_to_all", "n", "n"),
    ],
)
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_split_ops_buffers_are_whole_chunks(
    name: str, send_in_chunks: int | str, recv_in_chunks: int | str, n: int
) -> None:
    lay = ops.get(name).layout(1 << 20, 4, n)
    b = lay.count
    assert lay.send_numel == b * (n if send_in_chunks == "n" else 1)
    assert lay.recv_numel == b * (n if recv_in_chunks == "n" else 1)


def test_too_small_request_gives_an_empty_chunk() -> None:
    # 8 float32 bytes over 2 ranks is 4 bytes per rank: below one 16-byte unit.
    assert ops.get("all_gather").layout(8, 4, 2).count == 0
    assert ops.get("all_reduce").layout(8, 4, 2).count == 2


def test_algbw_is_base_ten_gigabytes_per_second() -> None:
    op = ops.get("all_reduce")
    # 1e9 bytes in 1e6 us = 1 s -> 1 GB/s.
    assert op.algbw_gbps(10**9, 1e6) == pytest.approx(1.0)
    assert op.algbw_gbps(1 << 20, 0.0) == 0.0


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("allreduce", "all_reduce"),
        ("AllGather", "all_gather"),
        ("reduce-scatter", "reduce_scatter"),
        ("alltoall", "all_to_all"),
        ("send_recv", "sendrecv"),
        ("bcast", "broadcast"),
        (" gather ", "gather"),
    ],
)
def test_op_aliases(alias: str, name: str) -> None:
    assert ops.get(alias).name == name


def test_parse_ops_all_and_order_and_dedup() -> None:
    assert ops.parse_ops("all") == ops.REGISTRY
    names = [c.name for c in ops.parse_ops("all_gather,all_reduce,allgather")]
    assert names == ["all_gather", "all_reduce"]
