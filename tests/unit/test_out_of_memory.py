"""Allocator failures are recognised on every torch colbench supports (torch>=2.3).

``torch.OutOfMemoryError`` came after torch 2.3: torch 2.3.1 (checked in its wheel)
has only ``torch.cuda.OutOfMemoryError``, which CPU builds define too. The tests remove
the newer name from the real torch module to run as torch 2.3 would.
"""

from __future__ import annotations

import pytest
import torch

from colbench.bench import memory


def cuda_oom() -> BaseException:
    return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_torch_without_the_device_agnostic_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "OutOfMemoryError", raising=False)
    assert not hasattr(torch, "OutOfMemoryError")
    assert torch.cuda.OutOfMemoryError in memory.out_of_memory_errors()
    assert memory.is_out_of_memory(cuda_oom())
    assert memory.is_out_of_memory(MemoryError())
    assert memory.is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert not memory.is_out_of_memory(RuntimeError("NCCL error: unhandled system error"))
    assert not memory.is_out_of_memory(ValueError("out of memory"))


def test_a_real_failed_cpu_allocation_on_old_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "OutOfMemoryError", raising=False)
    with pytest.raises(Exception) as info:
        torch.empty(1 << 62, dtype=torch.uint8)
    assert memory.is_out_of_memory(info.value)


def test_newer_torch_uses_the_device_agnostic_class() -> None:
    if not hasattr(torch, "OutOfMemoryError"):
        pytest.skip("this torch predates torch.OutOfMemoryError")
    assert torch.OutOfMemoryError in memory.out_of_memory_errors()
    assert memory.is_out_of_memory(torch.OutOfMemoryError("out of memory on device"))
    assert memory.is_out_of_memory(cuda_oom())


def test_small_buffers_and_the_barrier_fit_a_small_budget() -> None:
    # Verification scratch is chunked: a buffer smaller than a chunk needs scratch of its
    # own length, a barrier none; charging each the whole chunk's 64 MiB skipped them all
    # under a 32M --memory-limit (and the sweep then refused as nothing fitting).
    from colbench.bench.plan import fit_to_memory, plan
    from colbench.config.model import SweepConfig

    cfg = SweepConfig.of(ops=("barrier", "all_reduce"), sizes_bytes=(1024, 1 << 26))
    work = plan(cfg, 2, "gloo")
    kept, notes = fit_to_memory(work, 32 * 2**20)
    sizes = {item.coll.name: list(item.requested) for item in kept}
    assert sizes["all_reduce"] == [1024] and "barrier" in sizes
    assert len(notes) == 1 and "all_reduce float32: sizes from 67108864 B" in notes[0]
