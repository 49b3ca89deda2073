"""One process's place in a job: the environment torch's env:// rendezvous reads, and which
ranks share a node, with names for nodes that people can read.

Imported by ``colbench/__init__`` before torch loads, so nothing here imports torch.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass


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
