"""Which GPU a rank uses, proof that no two ranks share one, and what else must hold before
a rank's NCCL communicator exists: torch's blocking wait unset, NCCL's start-up log placed,
an emulated node's variables set (--ranks-per-gpu). NCCL reads its environment once, when
it starts; a gloo rank never comes here.

Launchers hand out GPUs in two ways, both right: every process of a node sees all of its
GPUs (torchrun, ``srun --gpus-per-node``) and takes the one at its local rank, or each sees
exactly one (``srun --gpus-per-task=1``), device 0 whatever the local rank; anything else
is refused. The second cannot be told from two ranks handed the same GPU, so every rank's
GPU (PCI bus id) and NCCL host identity, the pair NCCL's own check refuses, are compared
over the rendezvous store before NCCL starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.host.launchers import gpus

#: Where NCCL reads a host's boot id for its host hash when NCCL_HOSTID is not set.
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def pick_cuda_index(
    local_rank: int, local_world_size: int | None, visible_gpus: int, ranks_per_gpu: int = 1
) -> int:
    """The CUDA device index for this rank.

    ``local_world_size``: ranks on this node, None when the launcher does not say (then
    all that is known is that at least ``local_rank + 1`` ranks are here).
    ``ranks_per_gpu`` (--ranks-per-gpu): consecutive local ranks share a GPU, so local
    rank r takes GPU r // ranks_per_gpu.
    """
    ranks_here = local_world_size if local_world_size is not None else local_rank + 1
    if ranks_per_gpu > 1:
        if local_rank < visible_gpus * ranks_per_gpu and ranks_here <= visible_gpus * ranks_per_gpu:
            return local_rank // ranks_per_gpu
        raise UsageError(
            f"{ranks_here} ranks on this node but {visible_gpus} GPU(s) visible to this "
            f"process: --ranks-per-gpu {ranks_per_gpu} runs at most "
            f"{visible_gpus * ranks_per_gpu} here; start fewer ranks or raise --ranks-per-gpu"
        )
    if visible_gpus == 1:
        return 0
    if visible_gpus >= ranks_here and local_rank < visible_gpus:
        return local_rank
    ranks = (
        f"{local_world_size} ranks on this node"
        if local_world_size is not None
        else f"local rank {local_rank}"
    )
    raise UsageError(
        f"{ranks} but {visible_gpus} GPU(s) visible to this process: NCCL needs a GPU per "
        "rank; let every process see all of the node's GPUs (at least one per rank) or "
        "exactly one (srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per rank)"
    )


@dataclass(frozen=True)
class GpuIdentity:
    """What NCCL's duplicate-GPU check compares, for one rank, and names for messages."""

    rank: int
    host: str
    """The host name, for people."""
    nccl_host: str
    """What NCCL hashes into the rank's host identity: NCCL_HOSTID, else host name and
    boot id (src/misc/utils.cc ``getHostHash``)."""
    bus_id: str
    """The GPU's PCI address ("" when unknown): MIG slices of one GPU share it."""
    uuid: str


def nccl_host_identity(environ: Mapping[str, str] | None = None, boot_id: str | None = None) -> str:
    """This process's host identity as NCCL computes it, before NCCL starts."""
    env = os.environ if environ is None else environ
    if env.get("NCCL_HOSTID"):
        return env["NCCL_HOSTID"]
    if boot_id is None:
        try:
            with open(BOOT_ID_FILE, encoding="ascii") as f:
                boot_id = f.read().strip()
        except OSError:
            boot_id = ""
    return socket.gethostname() + boot_id


def check_distinct_gpus(identities: Sequence[GpuIdentity]) -> None:
    """Refuse ranks NCCL would refuse: one GPU (bus id, else UUID) under one host identity.

    Ranks with different identities may share a GPU (--ranks-per-gpu gives each its own
    NCCL_HOSTID); one NCCL_HOSTID set alike for ranks on one GPU is still refused. An
    unknown GPU (no bus id and no UUID) never matches.
    """
    sharing: dict[tuple[str, str], list[GpuIdentity]] = {}
    for ident in sorted(identities, key=lambda i: i.rank):
        gpu = ident.bus_id or ident.uuid
        if gpu:
            sharing.setdefault((ident.nccl_host, gpu), []).append(ident)
    shared = [group for group in sharing.values() if len(group) > 1]
    if not shared:
        return
    what = "; ".join(
        f"ranks {', '.join(str(i.rank) for i in group)} share GPU "
        f"{group[0].bus_id or group[0].uuid} on {group[0].host}"
        for group in shared
    )
    raise UsageError(
        f"{what}: NCCL refuses two ranks on one GPU of one host; give each process a "
        "different GPU (CUDA_VISIBLE_DEVICES or srun --gpus-per-task=1), start fewer ranks "
        "per node, or emulate nodes with --ranks-per-gpu"
    )


