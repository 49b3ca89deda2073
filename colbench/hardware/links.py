"""A node's links as the OS and NVML report them: NICs and PCIe links from sysfs (under a
root tests point at a recorded tree), tc's rates, the interface routed toward an address,
and the GPUs' own links:

- ``/sys/class/net/<if>``: ``speed`` (Mb/s; the kernel refuses it for loopback and
  returns -1 when the link is down or the driver does not know), ``operstate``, and the
  device link (none for virtual interfaces: lo, veth, bridges, ifb).
- ``/sys/class/infiniband/<dev>/ports/<n>``: ``rate`` (``400 Gb/sec (4X NDR)``),
  ``state`` (``4: ACTIVE``), ``link_layer`` (``InfiniBand``; ``Ethernet`` is RoCE); the
  driver ``efa`` is AWS's Elastic Fabric Adapter; ``device/net/`` names its netdev.
- ``/sys/bus/pci/devices/<bus id>``: ``current_link_speed`` (``16.0 GT/s PCIe``),
  ``current_link_width``, ``max_link_speed``, ``max_link_width``, ``numa_node``.
- NVML (nvidia-ml-py), without a CUDA context: each GPU's model, PCIe link, NVLink and
  NVSwitch. ``NVMLError_NotSupported`` on NVLink link 0 means no NVLink (0 links); any
  other failure leaves a fact unknown (None).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from colbench.host.launchers.gpus import normal_bus_id, pynvml_module

#: PCIe transfer rate (GT/s) -> generation.
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
#: Bytes per second per lane and direction, after line coding (8b/10b to gen 2,
#: 128b/130b from gen 3; gen 6's FLIT mode about 242/256), in GB/s.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
_BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT_COMPLEX = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_IB_RATE = re.compile(r"^\s*([\d.]+) Gb/sec")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def pcie_generation(speed: str | None) -> int | None:
    """``16.0 GT/s PCIe`` -> 4; None where unknown (``Unknown``, a VM's empty file)."""
    m = re.match(r"^\s*([\d.]+) GT/s", speed or "")
    return _GENERATIONS.get(float(m[1])) if m else None


def pcie_link(root: Path, bus_id: str) -> dict[str, Any] | None:
    """The PCIe link of device ``bus_id``: current and maximum generation and width."""
    device = root / "sys/bus/pci/devices" / bus_id
    if not device.is_dir():
        return None
    link = {
        "gen": pcie_generation(_read(device / "current_link_speed")),
        "width": _int(_read(device / "current_link_width")),
        "max_gen": pcie_generation(_read(device / "max_link_speed")),
        "max_width": _int(_read(device / "max_link_width")),
    }
    return link if any(v for v in link.values()) else None


def numa_node(root: Path, bus_id: str | None) -> int | None:
    """The NUMA node of a PCI device (None where the kernel says -1 or nothing)."""
    if bus_id is None:
        return None
    node = _int(_read(root / "sys/bus/pci/devices" / bus_id / "numa_node"))
    return node if node is not None and node >= 0 else None


def pci_path(root: Path, bus_id: str) -> tuple[str, ...]:
    """The chain of PCI bus ids from the root complex down to ``bus_id``: two devices'
    common prefix is the switch or root port they share."""
    real = os.path.realpath(root / "sys/bus/pci/devices" / bus_id)
    return tuple(p for p in Path(real).parts if _BUS_ID.match(p) or _ROOT_COMPLEX.match(p))


def _pci_parent(path: Path) -> str | None:
    """The PCI device a class device (a netdev, an IB device) sits on."""
    parts = Path(os.path.realpath(path)).parts
    found = [p for p in parts if _BUS_ID.match(p)]
    return found[-1] if found else None


def _netdev(root: Path, name: str) -> dict[str, Any]:
    path = root / "sys/class/net" / name
    bus_id = _pci_parent(path)
    speed_mbit = _int(_read(path / "speed"))
    if name == "lo":
        kind, rate, why = "loopback", None, "loopback has no rate (/sys/class/net/lo/speed)"
    elif not (path / "device").exists():
        kind, rate, why = "virtual", None, "a virtual interface's speed is made up or absent"
    elif speed_mbit is None or speed_mbit <= 0:
        kind, rate, why = "Ethernet", None, f"/sys/class/net/{name}/speed reports no rate"
    else:
        kind, rate, why = "Ethernet", speed_mbit / 1000, f"/sys/class/net/{name}/speed"
    return {
        "name": name,
        "kind": kind,
        "rate_gbit_s": rate,
        "rate_source": why,
        "state": _read(path / "operstate"),
        "bus_id": bus_id,
    }


def _ib_device(root: Path, name: str) -> dict[str, Any]:
    path = root / "sys/class/infiniband" / name
    ports = sorted((path / "ports").glob("*"))
    port = ports[0] if ports else path / "ports/1"
    layer = _read(port / "link_layer")
    driver = os.path.basename(os.path.realpath(path / "device/driver"))
    kind = "EFA" if driver == "efa" else "RoCE" if layer == "Ethernet" else "InfiniBand"
    m = _IB_RATE.match(_read(port / "rate") or "")
    state = _read(port / "state")
    netdevs = sorted(p.name for p in (path / "device/net").glob("*"))
    return {
        "name": name,
        "kind": kind,
        "rate_gbit_s": float(m[1]) if m else None,
        "rate_source": f"/sys/class/infiniband/{name}/ports/{port.name}/rate",
        "state": state.split(":", 1)[-1].strip() if state else None,
        "bus_id": _pci_parent(path),
        "netdevs": netdevs,
    }


def nics(root: Path = Path("/")) -> list[dict[str, Any]]:
    """Every network device: RDMA devices first (with the netdevs they own), then the
    network interfaces that belong to none."""
    # A missing directory globs to nothing: no RDMA devices, no interfaces.
    rdma = [_ib_device(root, p.name) for p in sorted((root / "sys/class/infiniband").glob("*"))]
    owned = {n for dev in rdma for n in dev["netdevs"]}
    names = sorted(p.name for p in (root / "sys/class/net").glob("*"))
    out = rdma + [_netdev(root, n) for n in names if n not in owned]
    for nic in out:
        nic["numa_node"] = numa_node(root, nic["bus_id"])
        nic["pcie"] = pcie_link(root, nic["bus_id"]) if nic["bus_id"] else None
    return out


def numa_nodes(root: Path = Path("/")) -> int | None:
    """NUMA nodes with CPUs."""
    nodes = root / "sys/devices/system/node"
    found = [p for p in nodes.glob("node[0-9]*") if _read(p / "cpulist")]
    return len(found) or None


# Links' rates where tc shapes them (the rates sysfs cannot know): tbf's or netem's
# ``rate`` on an interface's qdiscs, htb's on its classes, as ``tc`` prints them.
#
# htb classes that shape each destination apart (tests/netns.py) bound one destination
# each: the fastest is the interface's ceiling. A qdisc's rate bounds everything. One
# ``tc qdisc show`` covers every interface (a GPU node may have hundreds of container
# veths); classes are asked for only where an htb qdisc holds them.
_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")
_QDISC = re.compile(r"^qdisc (?P<kind>\S+) \S+ dev (?P<dev>\S+) ")
_SCALE = {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def rates_gbit_s(text: str) -> list[float]:
    """Every ``rate N[KMGT]bit`` in tc's text, in Gbit/s."""
    return [float(n) * _SCALE[unit] for n, unit in _RATE.findall(text)]


def shaped_rates_gbit_s(run: Callable[[list[str]], str] = _run) -> dict[str, float]:
    """Each shaped interface of this network namespace -> the rate tc holds it to."""
    qdisc_rates: dict[str, list[float]] = {}
    with_classes: set[str] = set()
    for line in run(["tc", "qdisc", "show"]).splitlines():
        m = _QDISC.match(line)
        if m is None:
            continue
        qdisc_rates.setdefault(m["dev"], []).extend(rates_gbit_s(line))
        if m["kind"] in ("htb", "hfsc"):
            with_classes.add(m["dev"])
    out = {}
    for dev, bounds in qdisc_rates.items():
        classes = (
            rates_gbit_s(run(["tc", "class", "show", "dev", dev])) if dev in with_classes else []
        )
        bounds = bounds + ([max(classes)] if classes else [])
        if bounds:
            out[dev] = min(bounds)
    return out


# Which interface carries a node's traffic toward an address: the kernel's route
# choice, read by connecting a UDP socket (no packet is sent) and finding the interface
# that holds the local address it picked.
_SIOCGIFADDR = 0x8915


def _ipv4(interface: str) -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(
                s.fileno(), _SIOCGIFADDR, struct.pack("256s", interface[:15].encode())
            )
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def interface_towards(host: str | None) -> str | None:
    """The interface the kernel would send to ``host`` through; None where unknown."""
    if not host:
        return None
    try:
        address = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            local = s.getsockname()[0]
    except OSError:
        return None
    for _, name in socket.if_nameindex():
        if _ipv4(name) == local:
            return name
    return None


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


def nvml_gpus(nvml: Any = None) -> list[dict[str, Any]] | None:
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
