"""all_reduce: every rank ends with the reduction of all ranks' buffers.

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


class AllReduce(Collective):
    name = "all_reduce"
    nccl_tests_binary = "all_reduce_perf"
    summary = "every rank ends with the element-wise reduction of all ranks' buffers"
    busbw_rule = "busbw = algbw * 2(n-1)/n"
    torch_call = "dist.all_reduce(tensor, op)"
    nccl_function = "AllReduce"
    ring_cost = RingCost(2, True, True, "ring: 2(N-1) steps, 2(N-1)/N*S sent, (N-1)/N*S reduced")
    uses_redop = True
    # torch.distributed.all_reduce only exists in place; there is no separate output buffer.
    placements = ("in",)
    notes = "in-place only (torch has no out-of-place all_reduce)"

    def busbw_factor(self, world_size: int) -> float:
        """A ring all_reduce is a reduce_scatter then an all_gather: each rank sends and
        receives 2(n-1)/n of the buffer, so busbw = algbw * 2(n-1)/n."""
        return 2 * (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill(bufs.recv, lambda lo, hi: data.values(ctx.redop, ctx.rank, lo, hi, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        return bound_call(dist.all_reduce, bufs.recv, op=ctx.reduce_op, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        return comm.call(
            "all_reduce", ptr(bufs.send), ptr(bufs.recv), bufs.recv.numel(),
            comm.dtype(ctx.dtype.name), comm.redop(ctx.redop),
        )  # fmt: skip

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return data.count_wrong(bufs.recv, lambda lo, hi: data.reduced_values(lo, hi, ctx), ctx)


OP = AllReduce()
