"""all_to_allv: an uneven all-to-all, rank i sending rank j the bytes of cell [i][j] of a
traffic matrix (``--splits``: colbench.bench.ops.splits) - the dispatch of a mixture-of-experts
layer, where tokens go to the ranks of the experts they were routed to.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from colbench.bench.ops import data, splits
from colbench.bench.ops.base import (
    Buffers,
    Collective,
    Context,
    DirectComm,
    Layout,
    OpSettings,
    Storage,
    bound_call,
    per_rank_chunk,
    ptr,
)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class SplitLayout(Layout):
    """A Layout that remembers the size it was made for: the op recomputes the matrix
    from it (cached), rather than every layout of a sweep holding n * n cells."""

    requested_bytes: int = 0
    elem_bytes: int = 1
    world_size: int = 1


@dataclass(frozen=True)
class Segments:
    """One rank's view of the matrix at one size, in elements."""

    send: list[int]
    """Elements to each peer, in peer order (torch's input_split_sizes)."""
    recv: list[int]
    """Elements from each peer (output_split_sizes)."""
    src_offsets: list[int]
    """Where, in each peer's send buffer, the elements for this rank begin."""


class AllToAllv(Collective):
    name = "all_to_allv"
    exchange = True
    uneven_splits = True
    summary = "rank i sends rank j cell [i][j] of a traffic matrix (--splits): uneven, MoE-shaped"
    size_rule = (
        "size_bytes = the busiest rank's bytes: the largest over ranks of max(sent, received), "
        "nccl-tests 2.19's alltoallv"
    )
    count_rule = (
        "count = b, the elements the uniform pattern sends each peer (S/n, 16-byte aligned)"
    )
    busbw_rule = "busbw = algbw * (n-1)/n, algbw from the busiest rank's bytes"
    torch_call = "dist.all_to_all_single(output, input, output_split_sizes, input_split_sizes)"
    # As all_to_all: torch has no in-place form of it.
    placements = ("out",)
    notes = "out-of-place only (in-place all_to_all is not a torch API)"
    details = (
        (
            "pattern",
            "--splits uniform | spread:S | zipf:ALPHA | topk:TOKENS,HIDDEN,EXPERTS,K | "
            "file:PATH; cell [i][j] is what rank i sends rank j",
        ),
        (
            "scaling",
            "a size S scales the whole matrix: cell = w[i][j] * S rounded down to 16 bytes, "
            "the weights w normalised so the mean rank sends S (a file: its own bytes when S "
            "is its mean row sum)",
        ),
        ("uniform", "every peer gets S/n: all_to_all's exchange through all_to_allv's call"),
        (
            "spread:S",
            "nccl-tests' generated pattern (NCCL_TESTS_ALLTOALLV_SPREAD): the peer d = (j-i) "
            "mod n ranks on gets (1-S)*T/n + S*d*T/(n(n-1)/2) of the rank's total T",
        ),
        (
            "zipf:ALPHA",
            "every sender weights the receiver of popularity rank r by 1/r^ALPHA, the order "
            "a permutation drawn from --seed: senders even, receivers skewed (hot experts)",
        ),
        (
            "topk",
            "each rank routes TOKENS tokens to K distinct experts each (drawn from --seed), "
            "EXPERTS/n experts per rank in blocks; at TOKENS*K*HIDDEN*element size bytes "
            "every cell is whole tokens of HIDDEN elements",
        ),
        (
            "file:PATH",
            "as nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_FILE: whitespace-separated bytes, one "
            "row per sender, square, at least n rows (the top-left n x n is used); nccl-tests "
            "runs it at one size (-b = -e), scaled by NCCL_TESTS_ALLTOALLV_MATRIX_SCALE",
        ),
        (
            "columns",
            "beside nccl-tests' numbers, what they hide (the slowest rank sets the time): "
            "mean_bytes, the mean rank's bytes (total / n); meanbw_gbps = mean_bytes / time; "
            "send_imbalance and recv_imbalance, the largest rank's bytes sent and received "
            "over the mean; splits, the pattern",
        ),
        (
            "nccl-tests",
            "size and algbw as its 2.19 alltoallv, from the busiest rank's bytes; its count "
            "is its generated pattern's per-peer elements (0 for a matrix file), colbench's "
            "the uniform share for every pattern",
        ),
    )

    def __init__(self, pattern: splits.Splits) -> None:
        self.splits = pattern
        self.splits_label = pattern.label

    def configured(self, measure: OpSettings) -> Collective:
        return AllToAllv(splits.parse(measure.splits).with_seed(measure.seed))

    def unsupported(self, world_size: int, backend: str) -> str | None:
        return self.splits.unsupported(world_size)

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        b = per_rank_chunk(requested_bytes, elem_bytes, world_size)
        if b == 0:
            return SplitLayout(
                0, 0, 0, 0, None, None, None, requested_bytes, elem_bytes, world_size
            )
        cells = self.splits.cells(requested_bytes, world_size)
        sent, received = cells.sum(axis=1), cells.sum(axis=0)
        mean = float(sent.sum()) / world_size
        busiest = int(max(sent.max(), received.max()))
        return SplitLayout(
            count=b,
            size_bytes=busiest,
            send_numel=int(sent.max()) // elem_bytes,
            recv_numel=int(received.max()) // elem_bytes,
            mean_bytes=mean,
            send_imbalance=float(sent.max()) / mean if mean else None,
            recv_imbalance=float(received.max()) / mean if mean else None,
            requested_bytes=requested_bytes,
            elem_bytes=elem_bytes,
            world_size=world_size,
        )

    def busbw_factor(self, world_size: int) -> float:
        """As nccl-tests' alltoallv: the busiest rank keeps what it sends itself, so of
        its bytes (n-1)/n cross the network when the matrix is uniform. On a skewed matrix
        the factor is a convention kept for comparability, not a count of the bytes."""
        return (world_size - 1) / world_size

    def segments(self, layout: Layout, rank: int) -> Segments:
        assert isinstance(layout, SplitLayout)
        return _segments(
            self.splits, layout.requested_bytes, layout.world_size, layout.elem_bytes, rank
        )

    def views(self, storage: Storage, layout: Layout, ctx: Context, in_place: bool) -> Buffers:
        seg = self.segments(layout, ctx.rank)
        return Buffers(
            storage.send[: sum(seg.send)], storage.recv[: sum(seg.recv)], in_place, layout
        )

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill_own_copy(bufs.send, bufs.recv, ctx)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        seg = self.segments(bufs.layout, ctx.rank)
        return bound_call(
            dist.all_to_all_single,
            bufs.recv,
            bufs.send,
            output_split_sizes=seg.recv,
            input_split_sizes=seg.send,
            group=ctx.group,
        )

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        # NCCL has no all_to_allv: nccl-tests groups a send and a receive per peer.
        seg = self.segments(bufs.layout, ctx.rank)
        dtype, elem = comm.dtype(ctx.dtype.name), ctx.dtype.elem_bytes
        send, recv = ptr(bufs.send), ptr(bufs.recv)
        calls = []
        for peer in range(ctx.world_size):
            if seg.send[peer]:
                calls.append(comm.send(send, seg.send[peer], dtype, peer))
            if seg.recv[peer]:
                calls.append(comm.recv(recv, seg.recv[peer], dtype, peer))
            send += seg.send[peer] * elem
            recv += seg.recv[peer] * elem
        return comm.grouped(calls)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        # From each source, in rank order: its elements for me, which begin where its
        # elements for the ranks before me end.
        seg = self.segments(bufs.layout, ctx.rank)
        wrong, at = 0, 0
        for src, (length, offset) in enumerate(zip(seg.recv, seg.src_offsets, strict=True)):
            expect = data.copy_of(src, ctx)
            wrong += data.count_wrong(bufs.recv[at : at + length], expect, ctx, offset)
            at += length
        return wrong


@functools.lru_cache(maxsize=64)
def _segments(
    pattern: splits.Splits, requested_bytes: int, world_size: int, elem_bytes: int, rank: int
) -> Segments:
    elems: np.ndarray = pattern.cells(requested_bytes, world_size) // elem_bytes
    before_me = elems[:, :rank].sum(axis=1)
    return Segments(
        send=[int(v) for v in elems[rank]],
        recv=[int(v) for v in elems[:, rank]],
        src_offsets=[int(v) for v in before_me],
    )


OP = AllToAllv(splits.parse("uniform"))
