"""User-buffer registration for the direct engine (``--register``, nccl-tests' ``-R``).

nccl-tests registers its send and receive buffers once, right after allocating them
(``ncclCommRegister``, or ``ncclCommWindowRegister`` with ``NCCL_WIN_COLL_SYMMETRIC``
for ``-R 2``), and deregisters them before freeing. The direct engine does the same
with every buffer it takes from ncclMemAlloc: :meth:`Registrations.add` registers the
whole allocation, and the registration is released when the last tensor on that
memory dies, before the memory is freed (a registration outliving its memory would
leave NCCL a stale range that a later allocation at the same address falls into).

Before anything is measured, :meth:`Registrations.trial` registers one small buffer and
says, in one line, why registration cannot be had here: NCCL answers a registration it
skips (``NCCL_LOCAL_REGISTER=0``, peers that copy through memcpy; windows where the
communicator has no symmetric memory) with a null handle and no error, which would
otherwise measure unregistered buffers under a registered row's name.
"""

from __future__ import annotations

import weakref
from typing import Any

from colbench.direct.nccl4py import INSTALL, Nccl

#: nccl4py's method per mode, to name in a refusal.
_METHOD = {"local": "register_buffer", "symmetric": "register_window"}
#: The NCCL call behind each mode.
_CALL = {"local": "ncclCommRegister", "symmetric": "ncclCommWindowRegister"}


class Registrations:
    """The live registrations of one communicator, in one mode (``local`` or ``symmetric``)."""

    def __init__(self, nccl: Nccl, communicator: Any, mode: str) -> None:
        self.nccl = nccl
        self.communicator = communicator
        self.mode = mode
        self._live: list[weakref.finalize] = []

    def add(self, allocation: Any) -> None:
        """Register ``allocation`` (all of one ncclMemAlloc) until its last view dies.

        A symmetric window is collective: every rank registers its allocations in the same
        order, which holds because every rank allocates the same buffers of the same plan."""
        handle = self.nccl.register(self.communicator, allocation, self.mode)
        # The storage, not a tensor: nccl4py's tensor is a dtype view of the one over the
        # memory, and torch keeps neither alive for the views colbench makes; the
        # storage's Python object lives exactly as long as any tensor on the memory, and
        # dies before the memory is freed.
        self._live = [f for f in self._live if f.alive]
        self._live.append(weakref.finalize(allocation.untyped_storage(), handle.close))

    def trial(self, device: Any, dtype: Any) -> str | None:
        """Register one small buffer and release it: why this NCCL will not, or None."""
        method = _METHOD[self.mode]
        if not hasattr(self.communicator, method):
            return (
                f"--register {self.mode}: this nccl4py has no Communicator.{method} "
                f"({_CALL[self.mode]}); upgrade it: {INSTALL}"
            )
        probe = self.nccl.empty(256, dtype, device)
        handle = self.nccl.register(self.communicator, probe, self.mode)
        try:
            if int(handle.handle or 0) == 0:
                return f"--register {self.mode}: {_SKIPPED[self.mode]}"
            return None
        finally:
            handle.close()

    def release(self) -> None:
        """Forget every registration: the communicator is being destroyed or aborted, and
        nccl4py releases what it registered then (a later finalizer would name a dead
        communicator)."""
        for live in self._live:
            live.detach()
        self._live.clear()


_SKIPPED = {
    "local": (
        "NCCL answered ncclCommRegister with no handle, so it registers nothing: "
        "NCCL_LOCAL_REGISTER=0, or its peers copy through memcpy (NCCL_DEBUG_SUBSYS=REG "
        "logs 'Skipping registration ...' with which)"
    ),
    "symmetric": (
        "NCCL answered ncclCommWindowRegister with no window: this communicator has no "
        "symmetric memory (it needs every peer reachable by CUDA P2P, cuMem, and "
        "NCCL_WIN_ENABLE not 0)"
    ),
}
