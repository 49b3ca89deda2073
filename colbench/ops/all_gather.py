"""all_gather: every rank ends with the concatenation of all ranks' chunks."""

from __future__ import annotations

import functools
from collections.abc import Callable

from colbench.ops import data
from colbench.ops.base import Buffers, Collective, Context, Layout, Storage, per_rank_chunk


class AllGather(Collective):
    name = "all_gather"
    nccl_tests_binary = "all_gather_perf"
    summary = "every rank ends with the concatenation of every rank's chunk of b elements"
    size_rule = "size_bytes = total received bytes = b * n * element size"
    count_rule = "count = b, the elements each rank sends (16-byte aligned share of the request)"
    busbw_rule = "busbw = algbw * (n-1)/n"
    torch_call = "dist.all_gather_single(output, input)"
    nccl_name = "allgather"
    nccl_algorithms = ("Ring", "CollnetDirect", "NVLS", "PAT")

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        b = per_rank_chunk(requested_bytes, elem_bytes, world_size)
        return Layout(b, b * world_size * elem_bytes, b, b * world_size)

    def busbw_factor(self, world_size: int) -> float:
        """Each rank must receive the n-1 chunks it lacks, (n-1)/n of the output."""
        return (world_size - 1) / world_size

    def views(self, storage: Storage, layout: Layout, ctx: Context, in_place: bool) -> Buffers:
        recv = storage.recv[: layout.recv_numel]
        b = layout.count
        # In place, as in nccl-tests, the input is this rank's slot of the output.
        send = recv[ctx.rank * b : (ctx.rank + 1) * b] if in_place else storage.send[:b]
        return Buffers(send, recv, in_place, layout)

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        data.poison(bufs.recv)
        data.fill(bufs.send, lambda lo, hi: data.values("copy", ctx.rank, lo, hi, ctx))

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        # torch >= 2.12 renamed all_gather_into_tensor; keep working on older releases.
        all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return functools.partial(all_gather, bufs.recv, bufs.send, group=ctx.group)

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return data.count_wrong_blocks(bufs.recv, bufs.layout.count, ctx)


OP = AllGather()
