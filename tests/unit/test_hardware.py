"""The hardware readers (colbench.hardware) against recorded sysfs trees and a fake NVML
that records what was asked, and the header line they make."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from colbench.hardware import links, node

# A two-socket GPU node: GPU 0 and mlx5_0 behind one PCIe switch, GPU 1 on another root
# port; eth0 an onboard NIC; mlx5_1 RoCE; lo and a veth.
SWITCH = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0"
DEVICES = {
    "0000:03:00.0": (SWITCH + "/0000:03:00.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, 0),
    "0000:04:00.0": (SWITCH + "/0000:04:00.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16, 0),
    "0000:41:00.0": ("pci0000:40/0000:40:01.0/0000:41:00.0", "8.0 GT/s PCIe", 8,
                     "16.0 GT/s PCIe", 16, 1),
    "0000:81:00.0": ("pci0000:80/0000:80:02.0/0000:81:00.0", "Unknown", 0, "Unknown", 0, -1),
    "0000:82:00.0": ("pci0000:80/0000:80:03.0/0000:82:00.0", "8.0 GT/s PCIe", 4,
                     "8.0 GT/s PCIe", 4, 1),
}  # fmt: skip


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def recorded_tree(root: Path) -> Path:
    """A /sys as a real kernel lays it out (class entries are links into /sys/devices)."""
    devices = root / "sys/devices"
    for bus_id, (where, speed, width, max_speed, max_width, numa) in DEVICES.items():
        dev = devices / where
        for name, value in (
            ("current_link_speed", speed), ("current_link_width", width),
            ("max_link_speed", max_speed), ("max_link_width", max_width), ("numa_node", numa),
        ):  # fmt: skip
            _write(dev / name, str(value))
        _link(root / "sys/bus/pci/devices" / bus_id, dev)
    for name, bus_id, layer, rate, state, netdev in (
        ("mlx5_0", "0000:04:00.0", "InfiniBand", "400 Gb/sec (4X NDR)", "4: ACTIVE", None),
        ("mlx5_1", "0000:41:00.0", "Ethernet", "100 Gb/sec (4X EDR)", "1: DOWN", "ens1np0"),
    ):
        dev = devices / DEVICES[bus_id][0]
        ib = dev / "infiniband" / name
        _write(ib / "ports/1/link_layer", layer)
        _write(ib / "ports/1/rate", rate)
        _write(ib / "ports/1/state", state)
        _link(ib / "device", dev)
        _link(dev / "driver", devices / "drivers/mlx5_core")
        _link(root / "sys/class/infiniband" / name, ib)
        if netdev:
            _write(dev / "net" / netdev / "speed", "100000")
            _link(root / "sys/class/net" / netdev, dev / "net" / netdev)
    eth = devices / DEVICES["0000:82:00.0"][0] / "net/eth0"
    _write(eth / "speed", "25000")
    _write(eth / "operstate", "up")
    _link(eth / "device", eth.parent.parent)
    _link(root / "sys/class/net/eth0", eth)
    for name, speed in (("lo", None), ("veth0", "10000")):
        virtual = devices / "virtual/net" / name
        _write(virtual / "operstate", "up")
        if speed:
            _write(virtual / "speed", speed)
        _link(root / "sys/class/net" / name, virtual)
    for index, cpus in ((0, "0-31"), (1, "32-63"), (2, "")):
        _write(root / f"sys/devices/system/node/node{index}/cpulist", cpus)
    return root


class NotSupported(Exception):
    """Named as pynvml names its error for a call the GPU does not support."""


NotSupported.__name__ = "NVMLError_NotSupported"


class FakeNvml:
    """pynvml answered from a list of GPUs; records every call it was asked."""

    def __init__(self, gpus_: list[dict[str, Any]]) -> None:
        self.gpus = gpus_
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.asked.append(name)
            return self._answer(name, *args)

        return call

    def _answer(self, name: str, *args: Any) -> Any:
        if name in ("nvmlInit", "nvmlShutdown"):
            return None
        if name == "nvmlDeviceGetCount":
            return len(self.gpus)
        if name == "nvmlDeviceGetHandleByIndex":
            return args[0]
        gpu = self.gpus[args[0]]
        key = name.removeprefix("nvmlDeviceGet")
        if key.startswith("NvLink"):
            links = gpu.get("nvlink")
            if links is None:
                raise NotSupported()
            if args[1] >= links:
                return 0 if key == "NvLinkState" else None
            # NVML's code 6 is NVLink 4.0, an H100's (nvmlNvlinkVersion_t).
            return {"NvLinkState": 1, "NvLinkVersion": 6, "NvLinkRemoteDeviceType": 2}[key]
        if key not in gpu:
            raise RuntimeError(f"{name}: NVML error (a VM without this fact)")
        return gpu[key]


def _nvml_gpu(bus_id: str, nvlink: int | None, pcie: bool = True) -> dict[str, Any]:
    import types

    gpu: dict[str, Any] = {
        "Name": b"NVIDIA H100 80GB HBM3",
        "PciInfo": types.SimpleNamespace(busId=f"0000{bus_id}".upper().encode()),
        "nvlink": nvlink,
    }
    if pcie:
        gpu.update(CurrPcieLinkGeneration=5, CurrPcieLinkWidth=8, MaxPcieLinkGeneration=5,
                   MaxPcieLinkWidth=16)  # fmt: skip
    return gpu


def test_nics_from_a_recorded_tree(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    found = {n["name"]: n for n in links.nics(root)}
    assert list(found) == ["mlx5_0", "mlx5_1", "eth0", "lo", "veth0"]
    ib, roce, eth, lo, veth = found.values()
    assert (ib["kind"], ib["rate_gbit_s"], ib["state"], ib["bus_id"]) == (
        "InfiniBand", 400.0, "ACTIVE", "0000:04:00.0",
    )  # fmt: skip
    assert (roce["kind"], roce["state"], roce["netdevs"]) == ("RoCE", "DOWN", ["ens1np0"])
    assert roce["pcie"] == {"gen": 3, "width": 8, "max_gen": 4, "max_width": 16}
    assert roce["numa_node"] == 1 and ib["numa_node"] == 0
    assert (eth["kind"], eth["rate_gbit_s"], eth["rate_source"]) == (
        "Ethernet", 25.0, "/sys/class/net/eth0/speed",
    )  # fmt: skip
    assert eth["pcie"] == {"gen": 3, "width": 4, "max_gen": 3, "max_width": 4}
    # No rate is known for loopback, nor for a veth's made-up 10000 Mb/s.
    assert (lo["kind"], lo["rate_gbit_s"]) == ("loopback", None)
    assert (veth["kind"], veth["rate_gbit_s"]) == ("virtual", None)
    assert links.numa_nodes(root) == 2


def test_efa_by_its_driver(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    dev = Path(os.path.realpath(root / "sys/bus/pci/devices/0000:04:00.0"))
    (dev / "driver").unlink()
    _link(dev / "driver", root / "sys/devices/drivers/efa")
    assert links.nics(root)[0]["kind"] == "EFA"


@pytest.mark.parametrize(
    ("text", "gen"),
    [("2.5 GT/s PCIe", 1), ("8.0 GT/s PCIe", 3), ("32.0 GT/s PCIe", 5), ("Unknown", None),
     ("", None), (None, None)],
)  # fmt: skip
def test_pcie_generation(text: str | None, gen: int | None) -> None:
    assert links.pcie_generation(text) == gen


def test_gpus_through_nvml_with_nvlink_and_a_narrow_link() -> None:
    nvml = FakeNvml([_nvml_gpu(":03:00.0", 18), _nvml_gpu(":81:00.0", None, pcie=False)])
    first, second = links.nvml_gpus(nvml) or []
    assert first == {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "bus_id": "0000:03:00.0",
        "pcie": {"gen": 5, "width": 8, "max_gen": 5, "max_width": 16},
        "nvlink_links": 18, "nvlink_version": "4.0", "nvswitch": True,
    }  # fmt: skip
    # No NVLink (NotSupported) is 0 links; a VM's missing PCIe facts are unknown.
    assert (second["nvlink_links"], second["nvswitch"], second["pcie"]) == (0, False, None)
    assert nvml.asked[0] == "nvmlInit" and nvml.asked[-1] == "nvmlShutdown"
    assert "nvmlDeviceGetNvLinkState" in nvml.asked


def test_no_nvml_is_no_gpu_facts() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert links.nvml_gpus(Broken()) is None


def test_a_node_names_each_nics_nearest_gpu_and_fills_pcie_from_sysfs(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    nvml = FakeNvml([_nvml_gpu(":03:00.0", 18), _nvml_gpu(":81:00.0", 0, pcie=False)])
    facts = node.read_node(root, nvml, shaped={})
    nearest = {n["name"]: n["closest_gpu"] for n in facts["nics"]}
    # mlx5_0 shares GPU 0's PCIe switch; eth0 shares only a root complex with GPU 1.
    assert nearest == {"mlx5_0": 0, "mlx5_1": None, "eth0": 1, "lo": None, "veth0": None}
    # NVML lacked GPU 1's link: sysfs has it (and says it is unknown: gen None).
    assert facts["gpus"][1]["pcie"] is None
    assert facts["gpus"][0]["numa_node"] == 0 and facts["numa_nodes"] == 2
    line = node.header_line("n1", facts)
    assert line.startswith("# node n1: 2x NVIDIA H100 80GB HBM3, NVLink 4.0 x18 (NVSwitch), ")
    assert "PCIe ?/gen5 x8 of gen5 x16" in line
    assert (
        "NICs mlx5_0 InfiniBand 400 Gb/s, mlx5_1 RoCE 100 Gb/s DOWN, eth0 Ethernet 25 Gb/s" in line
    )
    assert line.endswith(", 2 NUMA node(s)")


def test_a_cpu_only_node_has_nics_and_cpu(tmp_path: Path) -> None:
    root = recorded_tree(tmp_path)
    facts = node.read_node(root, FakeNvml([]), shaped={})
    assert facts["gpus"] == [] and len(facts["nics"]) == 5
    assert node.header_line("c", facts).startswith("# node c: NICs mlx5_0 InfiniBand 400 Gb/s")


def test_hardware_verdicts_name_narrow_links_and_nothing_else(tmp_path: Path) -> None:
    from colbench.hardware.node import hardware_verdicts

    root = recorded_tree(tmp_path)
    nvml = FakeNvml([_nvml_gpu(":03:00.0", 18), _nvml_gpu(":81:00.0", 0, pcie=False)])
    facts = node.read_node(root, nvml, shaped={})
    assert hardware_verdicts({"n1": facts}) == [
        "GPU 0 on n1: PCIe x8 of x16",
        "NIC mlx5_1 on n1: PCIe gen3 x8 of gen4 x16",
    ]
    # A GPU at a lower generation only (idle power saving) is as expected.
    facts["gpus"][0]["pcie"] = {"gen": 1, "width": 16, "max_gen": 5, "max_width": 16}
    facts["nics"][1]["pcie"] = None
    assert hardware_verdicts({"n1": facts}) == []


def test_socket_although_rdma_nics_are_up(tmp_path: Path) -> None:
    from colbench.hardware.node import network_verdicts

    facts = node.read_node(recorded_tree(tmp_path), FakeNvml([]), shaped={})
    socket = {"network": "Socket", "nnodes": 2, "fallback": False}
    assert network_verdicts({"n1": facts}, socket) == [
        "network Socket although n1 has RDMA NICs up: mlx5_0 (InfiniBand)"
    ]
    # One node (no network between ranks), IB in use, or a fallback already named: silence.
    assert network_verdicts({"n1": facts}, {**socket, "nnodes": 1}) == []
    assert network_verdicts({"n1": facts}, {**socket, "network": "IB"}) == []
    assert network_verdicts({"n1": facts}, {**socket, "fallback": True}) == []
    facts["nics"][0]["state"] = "DOWN"
    assert network_verdicts({"n1": facts}, socket) == []
