"""A node's GPUs through NVML (nvidia-ml-py): model, PCIe link, NVLink, NVSwitch.

NVML answers without a CUDA context. A fact NVML does not give (a VM's GPU without
NVLink or PCIe link reports, an old driver without the call) is None, never guessed:
``NVMLError_NotSupported`` on NVLink link 0 means the GPU has no NVLink (0 links);
any other failure leaves the fact unknown.
"""

from __future__ import annotations

from typing import Any

from colbench.launch.gpus import normal_bus_id, pynvml_module

#: NVML's largest NVLink count per GPU (NVML_NVLINK_MAX_LINKS).
_MAX_LINKS = 18
#: nvmlNvLinkDeviceType_t: the far end of an NVLink is an NVSwitch.
_SWITCH = 2
#: Bytes per second per NVLink link and direction, by NVLink version as NVML numbers
#: it (1: P100; 2: V100; 3: A100; 4: H100; 5: B200), in GB/s.
NVLINK_LINK_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _maybe(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:
        return None


def read(nvml: Any = None) -> list[dict[str, Any]] | None:
    """Every GPU NVML sees, in its order; None where NVML is absent or fails to start
    (a CPU-only node). ``nvml`` replaces the pynvml module (tests)."""
    module = nvml if nvml is not None else pynvml_module()
    if module is None:
        return None
    try:
        module.nvmlInit()
    except Exception:
        return None
    try:
        return [_gpu(module, i) for i in range(module.nvmlDeviceGetCount())]
    except Exception:
        return None
    finally:
        _maybe(module.nvmlShutdown)


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    pci = _maybe(nvml.nvmlDeviceGetPciInfo, handle)
    link = {
        "gen": _maybe(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        "width": _maybe(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        "max_gen": _maybe(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "max_width": _maybe(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    }
    links, version, switch = _nvlink(nvml, handle)
    return {
        "index": index,
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "bus_id": normal_bus_id(_text(pci.busId)) if pci is not None else None,
        "pcie": link if any(v is not None for v in link.values()) else None,
        "nvlink_links": links,
        "nvlink_version": version,
        "nvswitch": switch,
    }


def _nvlink(nvml: Any, handle: Any) -> tuple[int | None, int | None, bool | None]:
    """(active links, NVLink version, far end an NVSwitch) as NVML says them."""
    active, versions, switch = 0, set(), None
    for link in range(_MAX_LINKS):
        try:
            up = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception as exc:
            if link == 0 and type(exc).__name__ != "NVMLError_NotSupported":
                return None, None, None
            break
        if not up:
            continue
        active += 1
        version = _maybe(nvml.nvmlDeviceGetNvLinkVersion, handle, link)
        if version is not None:
            versions.add(int(version))
        far = _maybe(getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None), handle, link)
        if far is not None:
            switch = bool(switch) or int(far) == _SWITCH
    return active, (max(versions) if versions else None), (switch if active else False)
