"""The engines a sweep measures through: torch.distributed, or NCCL called directly.

The per-rank loop (colbench.bench.loop) asks its engine for buffers and for the timed
call of each buffer set, and never learns which one it has: the layouts, the fill, the
timers, the verification and the rows are the same code for both. The torch engine
(colbench.bench.groups' TorchEngine, on the measured group) is the op contract's torch
call; the direct engine is the op's NCCL call through nccl4py
(colbench.direct.nccl4py), on a communicator of its own, made by NCCL's unique-id
bootstrap over the gloo side group. A direct world's torch process group is gloo
(colbench.host.child): no torch NCCL communicator exists in it.

Comparing the two engines' rows gives what torch adds to every call (the torch tax,
colbench.analysis.torch_tax).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from colbench.bench.ops.base import TORCH, Buffers, Collective, Context, Layout, Storage
from colbench.direct.nccl4py import DirectComm, Nccl
from colbench.errors import UsageError

DIRECT = "nccl"
#: Every engine, the default first.
ENGINES = (TORCH, DIRECT)


def parse_engines(text: str) -> tuple[str, ...]:
    """``--engine torch,nccl`` -> ("torch", "nccl"), in the order given."""
    names = tuple(part.strip() for part in text.split(","))
    for name in names:
        if name not in ENGINES:
            raise UsageError(f"bad --engine {text!r}: use torch, nccl or torch,nccl")
    if len(set(names)) != len(names):
        raise UsageError(f"bad --engine {text!r}: an engine is listed twice")
    return names


def refusal(engines: Sequence[str], backend: str) -> str | None:
    """Why this machine cannot run the engines (one line), or None. Asked in the parent,
    before any rank starts; imports nothing of nccl4py."""
    if DIRECT not in engines:
        return None
    if backend != "nccl":
        return (
            f"--engine nccl calls NCCL on GPUs, and this run's backend is {backend}: "
            "use --engine torch (the default) here"
        )
    from colbench.direct.nccl4py import missing

    return missing()


class DirectEngine:
    """NCCL through nccl4py: one communicator, one stream, buffers from ncclMemAlloc."""

    name = DIRECT

    def __init__(self, nccl: Nccl, communicator: Any, comm: DirectComm) -> None:
        self.nccl = nccl
        self.communicator = communicator
        self.comm = comm

    @classmethod
    def create(
        cls,
        side: Any,
        rank: int,
        group_ranks: Sequence[int],
        stream: int = 0,
        nccl: Nccl | None = None,
    ) -> DirectEngine:
        """The communicator of this rank's measured group, by NCCL's unique-id bootstrap:
        the group's first rank makes the id, the gloo side group carries its bytes to
        every rank (one gather for all groups of --group-size at once).

        ``group_ranks``: the global ranks of this rank's group, in group order. ``stream``:
        the CUDA stream every call launches on, the one the timers record on.
        """
        nccl = nccl if nccl is not None else Nccl()
        mine = nccl.unique_id() if rank == group_ranks[0] else b""
        every = side.gather_objects(mine)
        id_bytes = every[group_ranks[0]]
        communicator = nccl.init(len(group_ranks), group_ranks.index(rank), id_bytes)
        return cls(nccl, communicator, nccl.comm(communicator, stream))

    def unsupported(self, coll: Collective) -> str | None:
        return coll.direct_unsupported()

    def allocate(self, coll: Collective, layout: Layout, ctx: Context, in_place: bool) -> Storage:
        # ncclMemAlloc, as nccl-tests allocates: what user-buffer registration needs.
        return coll.allocate(layout, ctx, in_place, empty=self._empty)

    def _empty(self, numel: int, dtype: Any, device: Any) -> Any:
        return self.nccl.empty(numel, dtype, device)

    def bind(self, coll: Collective, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        return coll.direct(bufs, ctx, self.comm)

    def close(self, abort: bool = False) -> None:
        """Destroy the communicator; abort it when this rank failed (ncclCommDestroy waits
        for the node's other ranks, ncclCommAbort does not) or destroying fails."""
        if abort:
            self.communicator.abort()
            return
        try:
            self.communicator.destroy()
        except Exception:
            self.communicator.abort()


def group_ranks(subgroup: Any, world_size: int) -> tuple[int, ...]:
    """The global ranks of this rank's measured group (the world without --group-size)."""
    return tuple(range(world_size)) if subgroup is None else tuple(subgroup.ranks)
