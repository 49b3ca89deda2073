"""scatter: rank r ends with chunk r of the root's buffer.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

from collections.abc import Callable

from colbench.bench.ops import data
from colbench.bench.ops.base import Buffers, ChunkedCollective, Context, DirectComm, bound_call, ptr


class Scatter(ChunkedCollective):
    name = "scatter"
    nccl_tests_binary = "scatter_perf"
    summary = "rank r ends with chunk r (b elements) of the root's n*b elements"
    size_rule = "size_bytes = n * b * element size (the root's send buffer)"
    count_rule = "count = b, the elements each rank receives"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.scatter(output, scatter_list on root, src=root)"
    gathers = False
    rooted = True

    def busbw_factor(self, world_size: int) -> float:
        """The root must send away the n-1 chunks that are not its own."""
        return (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        if not (bufs.in_place and ctx.rank == ctx.root):
            data.poison(bufs.recv)
        if ctx.rank == ctx.root:
            data.fill(bufs.send, data.copy_of(ctx.root, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        scatter_list = bufs.chunks if ctx.rank == ctx.root else None
        root = ctx.global_rank(ctx.root)
        return bound_call(dist.scatter, bufs.recv, scatter_list, src=root, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        b, dtype = bufs.layout.count, comm.dtype(ctx.dtype.name)
        send, recv = ptr(bufs.send), ptr(bufs.recv)
        if comm.native_exchange:
            return comm.call("scatter", send, recv, b, dtype, ctx.root)
        # Before NCCL 2.28, as nccl-tests: the root sends each rank its slot.
        calls = []
        if ctx.rank == ctx.root:
            step = b * ctx.dtype.elem_bytes
            calls += [comm.send(send + r * step, b, dtype, r) for r in range(ctx.world_size)]
        calls.append(comm.recv(recv, b, dtype, ctx.root))
        return comm.grouped(calls)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        offset = ctx.rank * bufs.layout.count
        return data.count_wrong(bufs.recv, data.copy_of(ctx.root, ctx), ctx, offset)


OP = Scatter()
