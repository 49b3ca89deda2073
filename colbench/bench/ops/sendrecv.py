"""sendrecv: each rank sends its buffer to rank+1 and receives rank-1's, all at once.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from colbench.bench.ops import data
from colbench.bench.ops.base import Buffers, Collective, Context, DirectComm, ptr

if TYPE_CHECKING:
    import torch.distributed as dist


class SendRecv(Collective):
    name = "sendrecv"
    nccl_tests_binary = "sendrecv_perf"
    summary = "each rank sends its buffer to rank+1 and receives from rank-1 (a ring shift)"
    busbw_rule = "busbw = algbw * 1"
    torch_call = "dist.batch_isend_irecv([isend to rank+1, irecv from rank-1]) then wait"
    # Sending from and receiving into one buffer at once races, so no in-place form.
    placements = ("out",)
    notes = "out-of-place only (sending and receiving one buffer at once races)"

    def busbw_factor(self, world_size: int) -> float:
        """Every rank sends and receives the whole buffer once over its own link."""
        return 1.0

    def unsupported(self, world_size: int, backend: str) -> str | None:
        # gloo cannot open a pair to its own rank; NCCL handles self-sends.
        if world_size < 2 and backend == "gloo":
            return "sendrecv needs at least 2 ranks on gloo (a rank cannot send to itself)"
        return None

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.poison(bufs.recv)
        data.fill(bufs.send, data.copy_of(ctx.rank, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        # The P2POp list is built here, once, so the timed call only posts and waits.
        n = ctx.world_size
        to_peer = ctx.global_rank((ctx.rank + 1) % n)
        from_peer = ctx.global_rank((ctx.rank - 1) % n)
        ops = [
            dist.P2POp(dist.isend, bufs.send, to_peer, ctx.group),
            dist.P2POp(dist.irecv, bufs.recv, from_peer, ctx.group),
        ]
        return functools.partial(_exchange, dist.batch_isend_irecv, ops)

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        # Ranks of the communicator: the group's, not torch's global ones.
        n, dtype, count = ctx.world_size, comm.dtype(ctx.dtype.name), bufs.send.numel()
        return comm.grouped(
            [
                comm.send(ptr(bufs.send), count, dtype, (ctx.rank + 1) % n),
                comm.recv(ptr(bufs.recv), count, dtype, (ctx.rank - 1) % n),
            ]
        )

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        src = (ctx.rank - 1) % ctx.world_size
        return data.count_wrong(bufs.recv, data.copy_of(src, ctx), ctx)


def _exchange(
    batch_isend_irecv: Callable[[list[dist.P2POp]], list[dist.Work]], ops: list[dist.P2POp]
) -> None:
    for work in batch_isend_irecv(ops):
        work.wait()


OP = SendRecv()
