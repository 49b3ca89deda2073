"""all_gather: every rank ends with the concatenation of all ranks' chunks.

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


class AllGather(ChunkedCollective):
    name = "all_gather"
    traced_names = ("allgatherbase", "allgatherintotensor", "allgathersingle")
    nccl_tests_binary = "all_gather_perf"
    summary = "every rank ends with the concatenation of every rank's chunk of b elements"
    size_rule = "size_bytes = total received bytes = b * n * element size"
    count_rule = "count = b, the elements each rank sends (16-byte aligned share of the request)"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.all_gather_single(output, input)"
    gathers = True
    nccl_function = "AllGather"
    ring_cost = RingCost(1, True, False, "ring: N-1 steps, (N-1)/N*S sent")

    def busbw_factor(self, world_size: int) -> float:
        """Each rank must receive the n-1 chunks it lacks, (n-1)/n of the output."""
        return (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill_own_copy(bufs.send, bufs.recv, ctx)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        # torch >= 2.12 renamed all_gather_into_tensor; keep working on older releases.
        all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return bound_call(all_gather, bufs.recv, bufs.send, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        # ncclAllGather's count is one rank's share.
        return comm.call(
            "all_gather", ptr(bufs.send), ptr(bufs.recv), bufs.send.numel(),
            comm.dtype(ctx.dtype.name),
        )  # fmt: skip

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return data.count_wrong_blocks(bufs.recv, bufs.layout.count, ctx)


OP = AllGather()
