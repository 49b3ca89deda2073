"""A node's GPUs through NVML (nvidia-ml-py): model, PCIe link, NVLink, NVSwitch.

NVML answers without a CUDA context. A fact NVML does not give (a VM's GPU without
NVLink or PCIe link reports, an old driver without the call) is None, never guessed:
``NVMLError_NotSupported`` on NVLink link 0 means the GPU has no NVLink (0 links);
any other failure leaves the fact unknown.
"""

from __future__ import annotations

from typing import Any

from colbench.host.launchers.gpus import normal_bus_id, pynvml_module

#: NVML's largest NVLink count per GPU (NVML_NVLINK_MAX_LINKS).
_MAX_LINKS = 18
#: nvmlNvLinkDeviceType_t: the far end of an NVLink is an NVSwitch.
_SWITCH = 2
#: nvmlDeviceGetNvLinkVersion answers a code of nvmlNvlinkVersion_t, not the version
#: itself (an A100 answers 4, NVLink 3.0; an H100 6, NVLink 4.0): the version each code
#: names. pynvml's NVML_NVLINK_VERSION_* constants hold the same table.
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0"}
#: GB/s per link and direction, by version: P100 (1.0) 20; V100 (2.x), A100 (3.x) and
#: H100 (4.0) 25, their larger totals coming from more links; B200 (5.0) 50.
NVLINK_LINK_GBPS = {"1.0": 20.0, "2.0": 25.0, "2.2": 25.0, "3.0": 25.0, "3.1": 25.0,
                    "4.0": 25.0, "5.0": 50.0}  # fmt: skip


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


def _nvlink(nvml: Any, handle: Any) -> tuple[int | None, str | None, bool | None]:
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
    # A code NVML adds later (NVLink 6 and on) is no version we know a rate for.
    version = NVLINK_VERSIONS.get(max(versions)) if versions else None
    return active, version, (switch if active else False)
