"""broadcast: every rank ends with the root's buffer.

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


class Broadcast(Collective):
    name = "broadcast"
    nccl_tests_binary = "broadcast_perf"
    summary = "every rank ends with a copy of the root's buffer"
    busbw_rule = "busbw = algbw * 1"
    torch_call = "dist.broadcast(tensor, src=root)"
    nccl_function = "Broadcast"
    ring_cost = RingCost(1, False, False, "pipelined chain: N-1 steps, S sent")
    rooted = True
    # torch's broadcast has one tensor: the root's input is every rank's output.
    placements = ("in",)
    notes = "in-place only (torch has no out-of-place broadcast)"

    def busbw_factor(self, world_size: int) -> float:
        """A pipelined broadcast moves the whole buffer over every link once, so the bus
        bandwidth equals the algorithm bandwidth whatever n is."""
        return 1.0

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        if ctx.rank == ctx.root:
            data.fill(bufs.recv, data.copy_of(ctx.root, ctx))
        else:
            data.poison(bufs.recv)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        root = ctx.global_rank(ctx.root)
        return bound_call(dist.broadcast, bufs.recv, src=root, group=ctx.group)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        # NCCL's root is a rank of the communicator, the group's rank (torch's is global).
        return comm.call(
            "broadcast", ptr(bufs.send), ptr(bufs.recv), bufs.recv.numel(),
            comm.dtype(ctx.dtype.name), ctx.root,
        )  # fmt: skip

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return data.count_wrong(bufs.recv, data.copy_of(ctx.root, ctx), ctx)


OP = Broadcast()
