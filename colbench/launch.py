"""Where ranks come from: a launcher already started us, or we spawn them ourselves.

Launchers are detected from their environment variables (torchrun / env://, Open MPI,
MPICH/PMI, SLURM srun). A partial or contradictory set is an error naming what is
wrong, since guessing the rest is how multi-node jobs hang. When a launcher nests
another (torchrun started by srun, mpirun inside an allocation), the innermost one
describes this process, so the order of checks is torchrun, Open MPI, MPICH, SLURM.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import socket
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.errors import ExitCode, RankFailure, UsageError

#: Slurm's special step ids (batch, extern, interactive...) sit at the top of uint32;
#: a process in one of them was not started by srun.
_SLURM_SPECIAL_STEP = 0xFFFFFFF0
#: Ports derived for Slurm jobs without MASTER_PORT lie in [base, base + span).
SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 20000


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


def _int(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    try:
        # Slurm writes some counts as "8(x2)"; the leading number is the one meant.
        return int(value.split("(")[0].strip())
    except ValueError:
        raise UsageError(f"environment variable {name}={value!r} is not an integer") from None


def _opt_int(env: Mapping[str, str], name: str) -> int | None:
    return _int(env, name) if name in env else None


def _require(launcher: str, env: Mapping[str, str], names: Sequence[str]) -> bool:
    """True when all of ``names`` are set, False when none is; an error when some are."""
    present = [n for n in names if n in env]
    if not present:
        return False
    missing = [n for n in names if n not in env]
    if missing:
        raise UsageError(
            f"{launcher} environment is incomplete: {', '.join(present)} set but "
            f"{', '.join(missing)} missing"
        )
    return True


def _master(
    launcher: str, env: Mapping[str, str], world: int, addr: str | None, port: int | None
) -> tuple[str | None, int | None]:
    if world > 1 and (addr is None or port is None):
        missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
        hint = (
            "; MPI launchers have no rendezvous of their own, so export them (rank 0's "
            "host and a free port) to every rank, e.g. mpirun -x MASTER_ADDR -x MASTER_PORT"
            if launcher in ("openmpi", "mpich")
            else "; export them before starting colbench"
        )
        raise UsageError(
            f"{launcher} launch of {world} ranks needs {' and '.join(missing)} to find rank 0{hint}"
        )
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"MASTER_PORT={port} is not a TCP port (1-65535)")
    return addr, port


def _checked(found: LaunchEnv, names: tuple[str, str, str, str]) -> LaunchEnv:
    """Refuse a contradictory set: every number must fit the others."""
    rank_var, world_var, local_var, local_world_var = names
    rank, world, local = found.rank, found.world_size, found.local_rank
    if world < 1:
        raise UsageError(f"{world_var}={world}: a job needs at least one rank")
    if not 0 <= rank < world:
        raise UsageError(f"{rank_var}={rank} is not a rank of {world_var}={world}")
    local_world = found.local_world_size
    if local_world is not None:
        if not 1 <= local_world <= world:
            raise UsageError(
                f"{local_world_var}={local_world} does not fit {world_var}={world}: a node "
                f"holds between 1 and {world} ranks"
            )
        if not 0 <= local < local_world:
            raise UsageError(
                f"{local_var}={local} is not a local rank of {local_world_var}={local_world}"
            )
    elif not 0 <= local < world:
        raise UsageError(f"{local_var}={local} is not a local rank of {world_var}={world}")
    if found.nnodes is not None:
        if not 1 <= found.nnodes <= world:
            raise UsageError(
                f"{found.launcher} says the job has {found.nnodes} nodes for {world} ranks"
            )
        if found.node_rank is not None and not 0 <= found.node_rank < found.nnodes:
            raise UsageError(
                f"{found.launcher} says this is node {found.node_rank} of {found.nnodes}"
            )
    return found


def _torchrun(env: Mapping[str, str]) -> LaunchEnv | None:
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    if not _require("torchrun/env://", env, names):
        return None
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    world = _int(env, "WORLD_SIZE")
    addr, port = _master(launcher, env, world, env.get("MASTER_ADDR"), _opt_int(env, "MASTER_PORT"))
    found = LaunchEnv(
        launcher=launcher,
        rank=_int(env, "RANK"),
        world_size=world,
        local_rank=_int(env, "LOCAL_RANK"),
        local_world_size=_opt_int(env, "LOCAL_WORLD_SIZE"),
        master_addr=addr,
        master_port=port,
        # torchrun's "group" is one agent, i.e. one node.
        node_rank=_opt_int(env, "GROUP_RANK"),
        nnodes=_opt_int(env, "GROUP_WORLD_SIZE"),
    )
    return _checked(found, (*names, "LOCAL_WORLD_SIZE"))


def _openmpi(env: Mapping[str, str]) -> LaunchEnv | None:
    names = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
    if not _require("openmpi", env, names):
        return None
    world = _int(env, "OMPI_COMM_WORLD_SIZE")
    addr, port = _master(
        "openmpi", env, world, env.get("MASTER_ADDR"), _opt_int(env, "MASTER_PORT")
    )
    found = LaunchEnv(
        launcher="openmpi",
        rank=_int(env, "OMPI_COMM_WORLD_RANK"),
        world_size=world,
        local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK"),
        local_world_size=_opt_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE"),
        master_addr=addr,
        master_port=port,
    )
    return _checked(found, (*names, "OMPI_COMM_WORLD_LOCAL_SIZE"))


def _mpich(env: Mapping[str, str]) -> LaunchEnv | None:
    names = ("PMI_RANK", "PMI_SIZE")
    if not _require("mpich", env, names):
        return None
    if "MPI_LOCALRANKID" not in env:
        slurm = _slurm(env)
        # srun --mpi=pmi2 sets PMI_* but not Hydra's local ids; srun's own say the same.
        if slurm is not None and slurm.rank == _int(env, "PMI_RANK"):
            return slurm
        raise UsageError(
            "mpich environment is incomplete: PMI_RANK, PMI_SIZE set but MPI_LOCALRANKID "
            "missing (Hydra's mpiexec sets it; it picks this rank's GPU)"
        )
    world = _int(env, "PMI_SIZE")
    addr, port = _master("mpich", env, world, env.get("MASTER_ADDR"), _opt_int(env, "MASTER_PORT"))
    found = LaunchEnv(
        launcher="mpich",
        rank=_int(env, "PMI_RANK"),
        world_size=world,
        local_rank=_int(env, "MPI_LOCALRANKID"),
        local_world_size=_opt_int(env, "MPI_LOCALNRANKS"),
        master_addr=addr,
        master_port=port,
    )
    return _checked(found, ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"))


def _slurm_step(env: Mapping[str, str]) -> int | None:
    """The srun step id, or None outside a step started by srun."""
    for name in ("SLURM_STEP_ID", "SLURM_STEPID"):
        if name in env:
            step = _int(env, name)
            return step if 0 <= step < _SLURM_SPECIAL_STEP else None
    return None


def slurm_default_port(job_id: int, step_id: int) -> int:
    """A port every task of one srun step derives alike, spread so that concurrent
    steps and jobs sharing a node rarely pick the same one."""
    return SLURM_PORT_BASE + zlib.crc32(f"{job_id}.{step_id}".encode()) % SLURM_PORT_SPAN


def _slurm(env: Mapping[str, str]) -> LaunchEnv | None:
    step = _slurm_step(env)
    if step is None:
        return None
    names = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
    if not _require("slurm", env, names):
        return None
    world = _int(env, "SLURM_NTASKS")
    nodelist_var = next(
        (v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if v in env),
        None,
    )
    hosts = tuple(expand_hostlist(env[nodelist_var], nodelist_var)) if nodelist_var else ()
    node_rank = _opt_int(env, "SLURM_NODEID")
    nnodes = _opt_int(env, "SLURM_STEP_NUM_NODES") or _opt_int(env, "SLURM_NNODES")
    local_world = None
    per_node_var = next(
        (v for v in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if v in env), None
    )
    if per_node_var is not None and node_rank is not None:
        per_node = expand_tasks_per_node(env[per_node_var], per_node_var)
        if node_rank < len(per_node):
            local_world = per_node[node_rank]
    elif "SLURM_NTASKS_PER_NODE" in env:
        local_world = _int(env, "SLURM_NTASKS_PER_NODE")
    addr = env.get("MASTER_ADDR") or (hosts[0] if hosts else None)
    port = _opt_int(env, "MASTER_PORT")
    if port is None and "SLURM_JOB_ID" in env:
        port = slurm_default_port(_int(env, "SLURM_JOB_ID"), step)
    addr, port = _master("slurm", env, world, addr, port)
    found = LaunchEnv(
        launcher="slurm",
        rank=_int(env, "SLURM_PROCID"),
        world_size=world,
        local_rank=_int(env, "SLURM_LOCALID"),
        local_world_size=local_world,
        master_addr=addr,
        master_port=port,
        node_rank=node_rank,
        nnodes=nnodes,
        hosts=hosts,
    )
    return _checked(found, (*names, per_node_var or "SLURM_NTASKS_PER_NODE"))


def _refuse_sbatch_without_srun(env: Mapping[str, str]) -> None:
    if "SLURM_JOB_ID" not in env or "SLURM_NTASKS" not in env or _slurm_step(env) is not None:
        return
    tasks = _int(env, "SLURM_NTASKS")
    if tasks > 1:
        raise UsageError(
            f"inside Slurm job {env['SLURM_JOB_ID']} with SLURM_NTASKS={tasks} but not "
            "under srun, so this is one process, not a job of ranks: start it with "
            "`srun colbench sweep ...` (or unset SLURM_NTASKS to spawn ranks on this node)"
        )


_SCHEMES: tuple[Callable[[Mapping[str, str]], LaunchEnv | None], ...] = (
    _torchrun,
    _openmpi,
    _mpich,
    _slurm,
)


def detect(env: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """The launcher that started this process, or None when colbench should spawn ranks."""
    env = os.environ if env is None else env
    for scheme in _SCHEMES:
        found = scheme(env)
        if found is not None:
            return found
    _refuse_sbatch_without_srun(env)
    return None


def quiet_other_ranks(env: dict[str, str] | None = None) -> None:
    """Ranks other than 0 print nothing but errors: lower torch's C++ log level to ERROR.

    torch reads TORCH_CPP_LOG_LEVEL once, when it loads, so this runs on the import of
    colbench, before detection; it only peeks at the rank and never raises. Warnings of
    theirs that matter (gloo's peer-name lookups failing, say) show on rank 0 as well.
    """
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
    values = {
        "RANK": launch.rank,
        "WORLD_SIZE": launch.world_size,
        "LOCAL_RANK": launch.local_rank,
        "MASTER_ADDR": launch.master_addr,
        "MASTER_PORT": launch.master_port,
    }
    for name, value in values.items():
        if value is not None:
            target[name] = str(value)


# ---------------------------------------------------------------------------------------
# Slurm's compact host and task lists


def _split_top(text: str, what: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"{what}={text!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"{what}={text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"{what}={text!r}: '[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_range(body: str, text: str, what: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise UsageError(f"{what}={text!r}: bad range {item!r} in brackets")
        if not sep:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise UsageError(f"{what}={text!r}: range {item!r} runs backwards")
        # Slurm keeps the zero padding of the lower bound: node[08-10] -> node08..node10.
        width = len(lo) if lo.startswith("0") else 0
        out.extend(f"{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return out


def _expand_one(item: str, text: str, what: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest, text, what)
    return [prefix + num + tail for num in _expand_range(body, text, what) for tail in tails]


def expand_hostlist(text: str, what: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm hostlist syntax -> host names: ``node[01-02,07],gpu-a[1-2]`` ->
    node01 node02 node07 gpu-a1 gpu-a2. Several bracket groups in one name expand as a
    product (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2)."""
    hosts: list[str] = []
    for item in _split_top(text.strip(), what):
        item = item.strip()
        if not item:
            raise UsageError(f"{what}={text!r}: empty host name")
        hosts.extend(_expand_one(item, text, what))
    return hosts


_TASKS_ITEM = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_tasks_per_node(text: str, what: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's ``2(x3),1`` -> [2, 2, 2, 1]: tasks on each node of the step, in node order."""
    out: list[int] = []
    for item in text.split(","):
        match = _TASKS_ITEM.match(item.strip())
        if match is None:
            raise UsageError(f"{what}={text!r}: expected counts like 8(x2),4")
        out.extend([int(match.group(1))] * int(match.group(2) or 1))
    return out


# ---------------------------------------------------------------------------------------
# Node identity and rendezvous


def node_id() -> str:
    """What makes two ranks share a node: one kernel (boot id) and one network stack
    (network-namespace inode), plus the hostname for people to read.

    The hostname alone is not enough: containers and network namespaces share it with
    their host, and cloned machines share it with each other. Ranks on one kernel in one
    network namespace talk over loopback and shared memory, which is what "same node"
    means for communication; anything else crosses a network device.
    """
    host = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{host}|{boot}|{netns}"


def node_labels(node_ids: Sequence[str]) -> list[str]:
    """One readable label per rank: the hostname, or ``host#k`` where k-th distinct node
    of that hostname (in rank order) when several nodes share it."""
    first_seen: dict[str, list[str]] = {}
    for nid in node_ids:
        host = nid.split("|", 1)[0]
        seen = first_seen.setdefault(host, [])
        if nid not in seen:
            seen.append(nid)
    labels = []
    for nid in node_ids:
        host = nid.split("|", 1)[0]
        seen = first_seen[host]
        labels.append(host if len(seen) == 1 else f"{host}#{seen.index(nid)}")
    return labels


class RendezvousTimeout(RankFailure):
    """The ranks of a job did not all meet within ``--init-timeout``."""

    exit_code = ExitCode.TIMEOUT


def _arrival_key(rank: int) -> str:
    return f"colbench/arrived/{rank}"


def arrived_ranks(store: Any, world_size: int) -> list[int]:
    """Ranks that have checked in at the rendezvous on ``store`` (raises if it is gone)."""
    return [r for r in range(world_size) if store.check([_arrival_key(r)])]


def shown_ranks(ranks: Sequence[object], limit: int = 8) -> str:
    """The first ``limit`` of ``ranks``, comma-separated (a 1000-rank job stays one line)."""
    return ", ".join(map(str, ranks[:limit])) + (", ..." if len(ranks) > limit else "")


def _missing_ranks(store: Any, world_size: int) -> str:
    try:
        arrived = arrived_ranks(store, world_size)
    except (RuntimeError, OSError):
        return "; the store went away (its host, rank 0 or the launcher, gave up or died)"
    missing = [r for r in range(world_size) if r not in arrived]
    if not missing:
        return ""
    return f"; {len(arrived)} of {world_size} ranks arrived, missing rank(s) {shown_ranks(missing)}"


def _agent_store() -> bool:
    # torchrun's agent hosts the store and every worker is a client (torch's own test).
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)


def _wait_listening(host: str, port: int, deadline: float, what: str) -> None:
    """Poll until something accepts TCP connections at host:port.

    torch's TCPStore client retries a refused connection for its whole timeout and then
    once more, so it alone would overrun ``--init-timeout``; a bare connection that is
    closed at once does not count as a store client.
    """
    delay = 0.05
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"nothing accepted connections at {what}")
        try:
            socket.create_connection((host, port), timeout=min(1.0, left)).close()
            return
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host!r}: {exc.strerror}") from None
        except OSError:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)


