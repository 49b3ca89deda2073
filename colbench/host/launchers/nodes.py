"""Which ranks share a node, and names for nodes that people can read."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence


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
