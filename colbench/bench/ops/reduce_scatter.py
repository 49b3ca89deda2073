"""reduce_scatter: rank r ends with chunk r of the reduction of all ranks' buffers.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

from collections.abc import Callable

from colbench.bench.ops import data
from colbench.bench.ops.base import (
    Buffers,
    ChunkedCollective,
    Context,
    DirectComm,
    RingCost,
    bound_call,
    ptr,
)


class ReduceScatter(ChunkedCollective):
    name = "reduce_scatter"
    traced_names = ("reducescatterbase", "reducescattertensor", "reducescattersingle")
    nccl_tests_binary = "reduce_scatter_perf"
    summary = "rank r ends with chunk r (b elements) of the reduction of all ranks' n*b inputs"
    size_rule = "size_bytes = total bytes each rank sends = b * n * element size"
    count_rule = "count = b, the elements each rank receives (16-byte aligned share)"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.reduce_scatter_single(output, input, op)"
    gathers = False
    nccl_function = "ReduceScatter"
    ring_cost = RingCost(1, True, True, "ring: N-1 steps, (N-1)/N*S sent and reduced")
    uses_redop = True

    def busbw_factor(self, world_size: int) -> float:
        """Each rank must send n-1 of its n chunks away, (n-1)/n of the input."""
        return (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        if not bufs.in_place:
            data.poison(bufs.recv)
        data.fill(bufs.send, lambda lo, hi: data.values(ctx.redop, ctx.rank, lo, hi, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        # torch >= 2.12 renamed reduce_scatter_tensor; keep working on older releases.
        reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return bound_call(reduce_scatter, bufs.recv, bufs.send, op=ctx.reduce_op, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        # ncclReduceScatter's count is one rank's share of the result.
        return comm.call(
            "reduce_scatter", ptr(bufs.send), ptr(bufs.recv), bufs.recv.numel(),
            comm.dtype(ctx.dtype.name), comm.redop(ctx.redop),
        )  # fmt: skip

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        b = bufs.layout.count
        return data.count_wrong(
            bufs.recv, lambda lo, hi: data.reduced_values(lo, hi, ctx), ctx, offset=ctx.rank * b
        )


OP = ReduceScatter()
