"""What this host lets colbench start: ranks against its open-file and thread limits.

Ranks beyond a limit do not fail at once: hundreds start, then one cannot open the
socket to its 600th peer, or the kernel refuses a thread, mid-rendezvous, long after
the command was typed. :func:`check_spawn` compares what the ranks will need with the
limits before the first rank starts, raises the soft open-file limit where the hard
one allows (the ranks inherit it), and refuses, in one line, what cannot work.

The needs are measured, with room: forked gloo ranks held 24 open files plus 3 per
peer (69 each at 16 ranks, 213 at 64) and 8 threads each; their parent 14 plus 3 per
rank (62 at 16, 206 at 64).
"""

from __future__ import annotations

import os
import resource

from colbench.errors import UsageError

#: Open files of a rank besides its sockets to peers: torch's libraries, pipes, its log.
RANK_BASE_FILES = 64
#: Open files per peer: 3 measured (the measured group, the gloo side group, the
#: store), one more for a --group-size subgroup.
FILES_PER_PEER = 4
#: The parent's files: its own, then per rank a store connection and a process pipe.
PARENT_BASE_FILES = 64
PARENT_FILES_PER_RANK = 4
#: Threads of one rank (gloo's, torch's pools, the hang watchdog's): 8 measured.
THREADS_PER_RANK = 12
#: More ranks than this many per core: start-up alone takes long, said at once.
CROWDED_PER_CORE = 4


def files_per_rank(world_size: int) -> int:
    """Open files one rank of a world of ``world_size`` needs at most."""
    return RANK_BASE_FILES + FILES_PER_PEER * (world_size - 1)


def _raise_open_files(needed: int, what: str) -> None:
    """Raise the soft open-file limit to ``needed`` (the ranks inherit it), or refuse."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise UsageError(
            f"{what} would need about {needed} open files, more than the {hard} this "
            f"host allows (ulimit -Hn): raise that limit or start fewer ranks"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _proc_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _threads_now() -> int:
    """Threads on the host now (the 4th field of /proc/loadavg: running/total)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 0


def thread_room() -> tuple[int, str] | None:
    """(threads this user may still start, the limit that says so), or None if unknown."""
    limits = []
    for path, name in (
        ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
        ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
    ):
        value = _proc_int(path)
        if value is not None:
            limits.append((value - _threads_now(), name))
    nproc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    # Root is not held to RLIMIT_NPROC; anyone else counts their threads against it.
    if os.geteuid() != 0 and nproc != resource.RLIM_INFINITY:
        limits.append((nproc - _threads_now(), "ulimit -u"))
    return min(limits) if limits else None


def check_spawn(ranks: int, world_size: int, flag: str) -> None:
    """Refuse ``ranks`` spawned ranks (worlds of ``world_size``) that this host's limits
    cannot hold; ``flag`` names what asked for them (``--nprocs 1000``)."""
    _raise_open_files(files_per_rank(world_size), f"{flag}: ranks of a world of {world_size}")
    _raise_open_files(
        PARENT_BASE_FILES + PARENT_FILES_PER_RANK * ranks, f"{flag}: the parent of {ranks} ranks"
    )
    room = thread_room()
    threads = ranks * THREADS_PER_RANK
    if room is not None and threads > room[0]:
        raise UsageError(
            f"{flag}: {ranks} ranks start about {threads} threads ({THREADS_PER_RANK} each); "
            f"{room[1]} leaves room for {max(0, room[0])}: start fewer ranks"
        )


def crowded_note(ranks: int, cores: int | None = None) -> str | None:
    """What to expect when ranks far outnumber the cores, said before they start."""
    cores = cores or os.cpu_count() or 1
    if ranks <= CROWDED_PER_CORE * cores:
        return None
    return (
        f"starting {ranks} ranks on {cores} CPU core(s): each connects to every other, so "
        "start-up alone may take minutes (bounded by --init-timeout); the ranks joining "
        "are counted as they come"
    )
