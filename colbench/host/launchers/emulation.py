"""Emulated nodes: several NCCL ranks on one GPU, each a node of its own (--ranks-per-gpu).

NCCL refuses two ranks on one GPU only when they also share a host identity: its
duplicate-GPU check compares (host hash, PCI bus id), and the host hash is built from
``NCCL_HOSTID`` when that is set (src/misc/utils.cc ``getHostHash``, src/init.cc in NCCL
2.28). Giving every rank its own ``NCCL_HOSTID`` makes every rank a one-GPU node: NCCL
then connects ranks with its network transport (P2P and SHM are for ranks of one node),
and chooses among Ring, Tree and PAT as it would across real nodes. The variables below
pin that transport to plain sockets over loopback, so no network plugin, InfiniBand
device or NVLink path is tried.

Every step of such a world is real NCCL code, but kernels of different processes
time-slice the GPU (no MPS), so times measure the emulation, not a fabric: every row
says ``fabric=emulated`` and comparisons refuse to mix it with real rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from colbench.errors import UsageError
from colbench.host.launchers.gpus import Gpu

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
