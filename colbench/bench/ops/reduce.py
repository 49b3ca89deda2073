"""reduce: the root ends with the reduction of all ranks' buffers.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

from collections.abc import Callable

from colbench.bench.ops import data
from colbench.bench.ops.base import (
    Buffers,
    Collective,
    Context,
    DirectComm,
    RingCost,
    bound_call,
    ptr,
)


class Reduce(Collective):
    name = "reduce"
    nccl_tests_binary = "reduce_perf"
    summary = "the root ends with the element-wise reduction of all ranks' buffers"
    busbw_rule = "busbw = algbw * 1"
    torch_call = "dist.reduce(tensor, dst=root, op)"
    nccl_function = "Reduce"
    ring_cost = RingCost(1, False, True, "pipelined chain: N-1 steps, S sent and reduced")
    uses_redop = True
    rooted = True
    # torch's reduce has one tensor, reduced in place on the root.
    placements = ("in",)
    notes = "in-place only (torch has no out-of-place reduce)"

    def busbw_factor(self, world_size: int) -> float:
        """A pipelined reduce moves the whole buffer over every link once (the mirror of
        broadcast), so busbw = algbw."""
        return 1.0

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill(bufs.recv, lambda lo, hi: data.values(ctx.redop, ctx.rank, lo, hi, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        root = ctx.global_rank(ctx.root)
        return bound_call(dist.reduce, bufs.recv, dst=root, op=ctx.reduce_op, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        return comm.call(
            "reduce", ptr(bufs.send), ptr(bufs.recv), bufs.send.numel(),
            comm.dtype(ctx.dtype.name), comm.redop(ctx.redop), ctx.root,
        )  # fmt: skip

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        # Only the root's result is defined; other ranks' buffers are scratch.
        if ctx.rank != ctx.root:
            return 0
        return data.count_wrong(bufs.recv, lambda lo, hi: data.reduced_values(lo, hi, ctx), ctx)


OP = Reduce()
