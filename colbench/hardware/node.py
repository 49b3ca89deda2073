"""One node's hardware facts (meta.json's ``hardware``), its header line, and their
gathering: the first rank of each node reads them, every rank takes part in one gather
over the side group."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from colbench.hardware import gpus, links


def read_node(
    root: Path = Path("/"), nvml: Any = None, towards: str | None = None, shaped: Any = None
) -> dict[str, Any]:
    """This node's CPU, NUMA nodes, GPUs (None without NVML: a CPU-only node) and NICs;
    each NIC names the GPU nearest it on the PCI tree, and a rate tc holds it to
    replaces sysfs's. ``interface``: the one toward ``towards`` (the coordinator).
    ``shaped``: interface -> tc's rate, in place of asking tc (tests)."""
    from colbench.results.metadata import cpu_model

    found_gpus = gpus.read(nvml)
    nics = links.nics(root)
    shaped = links.shaped_rates_gbit_s() if shaped is None else shaped
    for nic in nics:
        nic["closest_gpu"] = _closest_gpu(root, nic.get("bus_id"), found_gpus or [])
        rate = shaped.get(nic["name"]) if "netdevs" not in nic else None
        if rate:
            nic.update(rate_gbit_s=rate, rate_source=f"tc's rate on {nic['name']}")
    for gpu in found_gpus or []:
        gpu["numa_node"] = links.numa_node(root, gpu["bus_id"])
        if gpu["pcie"] is None and gpu["bus_id"]:
            gpu["pcie"] = links.pcie_link(root, gpu["bus_id"])
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "numa_nodes": links.numa_nodes(root),
        "gpus": found_gpus,
        "nics": nics,
        "interface": links.interface_towards(towards),
    }


def _closest_gpu(root: Path, bus_id: str | None, found: list[dict[str, Any]]) -> int | None:
    """The GPU sharing the longest stretch of PCI path with the NIC (a PCIe switch over
    a root port); None where no GPU shares more than the others or none is known."""
    if bus_id is None or not found:
        return None
    nic_path = links.pci_path(root, bus_id)
    shared = {}
    for gpu in found:
        if gpu["bus_id"]:
            path = links.pci_path(root, gpu["bus_id"])
            shared[gpu["index"]] = next(
                (i for i, (a, b) in enumerate(zip(nic_path, path, strict=False)) if a != b),
                min(len(nic_path), len(path)),
            )
    if not shared:
        return None
    best = max(shared.values())
    winners = [i for i, n in shared.items() if n == best]
    return winners[0] if best > 0 and len(winners) == 1 else None


def header_line(label: str, facts: dict[str, Any]) -> str:
    """``# node n1: 8x NVIDIA H100 ... | NICs ... | CPU ..., 2 NUMA nodes``."""
    parts = []
    if facts.get("gpus"):
        parts.append(_gpu_text(facts["gpus"]))
    nics = [n for n in facts.get("nics", []) if n["kind"] not in ("loopback", "virtual")]
    parts.append("NICs " + (", ".join(_nic_text(n) for n in nics) if nics else "none"))
    numa = facts.get("numa_nodes")
    cpu = f"CPU {facts.get('cpu_model')}" + (f", {numa} NUMA node(s)" if numa else "")
    parts.append(cpu)
    return f"# node {label}: " + " | ".join(parts)


def _gpu_text(found: list[dict[str, Any]]) -> str:
    names = Counter(g["name"] for g in found)
    text = ", ".join(f"{n}x {name}" for name, n in names.items())
    first = found[0]
    if first.get("nvlink_links"):
        text += f", NVLink {first.get('nvlink_version') or '?'} x{first['nvlink_links']}"
        text += " (NVSwitch)" if first.get("nvswitch") else ""
    links = {_pcie_text(g.get("pcie")) for g in found}
    return text + ", PCIe " + "/".join(sorted(links))


def _pcie_text(link: dict[str, Any] | None) -> str:
    if not link or link.get("gen") is None:
        return "?"
    text = f"gen{link['gen']} x{link.get('width')}"
    full = (link.get("max_gen"), link.get("max_width"))
    return (
        text
        if full in ((link["gen"], link.get("width")), (None, None))
        else (f"{text} of gen{full[0]} x{full[1]}")
    )


def _nic_text(nic: dict[str, Any]) -> str:
    rate = f" {nic['rate_gbit_s']:g} Gb/s" if nic.get("rate_gbit_s") else ""
    state = "" if (nic.get("state") or "").lower() in ("up", "active") else f" {nic['state']}"
    return f"{nic['name']} {nic['kind']}{rate}{state}"


def gather(
    side: Any, node_ids: list[str], labels: list[str], rank: int, towards: str | None
) -> dict[str, Any]:
    """Every node's facts by label: the first rank of each node reads its own, every rank
    takes part in the gather (a collective), so all ranks return the same."""
    first = node_ids.index(node_ids[rank]) == rank
    every = side.gather_objects(read_node(towards=towards) if first else None)
    return {labels[r]: facts for r, facts in enumerate(every) if facts is not None}
