"""Where ranks come from: a launcher already started us, or we spawn them ourselves.

- :mod:`~colbench.host.launchers.env`: :class:`LaunchEnv`, one process's place in a job, and the
  env:// variables written from it, which ranks share a node;
- :mod:`~colbench.host.launchers.detect`: which launcher (torchrun, Open MPI, MPICH, Slurm)
  started this process, refusing partial or contradictory environments; Slurm's compact
  host and task lists;
- :mod:`~colbench.host.launchers.rendezvous`: every rank meets the others through one TCPStore
  (who answers at its address asked first, in bounded time).

Spawning our own ranks is :mod:`colbench.host.spawn`. Nothing here imports torch at
import time: ``colbench/__init__`` uses :func:`quiet_other_ranks` before torch loads.
"""

from colbench.host.launchers.detect import (
    SLURM_PORT_BASE,
    SLURM_PORT_SPAN,
    detect,
    expand_hostlist,
    expand_tasks_per_node,
    join_or_spawn,
    slurm_default_port,
)
from colbench.host.launchers.env import LaunchEnv, export, node_id, node_labels, quiet_other_ranks
from colbench.host.launchers.rendezvous import (
    RendezvousTimeout,
    arrived_ranks,
    free_port,
    rendezvous,
    shown_ranks,
)

__all__ = [
    "SLURM_PORT_BASE",
    "SLURM_PORT_SPAN",
    "LaunchEnv",
    "RendezvousTimeout",
    "arrived_ranks",
    "detect",
    "expand_hostlist",
    "expand_tasks_per_node",
    "export",
    "free_port",
    "join_or_spawn",
    "node_id",
    "node_labels",
    "quiet_other_ranks",
    "rendezvous",
    "shown_ranks",
    "slurm_default_port",
]
