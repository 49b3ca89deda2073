"""One node's hardware facts (meta.json's ``hardware``), its header line, and their
gathering. From them, the ceiling of a row: the rate of the link that bounds its bus
bandwidth, in GB/s (10^9 bytes/s, one direction, per GPU or rank), and its source.

The rules, and why a multi-node row's ceiling is the node's whole rate (a ring or tree
crosses each node boundary once per channel) but an exchange's a share per rank, are
docs/explain.md's "The ceiling of a row". Where no rate can be known the ceiling is None
and ``source`` says why; the slowest node bounds the run.

And the verdicts on those facts, alone and beside NCCL's log, each naming its evidence.
A GPU's PCIe generation is not judged (GPUs lower it when idle); its width does not
change with load, so a narrower link than the slot's is a fault.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from colbench.hardware import links
from colbench.hardware.links import NVLINK_LINK_GBPS, PCIE_LANE_GBPS

#: NIC kinds that carry NCCL's network transport without sockets.
RDMA_KINDS = ("InfiniBand", "RoCE", "EFA")


def _rdma_up(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """A node's RDMA NICs whose link is up."""
    return [
        n for n in facts.get("nics") or []
        if n["kind"] in RDMA_KINDS and (n.get("state") or "").upper() == "ACTIVE"
    ]  # fmt: skip


def read_node(
    root: Path = Path("/"), nvml: Any = None, towards: str | None = None, shaped: Any = None
) -> dict[str, Any]:
    """This node's CPU, NUMA nodes, GPUs (None without NVML: a CPU-only node) and NICs;
    each NIC names the GPU nearest it on the PCI tree, and a rate tc holds it to
    replaces sysfs's. ``interface``: the one toward ``towards`` (the coordinator).
    ``shaped``: interface -> tc's rate, in place of asking tc (tests)."""
    from colbench.results.rundir import cpu_model

    found_gpus = links.nvml_gpus(nvml)
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
    best = max(shared.values(), default=0)
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
    parts.append(f"CPU {facts.get('cpu_model')}" + (f", {numa} NUMA node(s)" if numa else ""))
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
    if full in ((link["gen"], link.get("width")), (None, None)):
        return text
    return f"{text} of gen{full[0]} x{full[1]}"


def _nic_text(nic: dict[str, Any]) -> str:
    rate = f" {nic['rate_gbit_s']:g} Gb/s" if nic.get("rate_gbit_s") else ""
    state = "" if (nic.get("state") or "").lower() in ("up", "active") else f" {nic['state']}"
    return f"{nic['name']} {nic['kind']}{rate}{state}"


def gather(
    side: Any, node_ids: list[str], labels: list[str], rank: int, towards: str | None
) -> dict[str, Any]:
    """Every node's facts by label, read by each node's first rank and gathered (a
    collective) over the side group, so all ranks return the same."""
    first = node_ids.index(node_ids[rank]) == rank
    every = side.gather_objects(read_node(towards=towards) if first else None)
    return {labels[r]: facts for r, facts in enumerate(every) if facts is not None}


Ceiling = tuple[float | None, str]


def ceiling(
    hardware: dict[str, Any],
    backend: str,
    node_of_rank: list[str],
    given: float | None = None,
    emulated: bool = False,
    used_bus_ids: set[str] | None = None,
) -> Ceiling:
    """(GB/s or None, its source or why none) for the run's rows. ``used_bus_ids``: the
    GPUs the ranks drive, where known (a node's other GPUs bound nothing)."""
    if given is not None:
        return given, "--ceiling-gbps"
    if emulated:
        return None, "an emulated fabric: ranks share GPUs and talk over loopback"
    per_node = Counter(node_of_rank)
    if not hardware or set(per_node) - set(hardware):
        return None, "the hardware of some node is unknown"
    if len(per_node) == 1:
        if backend != "nccl":
            return None, "all ranks on one node talk over loopback, which has no rate"
        found = [_gpu_ceiling(hardware[label], used_bus_ids) for label in per_node]
    else:
        found = [_network_ceiling(hardware[lb], n, backend) for lb, n in per_node.items()]
    return _slowest(found)


