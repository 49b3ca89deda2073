"""Will the buffers fit? Memory needs per rank, and what the host or GPU can give.

A sweep that asks for more than the machine has must skip sizes (or stop, if asked)
before allocating: on CPU an oversized allocation ends in the kernel's OOM killer,
which takes the whole job with it and leaves only a SIGKILL to explain it.
"""

from __future__ import annotations

from pathlib import Path

from colbench.bench.ops.base import Collective, Layout
from colbench.host.launchers import env

#: Scratch the verification uses beyond the buffers (chunked temporaries, see ops.data).
VERIFY_SCRATCH_BYTES = 64 * 1024**2
#: The same per element of a buffer smaller than one chunk: a few int64 temporaries of its
#: length (about 40 bytes an element), with room to spare.
VERIFY_SCRATCH_BYTES_PER_ELEM = 64
#: Share of the available memory a sweep may plan to use; the rest is headroom for
#: torch, the transport's own buffers and everything else on the machine.
USABLE_FRACTION = 0.8

_UNLIMITED = 1 << 60


def buffer_bytes(
    coll: Collective, layout: Layout, elem_bytes: int, placements: tuple[str, ...], sets: int = 1
) -> int:
    """Bytes one rank allocates for ``layout`` in every placement at once (bench keeps
    one storage per placement alive, ``sets`` of them with --rotate), plus verification
    scratch."""
    # In place, one buffer holds both; out of place, each has its own.
    shared = max(layout.send_numel, layout.recv_numel)
    total = sum(shared if p == "in" else layout.send_numel + layout.recv_numel for p in placements)
    # Verification works chunk by chunk: a buffer smaller than a chunk (a barrier's none)
    # needs scratch of its own length only.
    scratch = min(VERIFY_SCRATCH_BYTES, VERIFY_SCRATCH_BYTES_PER_ELEM * shared)
    return total * elem_bytes * sets + scratch


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return _UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def meminfo_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_available_bytes(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """Room left under this process's cgroup memory limit (v2 or v1), or None if unlimited.

    Walks up the hierarchy, because a parent cgroup's limit binds the children too.
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":
            base, limit_name, usage_name = root, "memory.max", "memory.current"
            if not (root / "cgroup.controllers").exists():
                base = root / "unified"
        elif "memory" in controllers.split(","):
            base, limit_name, usage_name = (
                root / "memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        else:
            continue
        node = base / rel.lstrip("/")
        while True:
            limit = _read_int(node / limit_name)
            usage = _read_int(node / usage_name)
            if limit is not None and usage is not None and limit < _UNLIMITED // 2:
                rooms.append(max(0, limit - usage))
            if node == base or base not in node.parents:
                break
            node = node.parent
    return min(rooms, default=None)


def host_available_bytes() -> int:
    """What this host can still give: MemAvailable, capped by the cgroup limit."""
    candidates = [v for v in (meminfo_available_bytes(), cgroup_available_bytes()) if v is not None]
    return min(candidates) if candidates else _UNLIMITED


def address_space_room_bytes(threads_to_come: int) -> int | None:
    """Address space this process may still map for buffers under ``ulimit -v``, or None
    without a limit. ``threads_to_come``: threads not started yet (torch's intra-op pool
    starts at the first parallel fill), each taking a stack."""
    limit, used = env.address_space_limit_bytes(), env.address_space_used_bytes()
    if limit is None or used is None:
        return None
    later = threads_to_come * env.thread_stack_bytes() + env.MALLOC_ARENA_BYTES
    return max(0, limit - used - later)


def rank_budget_bytes(
    local_world_size: int, limit_bytes: int | None, device_free_bytes: int | None
) -> int:
    """Bytes one rank may plan to allocate.

    On GPU each rank has its own device; on CPU the ranks of a host share its memory, and
    each is held to its own address-space limit (``ulimit -v``): past it, the allocator
    fails mid-fill or mid-verification. ``limit_bytes`` (``--memory-limit``) caps it further.
    """
    if device_free_bytes is not None:
        budget = int(device_free_bytes * USABLE_FRACTION)
    else:
        import torch

        budget = int(host_available_bytes() * USABLE_FRACTION) // max(1, local_world_size)
        room = address_space_room_bytes(torch.get_num_threads())
        if room is not None:
            budget = min(budget, int(room * USABLE_FRACTION))
    if limit_bytes is not None:
        budget = min(budget, limit_bytes)
    return budget


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    """The exception classes torch raises when an allocation fails.

    ``torch.OutOfMemoryError`` (for every device) came after torch 2.3, which colbench
    supports: torch 2.3.1 has only ``torch.cuda.OutOfMemoryError`` (defined in CPU builds
    too). On CPU an allocation failure is a plain RuntimeError or MemoryError, recognised
    by :func:`is_out_of_memory`'s text check.
    """
    import torch

    everywhere = getattr(torch, "OutOfMemoryError", MemoryError)
    return (MemoryError, torch.cuda.OutOfMemoryError, everywhere)


def is_out_of_memory(exc: BaseException) -> bool:
    """Allocator failures from torch on CPU and GPU."""
    if isinstance(exc, out_of_memory_errors()):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text
    )
