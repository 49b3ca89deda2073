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
colbench.results.join).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from colbench.bench.ops.base import TORCH, Buffers, Collective, Context, Layout, Storage
from colbench.direct.knobs import refusal as knob_refusal
from colbench.direct.nccl4py import DirectComm, Nccl
from colbench.direct.register import Registrations

DIRECT = "nccl"
#: Every engine, the default first.
ENGINES = (TORCH, DIRECT)


class DirectEngine:
    """NCCL through nccl4py: one communicator, one stream, buffers from ncclMemAlloc."""

    name = DIRECT

    def __init__(
        self,
        nccl: Nccl,
        communicator: Any,
        comm: DirectComm,
        registrations: Registrations | None = None,
        refused: str | None = None,
    ) -> None:
        self.nccl = nccl
        self.communicator = communicator
        self.comm = comm
        #: --register's: every allocation is registered; None: none is.
        self.registrations = registrations
        #: Why this engine measures nothing (every row unsupported), or None.
        self.refused = refused

    @classmethod
    def create(
        cls,
        side: Any,
        rank: int,
        group_ranks: Sequence[int],
        stream: int = 0,
        nccl: Nccl | None = None,
        register: str = "none",
        device: Any = None,
    ) -> DirectEngine:
        """The communicator of this rank's measured group, by NCCL's unique-id bootstrap:
        the group's first rank makes the id, the gloo side group carries its bytes to
        every rank (one gather for all groups of --group-size at once).

        ``group_ranks``: the global ranks of this rank's group, in group order. ``stream``:
        the CUDA stream every call launches on, the one the timers record on.
        ``register``: --register's mode (nccl-tests' -R); every rank tries it once here
        and all refuse alike when any one cannot (colbench.direct.register).
        """
        nccl = nccl if nccl is not None else Nccl()
        mine = nccl.unique_id() if rank == group_ranks[0] else b""
        every = side.gather_objects(mine)
        id_bytes = every[group_ranks[0]]
        communicator = nccl.init(len(group_ranks), group_ranks.index(rank), id_bytes)
        comm = nccl.comm(communicator, stream)
        if register == "none":
            return cls(nccl, communicator, comm)
        import torch

        registrations = Registrations(nccl, communicator, register)
        why = knob_refusal(register, {}, comm.version_tuple) or registrations.trial(
            device, torch.float32
        )
        said = [w for w in side.gather_objects(why) if w is not None]
        if said:
            return cls(nccl, communicator, comm, None, said[0])
        return cls(nccl, communicator, comm, registrations)

    def unsupported(self, coll: Collective) -> str | None:
        return self.refused or coll.direct_unsupported()

    def allocate(self, coll: Collective, layout: Layout, ctx: Context, in_place: bool) -> Storage:
        # ncclMemAlloc, as nccl-tests allocates: what user-buffer registration needs.
        return coll.allocate(layout, ctx, in_place, empty=self._empty)

    def _empty(self, numel: int, dtype: Any, device: Any) -> Any:
        keep = self.registrations.add if self.registrations is not None else None
        return self.nccl.empty(numel, dtype, device, keep)

    def bind(self, coll: Collective, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        return coll.direct(bufs, ctx, self.comm)

    def close(self, abort: bool = False) -> None:
        """Destroy the communicator; abort it when this rank failed (ncclCommDestroy waits
        for the node's other ranks, ncclCommAbort does not) or destroying fails."""
        if self.registrations is not None:
            self.registrations.release()
        if abort:
            self.communicator.abort()
            return
        try:
            self.communicator.destroy()
        except Exception:
            self.communicator.abort()


#: Why the torch engine's rows are unsupported under --register.
TORCH_CANNOT_REGISTER = (
    "--register registers buffers through NCCL's own API (ncclCommRegister, "
    "ncclCommWindowRegister), which torch.distributed's calls here do not use: "
    "only --engine nccl's rows are registered"
)


def group_ranks(subgroup: Any, world_size: int) -> tuple[int, ...]:
    """The global ranks of this rank's measured group (the world without --group-size)."""
    return tuple(range(world_size)) if subgroup is None else tuple(subgroup.ranks)
