"""Which GPU and which NIC a finding is about, where the run can tell (the judge's
``singled_out``): the rank's GPU from its PCI address in its node's hardware facts
(meta.json's ``hardware``), and for the pair checks the NIC that carries its traffic.

The NIC: the one nearest the GPU on the PCI tree (hardware.node's ``closest_gpu``, the
one NCCL's topology picks for that GPU's network traffic); on gloo, which sends through
the host's sockets, the interface toward the coordinator (the route the ranks met by).
Where neither holds, no NIC is named: a guess would send someone to reseat the wrong
cable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from colbench.commands.health.judge import LINK_CHECKS, Finding, Samples
from colbench.host.launchers.gpus import normal_bus_id

#: NIC kinds that carry no traffic between nodes.
LOCAL_KINDS = ("loopback", "virtual")


def attach(
    findings: Sequence[Finding],
    samples: Samples,
    hardware: Mapping[str, Any],
    backend: str | None,
) -> list[Finding]:
    """The findings with ``gpu`` and ``nic`` filled in where the run can tell."""
    out = []
    for f in findings:
        if not f.singled_out or f.rank is None:
            out.append(f)
            continue
        facts = hardware.get(f.node) or {}
        index, gpu = _gpu(facts, _bus_id(samples, f.rank))
        nic = _nic(facts, index, backend) if f.check in LINK_CHECKS else None
        out.append(replace(f, gpu=gpu, nic=nic))
    return out


def _bus_id(samples: Samples, rank: int) -> str | None:
    buses = samples.gpu_bus_ids
    return buses[rank] if rank < len(buses) else None


def _gpu(facts: Mapping[str, Any], bus_id: str | None) -> tuple[int | None, str | None]:
    """(NVML's index, the text) of the GPU at ``bus_id``; the address alone where the
    node's facts lack it (no NVML)."""
    if not bus_id:
        return None, None
    for gpu in facts.get("gpus") or []:
        if gpu.get("bus_id") and normal_bus_id(gpu["bus_id"]) == normal_bus_id(bus_id):
            return gpu["index"], f"GPU {gpu['index']} ({gpu['name']}, {bus_id})"
    return None, f"GPU {bus_id}"


def _nic(facts: Mapping[str, Any], gpu_index: int | None, backend: str | None) -> str | None:
    if gpu_index is not None:
        for nic in facts.get("nics") or []:
            if nic.get("closest_gpu") == gpu_index and nic.get("kind") not in LOCAL_KINDS:
                return str(nic["name"])
    if backend == "gloo" and facts.get("interface"):
        return str(facts["interface"])
    return None


def where_text(f: Finding) -> str:
    """``rank 3: GPU 1 (NVIDIA H100 80GB HBM3, 0000:8a:00.0), NIC mlx5_1``; or ``rank
    3`` alone, or "" where the run cannot tell a rank from its node."""
    if not f.singled_out or f.rank is None:
        return ""
    parts = [p for p in (f.gpu, f.nic and f"NIC {f.nic}") if p]
    return f"rank {f.rank}" + (": " + ", ".join(parts) if parts else "")
