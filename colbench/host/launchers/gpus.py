"""What the parent knows about the GPUs, without touching CUDA: NVML, or nvidia-smi; and
emulated nodes, several NCCL ranks on one GPU (--ranks-per-gpu).

The parent process must never create a CUDA context: it would hold memory on every GPU
for the whole run, outside any rank's budget, and a GPU in Exclusive-Process compute mode
would then refuse the ranks themselves. NVML reads the same facts from the driver without
a context, through nvidia-ml-py (``pynvml``) where installed, else ``nvidia-smi``, which
ships with every driver. NVML numbers GPUs by PCI order and ignores
``CUDA_VISIBLE_DEVICES``; :func:`visible` applies that variable the way CUDA does.

NCCL refuses two ranks on one GPU only when they also share a host identity: its
duplicate-GPU check compares (host hash, PCI bus id), and the host hash is built from
``NCCL_HOSTID`` when that is set (src/misc/utils.cc ``getHostHash``, NCCL 2.28). Giving
every rank its own ``NCCL_HOSTID`` makes every rank a one-GPU node, connected by NCCL's
network transport and its Ring, Tree and PAT choices as across real nodes; the variables
below pin that transport to plain sockets over loopback. Kernels of different processes
time-slice the GPU (no MPS), so times measure the emulation, not a fabric: every row says
``fabric=emulated`` and comparisons refuse to mix it with real rows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.errors import UsageError

#: NVML's compute modes by number (nvmlComputeMode_t) and as nvidia-smi prints them.
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
DEFAULT_MODE = "Default"
_SMI_FIELDS = "index,name,uuid,pci.bus_id,compute_mode,memory.free,memory.total"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver describes it."""

    index: int
    """NVML's index (PCI order), not CUDA's once CUDA_VISIBLE_DEVICES reorders."""
    name: str
    uuid: str
    bus_id: str
    """PCI address, ``0000:17:00.0``: what NCCL's duplicate-GPU check compares."""
    compute_mode: str
    """Default, Exclusive_Process, Prohibited (Exclusive_Thread on old drivers)."""
    memory_free_bytes: int | None
    memory_total_bytes: int | None

    @property
    def shareable(self) -> bool:
        """Several processes may use it at once (only Default allows that)."""
        return self.compute_mode == DEFAULT_MODE


