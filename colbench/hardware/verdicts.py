"""Verdicts from a run's hardware facts, alone and beside what NCCL's log says.

Each names its evidence; none where all is as expected. A GPU's PCIe generation is not
judged: GPUs lower it when idle to save power, and NVML reads it between calls. Its
width does not change with load, so a narrower link than the slot's is a fault.
"""

from __future__ import annotations

from typing import Any

#: NIC kinds that carry NCCL's network transport without sockets.
RDMA_KINDS = ("InfiniBand", "RoCE", "EFA")


def hardware_verdicts(hardware: dict[str, Any]) -> list[str]:
    """PCIe links trained narrower (or, for NICs, slower) than they can."""
    out = []
    for label, facts in hardware.items():
        for gpu in facts.get("gpus") or []:
            link = gpu.get("pcie") or {}
            if _narrow(link):
                out.append(
                    f"GPU {gpu['index']} on {label}: PCIe x{link['width']} of x{link['max_width']}"
                )
        for nic in facts.get("nics") or []:
            link = nic.get("pcie") or {}
            slow = _slow(link)
            if _narrow(link) or slow:
                out.append(
                    f"NIC {nic['name']} on {label}: PCIe gen{link.get('gen')} "
                    f"x{link.get('width')} of gen{link.get('max_gen')} x{link.get('max_width')}"
                )
    return out


def _narrow(link: dict[str, Any]) -> bool:
    width, most = link.get("width"), link.get("max_width")
    return bool(width and most and width < most)


def _slow(link: dict[str, Any]) -> bool:
    gen, most = link.get("gen"), link.get("max_gen")
    return bool(gen and most and gen < most)


def network_verdicts(hardware: dict[str, Any], nccl: dict[str, Any]) -> list[str]:
    """NCCL's network beside the NICs the nodes have: Socket between nodes although an
    RDMA NIC is up there."""
    if nccl.get("network") != "Socket" or (nccl.get("nnodes") or 1) < 2 or nccl.get("fallback"):
        return []
    for label, facts in hardware.items():
        rdma = [
            n for n in facts.get("nics") or []
            if n["kind"] in RDMA_KINDS and (n.get("state") or "").upper() == "ACTIVE"
        ]  # fmt: skip
        if rdma:
            names = ", ".join(f"{n['name']} ({n['kind']})" for n in rdma)
            return [f"network Socket although {label} has RDMA NICs up: {names}"]
    return []


def run_verdicts(meta: dict[str, Any]) -> list[str]:
    """Every verdict of a run from its meta.json: NCCL's log, the hardware alone and
    beside NCCL's network, the ceiling (rank 0's summary wrote those)."""
    hardware = meta.get("hardware") or {}
    nccl = meta.get("nccl") or {}
    ceiling = meta.get("ceiling") or {}
    found = [
        *nccl.get("verdicts", []),
        *network_verdicts(hardware, nccl),
        *hardware_verdicts(hardware),
        *ceiling.get("verdicts", []),
    ]
    return list(dict.fromkeys(found))
