"""A machine with GPUs, for tests on a machine without: CUDA's facts, NVML and NCCL's start.

Put this directory first on PYTHONPATH and set COLBENCH_FAKE_GPU_DIR: every Python
process of the run (the colbench parent, and its spawned ranks, which start a fresh
interpreter) then sees the GPUs described by COLBENCH_FAKE_GPUS, a JSON list of
``{"bus_id": "0000:17:00.0", "uuid": "GPU-...", "mode": "Default", "free_mib": 80000}``,
through torch.cuda (is_available, device_count, set_device, get_device_properties,
get_device_name) and through a ``pynvml`` module (NVML, as the parent reads it).

Streams are numbers (``torch.cuda.Stream``, ``set_stream``: recorded).

Nothing can run on these GPUs: ``torch.distributed.init_process_group("nccl")`` records
what the rank asked for (its device, and every NCCL_* / TORCH_NCCL_* variable as NCCL
would read it at that moment) and ends the rank with ``FakeNcclStop``. Every other
call a process makes on the fake (set_device, mem_get_info, NVML reads) is recorded too,
one JSON line per call in ``$COLBENCH_FAKE_GPU_DIR/<pid>.jsonl``, so a test can check
what the real code asked for and in which process (the parent must never touch CUDA).
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any

_DIR = os.environ.get("COLBENCH_FAKE_GPU_DIR")


class FakeNcclStop(RuntimeError):
    """NCCL cannot start on a fake GPU: the rank stops where its communicator would."""


def _gpus() -> list[dict[str, Any]]:
    return list(json.loads(os.environ.get("COLBENCH_FAKE_GPUS", "[]")))


def _visible() -> list[dict[str, Any]]:
    every = _gpus()
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    if shown is None:
        return every
    picked = []
    for token in shown.split(","):
        if not token.strip().isdigit() or int(token) >= len(every):
            break
        picked.append(every[int(token)])
    return picked


def record(call: str, **fields: Any) -> None:
    assert _DIR is not None
    import multiprocessing

    # Spawned ranks are multiprocessing children; the colbench parent is not.
    role = "parent" if multiprocessing.parent_process() is None else "rank"
    line = {"call": call, "pid": os.getpid(), "role": role, **fields}
    with open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _index(device: Any) -> int:
    return device if isinstance(device, int) else (device.index or 0)


def _properties(device: Any) -> Any:
    gpu = _visible()[_index(device)]
    domain, bus, rest = gpu["bus_id"].split(":")
    return types.SimpleNamespace(
        name="Fake H100",
        uuid=gpu["uuid"].removeprefix("GPU-"),
        pci_domain_id=int(domain, 16),
        pci_bus_id=int(bus, 16),
        pci_device_id=int(rest.split(".")[0], 16),
        total_memory=gpu.get("free_mib", 80000) * 2**20,
    )


def _mem_get_info(device: Any = None) -> tuple[int, int]:
    record("mem_get_info", device=str(device))
    free = _visible()[_index(device or 0)].get("free_mib", 80000) * 2**20
    return free, free


class _Stream:
    """A CUDA stream by number: the direct NCCL engine makes one and names it in its calls."""

    _made = 0

    def __init__(self, device: Any = None) -> None:
        _Stream._made += 1
        self.cuda_stream = 0x5EED0 + _Stream._made
        record("stream", index=_index(device or 0), handle=self.cuda_stream)


def _install_cuda() -> None:
    import torch

    cuda = torch.cuda
    cuda.Stream = _Stream  # type: ignore[misc,assignment]
    cuda.set_stream = lambda stream: record("set_stream", handle=stream.cuda_stream)
    cuda.get_device_capability = lambda device=None: (9, 0)
    cuda.nccl.version = lambda: (2, 28, 9)
    cuda.is_available = lambda: bool(_visible())
    cuda.device_count = lambda: len(_visible())
    cuda.set_device = lambda device: record("set_device", index=_index(device))
    cuda.get_device_properties = _properties
    cuda.get_device_name = lambda device=None: "Fake H100"
    cuda.mem_get_info = _mem_get_info


def _install_nccl() -> None:
    import torch.distributed as dist

    real_init = dist.init_process_group
    dist.is_nccl_available = lambda: True

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if backend != "nccl":
            return real_init(backend, *args, **kwargs)
        env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_"))}
        device = kwargs.get("device_id")
        record("nccl_init", rank=kwargs.get("rank"), env=env, device=_index(device))
        raise FakeNcclStop("fake GPU: NCCL would start here")

    dist.init_process_group = init_process_group


class _Memory:
    def __init__(self, gpu: dict[str, Any]) -> None:
        self.free = gpu.get("free_mib", 80000) * 2**20
        self.total = self.free


def _nvml_module() -> types.ModuleType:
    """A ``pynvml`` that answers from COLBENCH_FAKE_GPUS (NVML ignores CUDA_VISIBLE_DEVICES)."""
    nvml = types.ModuleType("pynvml")
    modes = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}

    def read(what: str, handle: int, value: Any) -> Any:
        record("nvml", what=what, index=handle)
        return value

    def gpu(handle: int) -> dict[str, Any]:
        return _gpus()[handle]

    nvml.nvmlInit = lambda: record("nvml", what="init")  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(_gpus())  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda h: read("name", h, "Fake H100")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUUID = lambda h: read("uuid", h, gpu(h)["uuid"])  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPciInfo = lambda h: read(  # type: ignore[attr-defined]
        "pci", h, types.SimpleNamespace(busId=("0000" + gpu(h)["bus_id"]).upper().encode())
    )
    nvml.nvmlDeviceGetComputeMode = lambda h: read(  # type: ignore[attr-defined]
        "compute_mode", h, modes[gpu(h).get("mode", "Default")]
    )
    nvml.nvmlDeviceGetMemoryInfo = lambda h: read("memory", h, _Memory(gpu(h)))  # type: ignore[attr-defined]
    return nvml


if _DIR:
    sys.modules["pynvml"] = _nvml_module()
    _install_cuda()
    _install_nccl()