def gpu_count() -> int:
    """CUDA GPUs this process can use (0 without CUDA), the one count every module asks:
    torch asks the CUDA driver, which counts devices without creating a context."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def visible(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """The GPUs CUDA shows a process under ``CUDA_VISIBLE_DEVICES``, in CUDA's order.

    As CUDA reads it: a comma list of indices or UUID prefixes (``GPU-8f3a``); the list
    ends at the first entry that names no GPU; unset means every GPU.
    """
    if cuda_visible_devices is None:
        return list(gpus)
    shown: list[Gpu] = []
    for token in (t.strip() for t in cuda_visible_devices.split(",")):
        match = _named(gpus, token)
        if match is None or match in shown:
            break
        shown.append(match)
    return shown


def _named(gpus: Sequence[Gpu], token: str) -> Gpu | None:
    if token.isdigit():
        return next((g for g in gpus if g.index == int(token)), None)
    if token.startswith("GPU-"):
        found = [g for g in gpus if g.uuid.startswith(token)]
        return found[0] if len(found) == 1 else None
    return None


def query(nvml: Any = None, run: Callable[[list[str]], str] | None = None) -> list[Gpu] | None:
    """Every GPU the driver has (NVML's order), or None when neither NVML nor nvidia-smi
    answers (then nothing is known, which is not the same as no GPU).

    ``nvml`` and ``run`` replace the ``pynvml`` module and running a command (tests).
    """
    module = nvml if nvml is not None else pynvml_module()
    if module is not None:
        with contextlib.suppress(Exception):
            return _from_nvml(module)
    return _from_smi(run or _run)


def visible_gpus() -> list[Gpu] | None:
    """:func:`query` narrowed to this process's ``CUDA_VISIBLE_DEVICES``."""
    every = query()
    return None if every is None else visible(every, os.environ.get("CUDA_VISIBLE_DEVICES"))


def pynvml_module() -> Any:
    """nvidia-ml-py's ``pynvml``, or None where it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvml(nvml: Any) -> list[Gpu]:
    nvml.nvmlInit()
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    bus_id=normal_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
                    compute_mode=COMPUTE_MODES.get(
                        int(nvml.nvmlDeviceGetComputeMode(handle)), "unknown"
                    ),
                    memory_free_bytes=int(memory.free),
                    memory_total_bytes=int(memory.total),
                )
            )
        return gpus
    finally:
        nvml.nvmlShutdown()


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(argv[0])
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def _from_smi(run: Callable[[list[str]], str]) -> list[Gpu] | None:
    argv = ["nvidia-smi", f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"]
    try:
        text = run(argv)
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 7 or not cells[0].isdigit():
            continue
        index, name, uuid, bus_id, mode, free_mib, total_mib = cells
        gpus.append(
            Gpu(
                index=int(index),
                name=name,
                uuid=uuid,
                bus_id=normal_bus_id(bus_id),
                compute_mode=mode.replace(" ", "_"),
                memory_free_bytes=_mib(free_mib),
                memory_total_bytes=_mib(total_mib),
            )
        )
    return gpus


def _mib(text: str) -> int | None:
    return int(float(text) * 2**20) if text.replace(".", "", 1).isdigit() else None


def normal_bus_id(text: str) -> str:
    """A PCI address in one spelling: NVML writes ``00000000:17:00.0``, torch and NCCL
    ``0000:17:00.0``; lower case, a 4-digit domain."""
    text = text.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep:
        return text
    hexadecimal = domain and all(c in "0123456789abcdef" for c in domain)
    return f"{int(domain, 16):04x}:{rest}" if hexadecimal else text


#: Marks every row and meta.json: ``real`` (one GPU per rank) or ``emulated``.
FABRIC_REAL = "real"
FABRIC_EMULATED = "emulated"

#: What each rank sets before NCCL starts, unless the user set it already. NCCL_HOSTID
#: is per rank (:func:`rank_environment`); NCCL_SOCKET_IFNAME only where all ranks share
#: one host (else the user's network must carry the sockets).
_FIXED = {
    # Sockets, not a network plugin (AWS OFI, an IB plugin) or InfiniBand verbs.
    "NCCL_NET": "Socket",
    "NCCL_NET_PLUGIN": "none",
    # Multi-node NVLink would join the "nodes" back over NVLink fabric.
    "NCCL_MNNVL_ENABLE": "0",
    # NCCL uses P2P and SHM only within a node; off, so no path but the network's is tried.
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
}
LOOPBACK_IFNAME = "lo"
#: Every variable an emulated rank may set (meta.json records each rank's values).
VARIABLES = ("NCCL_HOSTID", *_FIXED, "NCCL_SOCKET_IFNAME")


def fabric(ranks_per_gpu: int) -> str:
    return FABRIC_EMULATED if ranks_per_gpu > 1 else FABRIC_REAL


def host_id(host: str, rank: int) -> str:
    """The NCCL_HOSTID of an emulated rank: unique per rank, readable in NCCL's logs."""
    return f"{host}-colbench-rank{rank}"


def rank_environment(
    rank: int, host: str, single_host: bool, environ: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """What this rank must set, and the emulation's variables as the rank will see them.

    The user's own values win: a variable already in ``environ`` is not set, and its
    value is what the second mapping (recorded in meta.json) shows.
    """
    wanted = dict(_FIXED, NCCL_HOSTID=host_id(host, rank))
    if single_host:
        wanted["NCCL_SOCKET_IFNAME"] = LOOPBACK_IFNAME
    to_set = {k: v for k, v in wanted.items() if k not in environ}
    seen = {k: environ.get(k, v) for k, v in wanted.items()}
    return to_set, seen


def check_parent(ranks_per_gpu: int, backend: str, gpus: Sequence[Gpu] | None) -> list[str]:
    """Refuse an emulated world that cannot start, before any rank exists; notes.

    ``gpus``: the GPUs this process would give its ranks (None: NVML could not tell).
    """
    if ranks_per_gpu <= 1:
        return []
    flag = f"--ranks-per-gpu {ranks_per_gpu}"
    if backend != "nccl":
        from colbench.config.validate import RANKS_PER_GPU_NEEDS_NCCL

        raise UsageError(RANKS_PER_GPU_NEEDS_NCCL.format(k=ranks_per_gpu))
    if gpus is None:
        return [
            f"{flag}: NVML could not say whether the GPUs allow several processes (compute "
            "mode); if a rank fails to create its CUDA context, check `nvidia-smi -q -d "
            "COMPUTE`"
        ]
    if not gpus:
        raise UsageError(f"{flag} shares GPUs among NCCL ranks, and no GPU is visible")
    exclusive = [g for g in gpus if not g.shareable]
    if exclusive:
        g = exclusive[0]
        raise UsageError(
            f"{flag}: GPU {g.index} ({g.bus_id}) is in {g.compute_mode} compute mode, which "
            "allows one process per GPU; set it to Default (nvidia-smi -i "
            f"{g.index} -c DEFAULT) or drop --ranks-per-gpu"
        )
    return []


def describe(ranks_per_gpu: int, single_host: bool) -> dict[str, Any]:
    """meta.json's ``fabric``: what the ranks' times measure."""
    if ranks_per_gpu <= 1:
        return {"kind": FABRIC_REAL, "ranks_per_gpu": 1}
    return {
        "kind": FABRIC_EMULATED,
        "ranks_per_gpu": ranks_per_gpu,
        "nodes": "one emulated node per rank (NCCL_HOSTID per rank)",
        "transport": "NCCL network transport, sockets"
        + (" over loopback" if single_host else "")
        + "; P2P and SHM disabled",
        "time_sliced": True,
        "note": "ranks on one GPU time-slice its kernels: times test NCCL's code and "
        "choices, not a fabric",
    }


def header_line(ranks_per_gpu: int) -> str | None:
    """The table header's one line on the fabric (None on a real one)."""
    if ranks_per_gpu <= 1:
        return None
    return (
        f"# fabric emulated: {ranks_per_gpu} ranks per GPU, each an NCCL node of its own "
        "(network transport over loopback, kernels time-sliced): not a fabric measurement"
    )