def rendezvous(
    host: str | None,
    port: int | None,
    rank: int,
    world_size: int,
    init_timeout_s: float,
    timeout_s: float,
) -> Any:
    """Meet every rank through a TCPStore within ``init_timeout_s``; returns the store.

    ``host`` None means env:// (MASTER_ADDR/MASTER_PORT; torchrun's agent store when it
    offers one). After every rank has checked in, the store's timeout becomes
    ``timeout_s``, the run's process-group timeout.
    """
    import torch.distributed as dist

    started = time.monotonic()
    deadline = started + init_timeout_s

    def left() -> _dt.timedelta:
        return _dt.timedelta(seconds=max(0.5, deadline - time.monotonic()))

    env_host, env_port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    where = f"{host}:{port}" if host is not None else f"{env_host}:{env_port}"
    store: Any = None
    try:
        if host is None and _agent_store():
            if env_port.isdigit():
                _wait_listening(env_host, int(env_port), deadline, where)
            store, _, _ = next(
                dist.rendezvous("env://", rank=rank, world_size=world_size, timeout=left())
            )
        elif host is None and world_size == 1 and not env_port:
            # A world of one needs no address; a private store keeps torch's init happy.
            store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=left())
        elif host is None and rank == 0:
            # What env:// does, minus its wait for every client inside the constructor:
            # rank 0 checks in like the others, so a timeout can name the missing ranks.
            store = dist.TCPStore(
                env_host,
                int(env_port),
                world_size,
                is_master=True,
                timeout=left(),
                wait_for_workers=False,
                multi_tenant=True,
            )
        else:
            host, port = (env_host, int(env_port)) if host is None else (host, port)
            assert port is not None
            _wait_listening(host, port, deadline, where)
            store = dist.TCPStore(host, port, world_size, is_master=False, timeout=left())
        store.set(_arrival_key(rank), socket.gethostname())
        store.wait([_arrival_key(r) for r in range(world_size)], left())
    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        missing = _missing_ranks(store, world_size) if store is not None else ""
        raise RendezvousTimeout(
            f"start-up failed: rendezvous of {world_size} ranks at {where} did not complete after "
            f"{time.monotonic() - started:.0f} s (--init-timeout {init_timeout_s:g} s)"
            f"{missing}: {first}"
        ) from None
    store.set_timeout(_dt.timedelta(seconds=timeout_s))
    return store


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free now (only for tests; runs let TCPStore pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
