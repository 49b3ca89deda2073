"""One process's environment: its place in a job (the variables torch's env:// rendezvous
reads, which ranks share a node, with names for nodes that people can read), and what its
host lets it start (open files, threads, address space).

Ranks beyond a host's limit do not fail at once: hundreds start, then one cannot open the
socket to its 600th peer, or the kernel refuses a thread, mid-rendezvous. :func:`check_spawn`
compares what the ranks will need (measured, with room) with the limits before the first
rank starts, raises the soft open-file limit where the hard one allows (the ranks inherit
it), and refuses, in one line, what cannot work.

Imported by ``colbench/__init__`` before torch loads, so nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.abc
import importlib.util
import os
import resource
import socket
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from colbench.errors import UsageError


@dataclass(frozen=True)
class LaunchEnv:
    """One process's place in a job started by an external launcher."""

    launcher: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    master_addr: str | None
    master_port: int | None
    #: This node's index among the job's nodes, when the launcher says.
    node_rank: int | None = None
    #: Nodes in the job, when the launcher says (else counted after rendezvous).
    nnodes: int | None = None
    #: The job's hosts, when the launcher lists them (Slurm), in its order.
    hosts: tuple[str, ...] = ()

    @property
    def multi_node(self) -> bool | None:
        """Whether ranks live on more than one node; None when the launcher does not say."""
        if self.nnodes is not None:
            return self.nnodes > 1
        if self.local_world_size is not None:
            return self.local_world_size < self.world_size
        return None


def quiet_other_ranks(env: dict[str, str] | None = None) -> None:
    """Ranks other than 0 print nothing but errors: lower torch's C++ log level to ERROR.
    torch reads TORCH_CPP_LOG_LEVEL once, when it loads, so this runs on the import of
    colbench, before detection: it only peeks at the rank and never raises. Warnings that
    matter (gloo's peer-name lookups failing, say) show on rank 0 as well."""
    target = os.environ if env is None else env
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        value = target.get(name, "").strip()
        if value:
            if value != "0":
                target.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
            return


def export(launch: LaunchEnv, env: dict[str, str] | None = None) -> None:
    """Write the env:// variables torch's rendezvous reads, from whatever launcher we had."""
    target = os.environ if env is None else env
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        value = getattr(launch, name.lower())  # each variable's field has its name
        if value is not None:
            target[name] = str(value)


_LOCAL_WORLD_SIZE_VARS = (
    "LOCAL_WORLD_SIZE",
    "SLURM_NTASKS_PER_NODE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
)


def declared_local_world_size() -> int | None:
    """Ranks on this node as the launcher's variables say, or None when none says."""
    for var in _LOCAL_WORLD_SIZE_VARS:
        value = os.environ.get(var, "").split("(")[0]
        if value.isdigit():
            return int(value)
    return None


def local_world_size_from_env(world_size: int) -> int:
    """Ranks on this node; without a launcher's word, every rank is assumed local."""
    declared = declared_local_world_size()
    return world_size if declared is None else declared


def node_id() -> str:
    """What makes two ranks share a node: one kernel (boot id) and one network stack
    (network-namespace inode), plus the hostname for people to read. The hostname alone is
    not enough (containers share it with their host, cloned machines with each other);
    ranks on one kernel in one network namespace talk over loopback and shared memory,
    which is what "same node" means for communication."""
    host, boot = socket.gethostname(), _read("/proc/sys/kernel/random/boot_id").strip()
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{host}|{boot}|{netns}"


def node_labels(node_ids: Sequence[str]) -> list[str]:
    """One readable label per rank: the hostname, or ``host#k`` where k-th distinct node
    of that hostname (in rank order) when several nodes share it."""
    hosts = [nid.split("|", 1)[0] for nid in node_ids]
    nodes: dict[str, list[str]] = {}  # each hostname's distinct nodes, in rank order
    for host, nid in zip(hosts, node_ids, strict=True):
        if nid not in nodes.setdefault(host, []):
            nodes[host].append(nid)
    return [
        host if len(nodes[host]) == 1 else f"{host}#{nodes[host].index(nid)}"
        for host, nid in zip(hosts, node_ids, strict=True)
    ]


