"""One nccl-tests rank of an emulated world: ``python -m colbench.commands.crosscheck.emulated_rank
K PROGRAM ARGS...`` under mpiexec.

``crosscheck --ranks-per-gpu K`` starts nccl-tests (an MPI build) under mpiexec with this
module in front of the program. It gives the rank what a colbench rank of ``sweep
--ranks-per-gpu K`` gives itself (:func:`colbench.host.launchers.gpus.rank_environment`)
and its GPU through ``NCCL_TESTS_DEVICE`` (nccl-tests would otherwise take GPU ``local
rank``, which does not exist when ranks outnumber GPUs), then becomes the program. So both
sides of the cross-check run the same NCCL world: the same nodes, transport and algorithm
choices.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping, Sequence

from colbench.host.launchers import gpus as emulation

#: Where MPI launchers put a process's rank: MPICH/Hydra, Open MPI, PMIx, MVAPICH's
#: mpirun_rsh, Cray PALS. Not SLURM_PROCID: a batch script's every process inherits 0.
RANK_VARIABLES = (
    "PMI_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
    "PALS_RANKID",
)


def mpi_rank(environ: Mapping[str, str]) -> int:
    for name in RANK_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    raise SystemExit(
        "colbench: error: no MPI rank in the environment (none of "
        + ", ".join(RANK_VARIABLES)
        + "): run nccl-tests under mpiexec"
    )


def environment(ranks_per_gpu: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the program runs in: the caller's, plus the emulation's."""
    rank = mpi_rank(environ)
    to_set, _ = emulation.rank_environment(rank, socket.gethostname(), True, environ)
    # One host (crosscheck runs on one node): the world rank is the local rank. Always
    # set, even over the caller's: colbench's side takes GPU rank // K, and the two sides
    # must run one world.
    to_set["NCCL_TESTS_DEVICE"] = str(rank // ranks_per_gpu)
    return {**environ, **to_set}


def main(argv: Sequence[str]) -> None:
    if len(argv) < 2 or not argv[0].isdigit():
        raise SystemExit(
            "usage: python -m colbench.commands.crosscheck.emulated_rank K PROGRAM [ARGS...]"
        )
    env = environment(int(argv[0]), os.environ)
    os.execve(argv[1], list(argv[1:]), env)


if __name__ == "__main__":
    main(sys.argv[1:])
