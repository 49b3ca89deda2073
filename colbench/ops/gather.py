"""gather: the root ends with the concatenation of all ranks' chunks."""

from __future__ import annotations

import functools
from collections.abc import Callable

from colbench.ops import data
from colbench.ops.base import Buffers, Collective, Context, Layout, Storage, per_rank_chunk


class Gather(Collective):
    name = "gather"
    nccl_tests_binary = "gather_perf"
    summary = "the root ends with the concatenation of every rank's chunk of b elements"
    size_rule = "size_bytes = n * b * element size (the root's receive buffer)"
    count_rule = "count = b, the elements each rank sends"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.gather(input, gather_list on root, dst=root)"
    rooted = True

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        b = per_rank_chunk(requested_bytes, elem_bytes, world_size)
        return Layout(b, b * world_size * elem_bytes, b, b * world_size)

    def busbw_factor(self, world_size: int) -> float:
        """The root must receive the n-1 chunks it does not hold, (n-1)/n of its buffer."""
        return (world_size - 1) / world_size

    def views(self, storage: Storage, layout: Layout, ctx: Context, in_place: bool) -> Buffers:
        b = layout.count
        recv = storage.recv[: layout.recv_numel]
        chunks = list(recv.split(b)) if b else []
        # In place, the root's input is its own slot of the output, as in nccl-tests.
        on_root_in_place = in_place and ctx.rank == ctx.root
        send = recv[ctx.rank * b : (ctx.rank + 1) * b] if on_root_in_place else storage.send[:b]
        return Buffers(send, recv, in_place, layout, chunks)

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.poison(bufs.recv)
        data.fill(bufs.send, lambda lo, hi: data.values("copy", ctx.rank, lo, hi, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        gather_list = bufs.chunks if ctx.rank == ctx.root else None
        root = ctx.global_rank(ctx.root)
        return functools.partial(dist.gather, bufs.send, gather_list, dst=root, group=ctx.group)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        if ctx.rank != ctx.root:
            return 0
        return data.count_wrong_blocks(bufs.recv, bufs.layout.count, ctx)


OP = Gather()