#: Where launchers say which node a process runs on: Slurm on every task, Kubernetes
#: where the pod spec passes spec.nodeName down (the downward API's usual name).
NODE_NAME_VARIABLES = ("SLURMD_NODENAME", "NODE_NAME")


def node_name(env: dict[str, str] | None = None) -> str:
    """The node's name as its launcher gives it, else the host name: what a drain list
    must say for the scheduler to find the node."""
    env = dict(os.environ) if env is None else env
    for key in NODE_NAME_VARIABLES:
        value = env.get(key, "").strip()
        if value:
            return value
    return socket.gethostname()


#: Open files of a rank besides its sockets to peers: torch's libraries, pipes, its log
#: (24 measured).
RANK_BASE_FILES = 64
#: Open files per peer: 3 measured (the measured group, the gloo side group, the
#: store), one more for a --group-size subgroup.
FILES_PER_PEER = 4
#: The parent's files: its own (14 measured), then per rank a store connection and a
#: process pipe (3 measured).
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


def _read(path: str) -> str:
    """A small /proc file's text; "" where it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return ""


def _proc_int(path: str, field: int = 0) -> int | None:
    """A number in a /proc file: its ``field``-th word, the total after a slash (the 4th of
    /proc/loadavg is running/total threads); None where the file says none."""
    try:
        return int(_read(path).split()[field].split("/")[-1])
    except (ValueError, IndexError):
        return None


def thread_room() -> tuple[int, str] | None:
    """(threads this user may still start, the limit that says so), or None if unknown."""
    limits, threads_now = [], _proc_int("/proc/loadavg", 3) or 0
    for path, name in (
        ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
        ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
    ):
        value = _proc_int(path)
        if value is not None:
            limits.append((value - threads_now, name))
    nproc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    # Root is not held to RLIMIT_NPROC; anyone else counts their threads against it.
    if os.geteuid() != 0 and nproc != resource.RLIM_INFINITY:
        limits.append((nproc - threads_now, "ulimit -u"))
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


#: Address space glibc reserves for each malloc arena beyond the first (HEAP_MAX_SIZE on
#: 64-bit): untouched memory, but it counts against ``ulimit -v``.
MALLOC_ARENA_BYTES = 64 * 2**20
#: A thread's stack when ``ulimit -s`` is unlimited (glibc's default then, x86-64).
UNLIMITED_STACK_BYTES = 32 * 2**20
#: The smallest buffers of a rank and its verification scratch (what a sweep of small
#: sizes allocates; colbench.bench.memory.VERIFY_SCRATCH_BYTES).
RANK_MIN_BUFFER_BYTES = 64 * 2**20
#: glibc's mallopt parameter for the most arenas.
_M_ARENA_MAX = -8


def address_space_limit_bytes() -> int | None:
    """This process's address-space limit (``ulimit -v``, RLIMIT_AS), or None if unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def address_space_used_bytes() -> int | None:
    """The address space this process maps now (VmSize), or None where /proc cannot say."""
    status = _read("/proc/self/status").splitlines()
    return next((int(x.split()[1]) * 1024 for x in status if x.startswith("VmSize:")), None)


def thread_stack_bytes() -> int:
    """Address space a new thread's stack takes (glibc sizes it by ``ulimit -s``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return UNLIMITED_STACK_BYTES if soft == resource.RLIM_INFINITY else int(soft)


def one_malloc_arena() -> None:
    """Keep glibc's malloc to one arena in this process and the ranks it starts: each
    thread that allocates gets an arena of its own, 64 MiB of address space apiece that
    ``ulimit -v`` counts, so whether a rank fits would depend on which threads happen to
    allocate. A user's MALLOC_ARENA_MAX wins; forked ranks inherit the setting, other
    interpreters read the variable."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    os.environ["MALLOC_ARENA_MAX"] = "1"
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    if mallopt is not None:  # glibc; other C libraries keep their own ways
        mallopt(_M_ARENA_MAX, 1)


