"""Fake ``nccl.core.torch``: tensors over the fake ncclMemAlloc."""

from __future__ import annotations

from typing import Any

from nccl import _fake


def empty(numel: int, dtype: Any = None, device: Any = None) -> Any:
    # CPU memory whatever the device: this machine has no other.
    return _fake.allocate(int(numel), dtype)
