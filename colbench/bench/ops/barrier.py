"""barrier: no data; measures the latency of synchronising all ranks.

Timed by :meth:`colbench.bench.loop.RankBench.bench_time`, as every op is.
"""

from __future__ import annotations

from collections.abc import Callable

from colbench.bench.ops.all_reduce import AllReduce
from colbench.bench.ops.base import Buffers, Collective, Context, Layout, bound_call


class Barrier(Collective):
    name = "barrier"
    summary = "no data moves; every rank waits until all have arrived (latency only)"
    size_rule = "size_bytes = 0 (one row per sweep, outside the size loop)"
    count_rule = "count = 0"
    busbw_rule = "busbw = 0 (no bytes move; only time_us is meaningful)"
    torch_call = "dist.barrier()"
    sized = False
    # dist.barrier() synchronises the host with the other ranks, which a CUDA graph
    # cannot capture.
    graph_capturable = False
    blocks_host = True
    # On NCCL, torch's barrier is an all_reduce of one float32 element, summed: NCCL_ALGO
    # governs it as it governs all_reduce.
    nccl_function = AllReduce.nccl_function
    nccl_call_type = ("float32", "sum")
    placements = ("out",)

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        return Layout(0, 0, 0, 0)

    def busbw_factor(self, world_size: int) -> float:
        """No payload, so no bandwidth."""
        return 0.0

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        pass

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        import torch.distributed as dist

        return bound_call(dist.barrier, group=ctx.group)

    def direct_unsupported(self) -> str | None:
        return "NCCL has no barrier call (torch's is an all_reduce of one element)"

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return 0


OP = Barrier()