def _slowest(found: list[Ceiling]) -> Ceiling:
    """The lowest rate, or where any is unknown, why the first of those is."""
    unknown = [why for rate, why in found if rate is None]
    return (None, unknown[0]) if unknown else min(found, key=lambda c: c[0] or 0.0)


def group_ceiling(
    hardware: dict[str, Any],
    backend: str,
    node_of_rank: list[str],
    bus_id_of_rank: list[str | None],
    group: tuple[int, ...],
    given: float | None = None,
    emulated: bool = False,
) -> tuple[float | None, str, int]:
    """(GB/s or None, source or why, ranks sharing it in an exchange) for the rows of a
    run whose rows are ``group``'s (the first group of --split or --group-size): that
    group's nodes and GPUs bound them, not the world's (a group of one node's GPUs runs
    over NVLink, not the NICs; a rail group of one rank per node has a NIC each)."""
    nodes = [node_of_rank[r] for r in group]
    used = {bus for r in group if (bus := bus_id_of_rank[r])}
    rate, source = ceiling(hardware, backend, nodes, given, emulated, used)
    return rate, source, 1 if given is not None else ranks_sharing(nodes)


def _gpu_ceiling(facts: dict[str, Any], used: set[str] | None) -> Ceiling:
    found = [g for g in facts.get("gpus") or [] if not used or g.get("bus_id") in used]
    if not found:
        return None, "NVML reports no GPU on this node"
    return _slowest([_gpu_rate(gpu) for gpu in found])


def _gpu_rate(gpu: dict[str, Any]) -> Ceiling:
    links, version = gpu.get("nvlink_links"), gpu.get("nvlink_version")
    if links and version in NVLINK_LINK_GBPS:
        rate = NVLINK_LINK_GBPS[version]
        return links * rate, f"NVLink {version} x{links} at {rate:g} GB/s per link (NVML)"
    if links is None:
        return None, f"NVML does not say GPU {gpu['index']}'s NVLink links"
    pcie = gpu.get("pcie") or {}
    gen, width = pcie.get("max_gen") or pcie.get("gen"), pcie.get("width")
    if gen not in PCIE_LANE_GBPS or not width:
        return None, f"neither NVML nor sysfs says GPU {gpu['index']}'s PCIe link"
    rate = round(PCIE_LANE_GBPS[gen] * width, 3)
    return rate, f"PCIe gen{gen} x{width} (GPU {gpu['index']})"


def _network_ceiling(facts: dict[str, Any], ranks: int, backend: str) -> Ceiling:
    nics = facts.get("nics") or []
    rdma = [n for n in _rdma_up(facts) if n.get("rate_gbit_s")]
    if backend == "nccl" and rdma:
        total = sum(n["rate_gbit_s"] for n in rdma)
        names = "+".join(n["name"] for n in rdma)
        return total / 8, f"{names}: {total:g} Gb/s (sysfs), the node's total"
    name = facts.get("interface")
    # An RDMA device's own netdev (IPoIB, RoCE) is listed under the device, not alone.
    nic = next((n for n in nics if name == n["name"] or name in n.get("netdevs", [])), None)
    if nic is None:
        return None, "the interface toward the coordinator is unknown"
    if not nic.get("rate_gbit_s"):
        return None, f"{name}: {nic.get('rate_source')}"
    rate = nic["rate_gbit_s"]
    return rate / 8, f"{name}: {rate:g} Gb/s ({nic['rate_source']}), the node's total"


def ranks_sharing(node_of_rank: list[str]) -> int:
    """The most ranks on one node, where the run spans nodes (1 on one node: there each
    GPU's own NVLink or PCIe link is the ceiling already)."""
    per_node = Counter(node_of_rank)
    return max(per_node.values()) if len(per_node) > 1 else 1


def for_op(ceiling_gbps: float | None, exchange: bool, sharing: int) -> float | None:
    """A row's ceiling: the run's, or for an exchange (an op whose every rank sends its
    own bytes to every other, ``Collective.exchange``: off a node they share its link,
    where a ring or tree's one crossing per channel does not) its share per rank."""
    if ceiling_gbps is None or not exchange:
        return ceiling_gbps
    return ceiling_gbps / sharing