def exchange_identities(
    store: Any, rank: int, world_size: int, mine: GpuIdentity
) -> list[GpuIdentity]:
    """Every rank's identity, through the rendezvous store, before any communicator
    exists: NCCL would otherwise fail first, with its own message, in every rank."""
    store.set(f"{_IDENTITY_KEY}/{rank}", json.dumps(dataclasses.asdict(mine)))
    keys = [f"{_IDENTITY_KEY}/{r}" for r in range(world_size)]
    store.wait(keys)
    return [GpuIdentity(**json.loads(store.get(key))) for key in keys]


_IDENTITY_KEY = "colbench/gpu-identity"


def _pci(device: Any, properties: Callable[[Any], Any] | None) -> tuple[Any, str]:
    """The device's properties (``properties`` defaults to
    ``torch.cuda.get_device_properties``) and its PCI address, ``0000:17:00`` ("" unknown)."""
    if properties is None:
        import torch

        properties = torch.cuda.get_device_properties
    props = properties(device)
    pci = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not all(isinstance(part, int) for part in pci):
        return props, ""
    domain, bus, dev = pci
    return props, f"{domain:04x}:{bus:02x}:{dev:02x}"


def gpu_bus_id(device: Any, properties: Callable[[Any], Any] | None = None) -> str:
    """The PCI address of a CUDA device as NCCL writes it (``0000:17:00.0``), or ""."""
    address = _pci(device, properties)[1]
    return f"{address}.0" if address else ""


def gpu_uuid(device: Any, properties: Callable[[Any], Any] | None = None) -> str:
    """The physical identity of a CUDA device: its UUID, else its PCI address, else "".

    torch exposes ``uuid`` on the device properties in the versions colbench supports,
    but not every build fills it (ROCm); the PCI address identifies a GPU within one
    node, which is all :func:`check_distinct_gpus` compares.
    """
    props, address = _pci(device, properties)
    uuid = str(getattr(props, "uuid", "") or "").strip()
    if uuid:
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    return f"pci-{address}" if address else ""


#: torch's variables that make every work's wait() poll on the host (the old name too).
BLOCKING_WAIT_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")


def blocking_wait_note(environ: Mapping[str, str]) -> str | None:
    """The note for a blocking-wait variable colbench unsets in its NCCL ranks."""
    found = [name for name in BLOCKING_WAIT_VARS if environ.get(name, "") not in ("", "0")]
    if not found:
        return None
    return (
        f"{found[0]}={environ[found[0]]} is unset in colbench's ranks: it makes every "
        "collective's wait() poll on the host, which breaks CUDA graph capture and changes "
        "what CUDA events time (hangs are still caught: --timeout)"
    )


#: NCCL's start-up subsystems: ranks, nodes, channels, each peer connection's transport,
#: the network chosen, the environment it read. None of them logs per call (TUNING does:
#: see colbench.commands.sweep.probe), so the timed loop pays nothing for the log.
NCCL_LOG_SUBSYS = "INIT,ENV,NET,GRAPH"


def nccl_log_environment(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """Variables that send NCCL's INFO log of start-up to ``path`` (never the terminal).

    A user's own NCCL_DEBUG, NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE wins: their log is
    theirs to place (then colbench reads what it finds at ``path``, if anything).
    """
    if "NCCL_DEBUG" in environ:
        return {}
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": environ.get("NCCL_DEBUG_SUBSYS", NCCL_LOG_SUBSYS),
        "NCCL_DEBUG_FILE": environ.get("NCCL_DEBUG_FILE", str(path)),
    }


def prepare_nccl(
    rank: int,
    world_size: int,
    device: Any,
    store: Any,
    log: Path,
    ranks_per_gpu: int,
    single_host: bool,
) -> None:
    """What must hold before this rank's NCCL communicator exists (``log``: where its
    start-up log goes, :func:`nccl_log_environment`).

    NCCL reads its environment once, when it starts: the emulated node's variables
    (--ranks-per-gpu) and the removal of torch's blocking wait happen here. Then every
    rank's GPU and host identity are compared over the store, so ranks NCCL would
    refuse ("Duplicate GPU detected") are refused first, in one line naming them.
    """
    for name in BLOCKING_WAIT_VARS:
        os.environ.pop(name, None)
    os.environ.update(nccl_log_environment(os.environ, log))
    host = socket.gethostname()
    if ranks_per_gpu > 1:
        to_set, _ = gpus.rank_environment(rank, host, single_host, os.environ)
        os.environ.update(to_set)
    mine = GpuIdentity(
        rank=rank,
        host=host,
        nccl_host=nccl_host_identity(),
        bus_id=gpu_bus_id(device),
        uuid=gpu_uuid(device),
    )
    check_distinct_gpus(exchange_identities(store, rank, world_size, mine))
