"""all_to_all: rank r sends its j-th chunk to rank j and receives rank j's r-th chunk.

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
    Layout,
    bound_call,
    per_rank_chunk,
    ptr,
)


class AllToAll(Collective):
    name = "all_to_all"
    traced_names = ("alltoallbase", "alltoallsingle")
    exchange = True
    nccl_tests_binary = "alltoall_perf"
    summary = "rank r sends chunk j of its n*b elements to rank j and receives chunk r from each"
    size_rule = "size_bytes = n * b * element size (one rank's whole send buffer)"
    count_rule = "count = b, the elements exchanged with each peer"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.all_to_all_single(output, input)"
    # all_to_all_single with input == output is not a supported in-place form (gloo
    # returns the input unchanged), so only out-of-place is offered.
    placements = ("out",)
    notes = "out-of-place only (in-place all_to_all is not a torch API)"

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        b = per_rank_chunk(requested_bytes, elem_bytes, world_size)
        return Layout(b, b * world_size * elem_bytes, b * world_size, b * world_size)

    def busbw_factor(self, world_size: int) -> float:
        """Of its n chunks each rank keeps one and exchanges n-1 over the network."""
        return (world_size - 1) / world_size

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.fill_own_copy(bufs.send, bufs.recv, ctx)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        return bound_call(dist.all_to_all_single, bufs.recv, bufs.send, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        b, dtype = bufs.layout.count, comm.dtype(ctx.dtype.name)
        if comm.native_exchange:
            return comm.call("allto_all", ptr(bufs.send), ptr(bufs.recv), b, dtype)
        # Before NCCL 2.28, as nccl-tests: one grouped send and receive per peer.
        step = b * ctx.dtype.elem_bytes
        send, recv = ptr(bufs.send), ptr(bufs.recv)
        calls = []
        for peer in range(ctx.world_size):
            calls += [
                comm.send(send + peer * step, b, dtype, peer),
                comm.recv(recv + peer * step, b, dtype, peer),
            ]
        return comm.grouped(calls)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        # Block `src` of my output is block `me` of rank src's input.
        b = bufs.layout.count
        return data.count_wrong_blocks(bufs.recv, b, ctx, offset=ctx.rank * b)


OP = AllToAll()