def percent(busbw_gbps: float | None, ceiling_gbps: float | None) -> float | None:
    """busbw as a percentage of the ceiling; above 100 where NVLS or CollNet reduce in
    the network, or where the ceiling is the user's."""
    if busbw_gbps is None or not ceiling_gbps:
        return None
    return 100.0 * busbw_gbps / ceiling_gbps


class CeilingCounter:
    """Rows against their ceiling as they come: each op's best share of it, and its
    share at its largest size (where a link should be nearly full)."""

    #: Below this share of the ceiling at an op's largest size, the run says so ...
    LOW_SHARE_PCT = 50.0
    #: ... where that size is this large: smaller calls are bound by latency, and
    #: nccl-tests' curves reach their plateau by a few hundred MiB.
    LOW_SHARE_MIN_BYTES = 256 * 1024**2

    def __init__(self) -> None:
        self.ceiling_gbps: float | None = None
        self.of_op: dict[str, float] = {}
        self.best: dict[str, tuple[float, int]] = {}
        self.largest: dict[str, tuple[int, float]] = {}

    def add(self, row: Any) -> None:
        pct = row.pct_of_ceiling
        if pct is None:
            return
        # The run's ceiling is the largest: an exchange's rows take a share of it.
        self.ceiling_gbps = max(self.ceiling_gbps or 0.0, row.ceiling_gbps)
        self.of_op[row.op] = row.ceiling_gbps
        if row.op not in self.best or pct > self.best[row.op][0]:
            self.best[row.op] = (pct, row.size_bytes)
        # The largest size's row, its best share where that size repeats.
        self.largest[row.op] = max(self.largest.get(row.op, (-1, 0.0)), (row.size_bytes, pct))

    def best_meta(self) -> dict[str, dict[str, Any]]:
        return {
            op: {"pct_of_ceiling": round(pct, 2), "size_bytes": size}
            for op, (pct, size) in self.best.items()
        }

    def lines(self) -> list[str]:
        """``all_reduce 43.1% at 64M``, per op, best row first measured."""
        from colbench.config.sizes import format_size

        return [
            f"{op} {_pct_text(pct)}% at {format_size(size)}"
            for op, (pct, size) in self.best.items()
        ]

    def verdicts(self) -> list[str]:
        from colbench.config.sizes import format_size

        return [
            f"{op}: busbw below half of the ceiling at the largest size ({_pct_text(pct)}% of "
            f"{self.of_op[op]:g} GB/s at {format_size(size)})"
            for op, (size, pct) in self.largest.items()
            if pct < self.LOW_SHARE_PCT and size >= self.LOW_SHARE_MIN_BYTES
        ]


def _pct_text(pct: float) -> str:
    """Three significant digits, never an exponent (1420, not 1.42e+03)."""
    return f"{pct:.0f}" if pct >= 100 else f"{pct:.3g}"


def hardware_verdicts(hardware: dict[str, Any]) -> list[str]:
    """PCIe links trained narrower (or, for NICs, slower) than they can."""
    out = []
    for label, facts in hardware.items():
        for gpu in facts.get("gpus") or []:
            link = gpu.get("pcie") or {}
            if _below_max(link, "width"):
                out.append(
                    f"GPU {gpu['index']} on {label}: PCIe x{link['width']} of x{link['max_width']}"
                )
        for nic in facts.get("nics") or []:
            link = nic.get("pcie") or {}
            if _below_max(link, "width") or _below_max(link, "gen"):
                out.append(
                    f"NIC {nic['name']} on {label}: PCIe gen{link.get('gen')} "
                    f"x{link.get('width')} of gen{link.get('max_gen')} x{link.get('max_width')}"
                )
    return out


def _below_max(link: dict[str, Any], key: str) -> bool:
    """The link's ``width`` or ``gen`` is known and below its ``max_`` one."""
    now, most = link.get(key), link.get(f"max_{key}")
    return bool(now and most and now < most)


def network_verdicts(hardware: dict[str, Any], nccl: dict[str, Any]) -> list[str]:
    """NCCL's network beside the NICs the nodes have: Socket between nodes although an
    RDMA NIC is up there."""
    if nccl.get("network") != "Socket" or (nccl.get("nnodes") or 1) < 2 or nccl.get("fallback"):
        return []
    for label, facts in hardware.items():
        rdma = _rdma_up(facts)
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
