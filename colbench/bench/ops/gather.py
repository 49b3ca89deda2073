"""gather: the root ends with the concatenation of all ranks' chunks.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

from collections.abc import Callable

from colbench.bench.ops import data
from colbench.bench.ops.base import Buffers, ChunkedCollective, Context, DirectComm, bound_call, ptr


class Gather(ChunkedCollective):
    name = "gather"
    nccl_tests_binary = "gather_perf"
    summary = "the root ends with the concatenation of every rank's chunk of b elements"
    size_rule = "size_bytes = n * b * element size (the root's receive buffer)"
    count_rule = "count = b, the elements each rank sends"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.gather(input, gather_list on root, dst=root)"
    gathers = True
    rooted = True

    def busbw_factor(self, world_size: int) -> float:
        """The root must receive the n-1 chunks it does not hold, (n-1)/n of its buffer."""
        return (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill_own_copy(bufs.send, bufs.recv, ctx)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        gather_list = bufs.chunks if ctx.rank == ctx.root else None
        root = ctx.global_rank(ctx.root)
        return bound_call(dist.gather, bufs.send, gather_list, dst=root, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        b, dtype = bufs.layout.count, comm.dtype(ctx.dtype.name)
        send, recv = ptr(bufs.send), ptr(bufs.recv)
        if comm.native_exchange:
            return comm.call("gather", send, recv, b, dtype, ctx.root)
        # Before NCCL 2.28, as nccl-tests: every rank sends to the root, which receives
        # each rank's chunk into its slot.
        calls = [comm.send(send, b, dtype, ctx.root)]
        if ctx.rank == ctx.root:
            step = b * ctx.dtype.elem_bytes
            calls += [comm.recv(recv + r * step, b, dtype, r) for r in range(ctx.world_size)]
        return comm.grouped(calls)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        if ctx.rank != ctx.root:
            return 0
        return data.count_wrong_blocks(bufs.recv, bufs.layout.count, ctx)


OP = Gather()
