"""A real collective that damages one output element where a test says: the verification
tests' way to make a wrong result without mocking the collective under test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from colbench.bench.ops.base import Buffers, Collective, Context

#: Whether this call, on this rank, gets its output damaged.
Where = Callable[[Collective, Buffers, Context], bool]


class Corrupting(Collective):
    """Runs the real collective, then adds one to the middle output element where
    ``where`` says; everything else (layout, buffers, check) is the real op's."""

    def __init__(self, inner: Collective, where: Where) -> None:
        self.inner = inner
        self.where = where
        self.name = inner.name  # type: ignore[misc]
        self.uses_redop = inner.uses_redop  # type: ignore[misc]
        self.rooted = inner.rooted  # type: ignore[misc]
        self.placements = inner.placements  # type: ignore[misc]

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Any:
        return self.inner.layout(requested_bytes, elem_bytes, world_size)

    def busbw_factor(self, world_size: int) -> float:
        return self.inner.busbw_factor(world_size)

    def views(self, storage: Any, layout: Any, ctx: Context, in_place: bool) -> Buffers:
        return self.inner.views(storage, layout, ctx, in_place)

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        self.inner.fill(bufs, ctx)

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        call = self.inner.bind(bufs, ctx)

        def run() -> None:
            call()
            if self.where(self.inner, bufs, ctx):
                out = bufs.recv.view(-1)
                out[out.numel() // 2] += 1

        return run

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        return self.inner.count_wrong(bufs, ctx)
