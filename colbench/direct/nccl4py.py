"""nccl4py, NVIDIA's Python bindings for NCCL, as colbench uses them: the one module that
imports it.

The timed call goes to nccl4py's low-level bindings (``nccl.bindings.nccl``: plain
integers in, one C call), not to its ``Communicator`` methods, which resolve and check
every buffer on every call. :class:`DirectComm` holds what the ops' direct calls need
already resolved: the communicator handle, the stream, NCCL's numbers for dtypes and
reductions, and which native calls the NCCL in use has.

The package is an optional extra (``pip install 'colbench[nccl]'``): importing this
module imports nothing of it; :func:`missing` says, without importing it, whether it can
be loaded.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.errors import UsageError

#: How a user gets nccl4py (README, docs/gpu.md and the refusal say the same).
INSTALL = "pip install 'colbench[nccl]'"

#: NCCL 2.28 added ncclAlltoAll, ncclGather and ncclScatter; before it, nccl-tests builds
#: them from grouped send/recv, and so does colbench. NCCL's version code is
#: major*10000 + minor*100 + patch from 2.9 on.
NATIVE_EXCHANGE_VERSION = 22800


def version_text(code: int) -> str:
    """NCCL's version code as ``2.28.9``."""
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def missing() -> str | None:
    """Why nccl4py cannot be used here (one line), or None; imports nothing of it, so the
    parent, which never touches CUDA, can ask."""
    try:
        if importlib.util.find_spec("nccl.core") is not None:
            return None
    except (ImportError, ValueError):
        pass
    return f"--engine nccl needs nccl4py, which is not installed: {INSTALL}"


def load() -> Any:
    """The ``nccl`` package (core and bindings loaded), or a UsageError naming the fix."""
    why = missing()
    if why is not None:
        raise UsageError(why)
    try:
        import nccl.bindings.nccl
        import nccl.core
    except ImportError as exc:  # found but broken: no libnccl, a CUDA major mismatch
        raise UsageError(f"--engine nccl: nccl4py is installed but cannot load: {exc}") from exc
    return nccl


@dataclass(frozen=True)
class DirectComm:
    """One rank's NCCL communicator and everything a direct call needs, resolved once."""

    raw: Any
    """``nccl.bindings.nccl``: the functions that are one C call each."""
    handle: Any
    """The communicator as the bindings take it."""
    stream: int
    """The CUDA stream every call launches on (0: the default stream)."""
    version: int
    """NCCL's version code (22809 for 2.28.9)."""
    rank: int
    nranks: int
    dtypes: Any
    """nccl4py's NcclDataType."""
    redops: Any
    """nccl4py's NcclRedOp."""

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        """NCCL's version as (2, 28, 9)."""
        return (self.version // 10000, self.version % 10000 // 100, self.version % 100)

    @property
    def native_exchange(self) -> bool:
        """Whether ncclAlltoAll, ncclGather and ncclScatter exist in this NCCL."""
        return self.version >= NATIVE_EXCHANGE_VERSION

    def dtype(self, name: str) -> int:
        """NCCL's number for a colbench dtype (``bfloat16`` -> ncclBfloat16)."""
        return int(getattr(self.dtypes, name.upper()))

    def redop(self, name: str) -> int:
        """NCCL's number for a colbench reduction (``prod`` -> ncclProd)."""
        return int(getattr(self.redops, name.upper()))

    def call(self, function: str, *args: Any) -> Callable[[], object]:
        """One NCCL call with every argument bound; the stream and communicator last, in
        NCCL's argument order."""
        return functools.partial(getattr(self.raw, function), *args, self.handle, self.stream)

    def grouped(self, calls: Sequence[Callable[[], object]]) -> Callable[[], object]:
        """Several calls launched as one (ncclGroupStart ... ncclGroupEnd)."""
        start, end, every = self.raw.group_start, self.raw.group_end, tuple(calls)

        def run() -> None:
            start()
            for one in every:
                one()
            end()

        return run

    def send(self, ptr: int, count: int, dtype: int, peer: int) -> Callable[[], object]:
        return self.call("send", ptr, count, dtype, peer)

    def recv(self, ptr: int, count: int, dtype: int, peer: int) -> Callable[[], object]:
        return self.call("recv", ptr, count, dtype, peer)


class Nccl:
    """nccl4py loaded: the unique id, the communicator, buffers from ncclMemAlloc."""

    def __init__(self, package: Any = None) -> None:
        self._nccl = package if package is not None else load()
        self.core = self._nccl.core
        self.raw = self._nccl.bindings.nccl

    def version(self) -> int:
        return int(self.raw.get_version())

    def unique_id(self) -> bytes:
        """A fresh ncclUniqueId's bytes (rank 0 makes it; the side group carries it)."""
        return bytes(self.core.get_unique_id())

    def init(self, nranks: int, rank: int, id_bytes: bytes) -> Any:
        """ncclCommInitRank over the id every rank received; the nccl4py Communicator."""
        uid = self.core.UniqueId.from_bytes(id_bytes)
        return self.core.Communicator.init(nranks, rank, uid)

    def comm(self, communicator: Any, stream: int) -> DirectComm:
        # nccl4py's own methods pass ``_comm`` to the bindings: the handle they take.
        return DirectComm(
            raw=self.raw,
            handle=communicator._comm,
            stream=stream,
            version=self.version(),
            rank=communicator.rank,
            nranks=communicator.nranks,
            dtypes=self.core.NcclDataType,
            redops=self.core.NcclRedOp,
        )

    def empty(
        self, numel: int, dtype: Any, device: Any, keep: Callable[[Any], None] | None = None
    ) -> Any:
        """A torch tensor over ncclMemAlloc'd memory (what buffer registration needs),
        freed when the tensor is; ``keep`` is handed the whole allocation first (to
        register it)."""
        # ncclMemAlloc of 0 bytes is an error: an empty buffer (a rank an uneven
        # all_to_allv sends nothing) is a slice of one element.
        whole = self._nccl.core.torch.empty(max(numel, 1), dtype=dtype, device=device)
        if keep is not None:
            keep(whole)
        return whole[:numel]

    def register(self, communicator: Any, tensor: Any, mode: str) -> Any:
        """nccl-tests' -R: ``local`` is ncclCommRegister, ``symmetric`` ncclCommWindowRegister
        with NCCL_WIN_COLL_SYMMETRIC. nccl4py's handle: ``handle`` (0 where NCCL registered
        nothing) and ``close()`` (deregister)."""
        if mode == "symmetric":
            return communicator.register_window(tensor, self.core.WindowFlag.COLL_SYMMETRIC)
        return communicator.register_buffer(tensor)

    def library_path(self) -> str:
        """The libnccl nccl4py loaded, to compare with torch's."""
        try:
            return str(self.raw.get_library_path() or "")
        except AttributeError:
            return ""