def check_address_space(what: str) -> str | None:
    """Under ``ulimit -v``, refuse a limit a rank cannot start in; else the note to say.

    A rank starts as this process maps now (torch loaded; a forked rank is its copy),
    plus a stack per thread and an arena, plus its smallest buffers. Below that a rank
    fails in torch's import or in a thread's creation, with a C++ abort. ``what`` names
    the ranks (``--nprocs 4``, ``rank 3``). Caps malloc's arenas (:func:`one_malloc_arena`).
    """
    limit, used = address_space_limit_bytes(), address_space_used_bytes()
    if limit is None or used is None:
        return None
    one_malloc_arena()
    threads = THREADS_PER_RANK * thread_stack_bytes() + MALLOC_ARENA_BYTES
    need = used + threads + RANK_MIN_BUFFER_BYTES
    if limit < need:
        raise UsageError(
            f"{what}: the address-space limit (ulimit -v {limit // 1024}, {_mib(limit)}) is "
            f"below what a rank needs: torch and colbench map {_mib(used)} here, a rank's "
            f"threads {_mib(threads)} more, its smallest buffers {_mib(RANK_MIN_BUFFER_BYTES)}; "
            f"raise it to ulimit -v {-(-need // 1024)} or more"
        )
    room = limit - need + RANK_MIN_BUFFER_BYTES
    return (
        f"address-space limit {_mib(limit)} per process (ulimit -v): about {_mib(room)} per "
        "rank for buffers (the sweep skips sizes that need more); ranks use one malloc arena"
    )


def _mib(size_bytes: int) -> str:
    return f"{size_bytes / 2**20:.0f} MiB"


#: What loading torch maps beyond its libraries' size (measured: 32 MiB, torch 2.x CPU).
TORCH_LOAD_MARGIN_BYTES = 64 * 2**20


def _torch_libraries_bytes() -> int | None:
    """The size of torch's shared libraries (and the CUDA ones its wheels load from
    ``nvidia/``), found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    found = [*(package / "lib").glob("*.so*"), *package.parent.glob("nvidia/*/lib/*.so*")]
    return sum(path.stat().st_size for path in found)


def _cannot_load(limit: int, why: str) -> str:
    return (
        f"torch cannot load under this process's address-space limit (ulimit -v "
        f"{limit // 1024}, {_mib(limit)}): {why}, and a rank needs more than that: raise "
        "the limit (ulimit -v unlimited)"
    )


class _TorchLoadGate(importlib.abc.MetaPathFinder):
    """Refuses, in one line, the import of torch that the address-space limit cannot hold.

    Past the limit, torch's import fails part-way: an ImportError, a SystemError, or a
    C++ ``std::bad_alloc`` in a static initializer that aborts the process with no
    Python frame to catch it. Asked first, the answer is a UsageError.
    """

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname != "torch":
            return None
        # Asked once: finding torch's files below asks the finders for torch again.
        sys.meta_path.remove(self)
        limit, used = address_space_limit_bytes(), address_space_used_bytes()
        if limit is None or used is None:
            return None
        libraries = _torch_libraries_bytes()
        if libraries is not None and used + libraries + TORCH_LOAD_MARGIN_BYTES > limit:
            held = f"its libraries alone map {_mib(libraries)} beside the {_mib(used)} this "
            raise UsageError(_cannot_load(limit, held + "process holds"))
        return None


def guard_torch_import() -> None:
    """Under ``ulimit -v``, check the room for torch when something first imports it."""
    if address_space_limit_bytes() is not None and "torch" not in sys.modules:
        sys.meta_path.insert(0, _TorchLoadGate())


def torch_load_failure(exc: BaseException) -> str | None:
    """One line for torch failing to load under ``ulimit -v``, or None when that is not
    what ``exc`` is (no limit, or the failure is not in torch's import).

    Loading torch maps its libraries (half a GiB for a CPU build) and fails part-way
    under a small limit: an ImportError ("failed to map segment from shared object"), or
    a SystemError from an extension whose allocation failed.
    """
    limit = address_space_limit_bytes()
    if limit is None or not isinstance(exc, ImportError | SystemError | MemoryError):
        return None
    where = f"{os.sep}torch{os.sep}"
    if not any(where in frame.filename for frame in traceback.extract_tb(exc.__traceback__)):
        return None
    text = str(exc).strip().splitlines()
    return _cannot_load(limit, f"{type(exc).__name__}{': ' + text[0] if text else ''}")
