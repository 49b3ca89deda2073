"""Which GPU a rank uses, and proof that no two ranks share one.

Launchers hand out GPUs in two ways, both right: every process of a node sees all of
its GPUs (torchrun, ``srun --gpus-per-node``) and takes the one at its local rank, or
each process sees exactly one (``srun --gpus-per-task=1``, ``CUDA_VISIBLE_DEVICES`` set
per rank), which is then device 0 whatever the local rank. Anything else is refused
rather than guessed. The second way cannot be told from two ranks handed the same
single GPU, so the GPUs' UUIDs are compared once every rank has picked its device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from colbench.errors import UsageError


def pick_cuda_index(local_rank: int, local_world_size: int | None, visible_gpus: int) -> int:
    """The CUDA device index for this rank.

    ``local_world_size``: ranks on this node, None when the launcher does not say (then
    all that is known is that at least ``local_rank + 1`` ranks are here).
    """
    if visible_gpus == 1:
        return 0
    ranks_here = local_world_size if local_world_size is not None else local_rank + 1
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


def check_distinct_gpus(uuid_by_rank: Mapping[int, str], host_by_rank: Mapping[int, str]) -> None:
    """Refuse ranks that landed on one physical GPU (same node, same GPU UUID).

    An empty UUID means unknown (see :func:`gpu_uuid`) and is never a match.
    """
    sharing: dict[tuple[str, str], list[int]] = {}
    for rank, uuid in sorted(uuid_by_rank.items()):
        if uuid:
            sharing.setdefault((host_by_rank.get(rank, ""), uuid), []).append(rank)
    shared = [(key, ranks) for key, ranks in sharing.items() if len(ranks) > 1]
    if not shared:
        return
    what = "; ".join(
        f"ranks {', '.join(map(str, ranks))} share GPU {uuid}" + (f" on {host}" if host else "")
        for (host, uuid), ranks in shared
    )
    raise UsageError(
        f"{what}: NCCL needs a GPU of its own for every rank; give each process a different "
        "GPU (CUDA_VISIBLE_DEVICES or srun --gpus-per-task=1) or start fewer ranks per node"
    )


def gpu_uuid(device: Any, properties: Callable[[Any], Any] | None = None) -> str:
    """The physical identity of a CUDA device: its UUID, else its PCI address, else "".

    torch exposes ``uuid`` on the device properties in the versions colbench supports,
    but not every build fills it (ROCm); the PCI address identifies a GPU within one
    node, which is all :func:`check_distinct_gpus` compares. ``properties`` defaults to
    ``torch.cuda.get_device_properties``.
    """
    if properties is None:
        import torch

        properties = torch.cuda.get_device_properties
    props = properties(device)
    uuid = str(getattr(props, "uuid", "") or "").strip()
    if uuid:
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    pci = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if all(isinstance(part, int) for part in pci):
        domain, bus, dev = pci
        return f"pci-{domain:04x}:{bus:02x}:{dev:02x}"
    return ""
