"""What the fake nccl4py records, and how it moves data without a GPU.

Every call a process makes is one JSON line in ``$COLBENCH_FAKE_NCCL_DIR/<pid>.jsonl``
(and in :data:`CALLS`), so a test checks what colbench asked of NCCL: the unique id made
and the bytes each rank's communicator was created with, every collective's pointers,
counts, types and stream.

The calls also do what NCCL would, so colbench's verification checks real results:
buffers are CPU tensors from the fake ncclMemAlloc, a pointer is resolved to the
allocation holding it, and each call exchanges every rank's contribution over a gloo
group of the world made when the communicator is (the fake's own transport, never one of
colbench's groups). ``COLBENCH_FAKE_NCCL_VERSION`` sets the version NCCL reports
(default 22809, 2.28.9: native alltoall, gather and scatter; 22703 has none).
``COLBENCH_FAKE_NCCL_REGISTER=skip`` makes every registration answer a null handle, as
NCCL does under NCCL_LOCAL_REGISTER=0.
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

import torch

CALLS: list[dict[str, Any]] = []

#: ncclDataType_t -> torch dtype (the values nccl4py's NcclDataType mirrors).
TORCH_DTYPES = {
    0: torch.int8,
    1: torch.uint8,
    2: torch.int32,
    3: torch.uint32,
    4: torch.int64,
    5: torch.uint64,
    6: torch.float16,
    7: torch.float32,
    8: torch.float64,
    9: torch.bfloat16,
}

#: Every live allocation by its address: the pointers colbench passes are resolved here.
#: Held weakly, so an allocation is freed when colbench drops its last view, as
#: nccl4py's are (and a registration's release can be seen to come first).
_ALLOCATIONS: weakref.WeakValueDictionary[int, torch.UntypedStorage] = weakref.WeakValueDictionary()


def version() -> int:
    return int(os.environ.get("COLBENCH_FAKE_NCCL_VERSION", "22809"))


def record(call: str, **fields: Any) -> None:
    line = {"call": call, "pid": os.getpid(), **fields}
    CALLS.append(line)
    where = os.environ.get("COLBENCH_FAKE_NCCL_DIR")
    if where:
        with open(os.path.join(where, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def allocate(numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A view of a base tensor, as nccl4py's torch.empty returns (a view of the DLPack
    tensor over ncclMemAlloc's memory)."""
    # At least one element, so every allocation has an address of its own.
    base = torch.empty(max(numel, 1), dtype=dtype)
    storage = base.untyped_storage()
    _ALLOCATIONS[storage.data_ptr()] = storage
    record("mem_alloc", numel=numel, dtype=str(dtype).removeprefix("torch."))
    return base.view(dtype)[:numel]


def view(ptr: int, count: int, dtype: int) -> torch.Tensor:
    """``count`` elements of NCCL type ``dtype`` at ``ptr``, inside a fake allocation."""
    want = TORCH_DTYPES[dtype]
    size = torch.empty(0, dtype=want).element_size()
    for base, storage in list(_ALLOCATIONS.items()):
        if base <= ptr and ptr + count * size <= base + storage.nbytes():
            raw = torch.empty(0, dtype=torch.uint8).set_(storage)
            start = ptr - base
            return raw[start : start + count * size].view(want)
    raise RuntimeError(f"fake NCCL: {count} x {want} at {ptr:#x} is in no ncclMemAlloc buffer")


class Comm:
    """A fake communicator: its rank, size, id, and the gloo group it moves data over."""

    def __init__(self, nranks: int, rank: int, id_bytes: bytes) -> None:
        import torch.distributed as dist

        self.nranks, self.rank, self.id = nranks, rank, id_bytes.hex()
        # Every process of the world makes its communicator at once (colbench's
        # --group-size groups each have their own id): learn who shares this id, then
        # make one gloo group per id, in the same order everywhere, as new_group needs.
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, (self.id, rank, dist.get_rank()))
        ids = list(dict.fromkeys(i for i, _, _ in every))
        for one in ids:
            members = sorted((r, g) for i, r, g in every if i == one)
            if [r for r, _ in members] != list(range(len(members))):
                raise RuntimeError(f"fake NCCL: communicator {one[:16]} has ranks {members}")
            group = dist.new_group(ranks=[g for _, g in members], backend="gloo")
            if one == self.id:
                if len(members) != nranks:
                    raise RuntimeError(f"fake NCCL: {len(members)} ranks joined, not {nranks}")
                self._group = group
        self.pending: list[tuple[str, int, int, int, int]] | None = None

    def exchange(self, mine: Any) -> list[Any]:
        import torch.distributed as dist

        every: list[Any] = [None] * self.nranks
        dist.all_gather_object(every, mine, group=self._group)
        return every


def reduce(parts: list[torch.Tensor], op: int) -> torch.Tensor:
    """NCCL's reduction (sum, prod, max, min, avg) of every rank's part, in its type."""
    out = parts[0].clone()
    for part in parts[1:]:
        if op in (0, 4):
            out += part
        elif op == 1:
            out *= part
        elif op == 2:
            out = torch.maximum(out, part)
        else:
            out = torch.minimum(out, part)
    if op == 4:
        out /= len(parts)
    return out
