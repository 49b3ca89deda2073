"""Fake ``nccl.core``: the unique id, the communicator and the type enums."""

from __future__ import annotations

import enum
import os
from typing import Any

from nccl import _fake
from nccl.core import torch


class NcclDataType(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9


class NcclRedOp(enum.IntEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class WindowFlag(enum.IntFlag):
    DEFAULT = 0x00
    COLL_SYMMETRIC = 0x01


class Registered:
    """nccl4py's RegisteredBufferHandle / RegisteredWindowHandle: ``handle`` is 0 where
    NCCL registered nothing (COLBENCH_FAKE_NCCL_REGISTER=skip, as NCCL_LOCAL_REGISTER=0
    makes ncclCommRegister answer)."""

    def __init__(self, call: str, rank: int, ptr: int, size: int, **more: object) -> None:
        skip = os.environ.get("COLBENCH_FAKE_NCCL_REGISTER") == "skip"
        self.handle = 0 if skip else ptr
        self._call, self._rank, self._ptr = call, rank, ptr
        _fake.record(call, rank=rank, ptr=ptr, size=size, handle=self.handle, **more)
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _fake.record(self._call.replace("register", "deregister"), rank=self._rank,
                         ptr=self._ptr)  # fmt: skip


class UniqueId:
    def __init__(self, raw: bytes) -> None:
        self._raw = bytes(raw)

    def __bytes__(self) -> bytes:
        return self._raw

    @staticmethod
    def from_bytes(raw: bytes) -> UniqueId:
        return UniqueId(raw)


def get_unique_id() -> UniqueId:
    raw = os.urandom(128)  # ncclUniqueId is 128 bytes
    _fake.record("get_unique_id", id=raw.hex())
    return UniqueId(raw)


class Communicator:
    def __init__(self, comm: _fake.Comm) -> None:
        self._comm = comm

    @classmethod
    def init(cls, nranks: int, rank: int, unique_id: UniqueId) -> Communicator:
        raw = bytes(unique_id)
        _fake.record("comm_init", nranks=nranks, rank=rank, id=raw.hex())
        return cls(_fake.Comm(nranks, rank, raw))

    @property
    def rank(self) -> int:
        return self._comm.rank

    @property
    def nranks(self) -> int:
        return self._comm.nranks

    def register_buffer(self, tensor: Any) -> Registered:
        size = tensor.numel() * tensor.element_size()
        return Registered("comm_register", self.rank, tensor.data_ptr(), size)

    def register_window(self, tensor: Any, flags: WindowFlag | None = None) -> Registered:
        size = tensor.numel() * tensor.element_size()
        return Registered("comm_window_register", self.rank, tensor.data_ptr(), size,
                          flags=int(flags or 0))  # fmt: skip

    def destroy(self) -> None:
        _fake.record("comm_destroy", rank=self._comm.rank)

    def abort(self) -> None:
        _fake.record("comm_abort", rank=self._comm.rank)


__all__ = [
    "Communicator", "NcclDataType", "NcclRedOp", "UniqueId", "WindowFlag", "get_unique_id",
    "torch",
]  # fmt: skip
