"""Where ranks come from: a launcher already started us, or we spawn them ourselves.

Launchers are detected from their environment variables (torchrun / env://, SLURM
srun, Open MPI, MPICH/PMI). A partial set is an error naming what is missing, since
guessing the rest is how multi-node jobs hang.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

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


# (launcher, rank var, world var, local-rank var, local-world var), most specific first.
_SCHEMES: tuple[tuple[str, str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    (
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


def _int(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    try:
        return int(value.split("(")[0])
    except ValueError:
        raise UsageError(f"environment variable {name}={value!r} is not an integer") from None


def detect(env: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """The launcher that started this process, or None when colbench should spawn ranks."""
    env = os.environ if env is None else env
    for launcher, rank_var, world_var, local_var, local_world_var in _SCHEMES:
        present = [v for v in (rank_var, world_var) if v in env]
        if not present:
            continue
        if launcher == "slurm" and "SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env:
            # Inside an sbatch script but not under srun: handled by the caller's checks.
            continue
        if len(present) < 2:
            missing = {rank_var, world_var} - set(present)
            raise UsageError(
                f"{launcher} environment is incomplete: {', '.join(present)} set but "
                f"{', '.join(sorted(missing))} missing"
            )
        if launcher == "torchrun" and "TORCHELASTIC_RUN_ID" not in env:
            launcher = "env"
        rank, world = _int(env, rank_var), _int(env, world_var)
        if not 0 <= rank < world:
            raise UsageError(f"{rank_var}={rank} is not a rank of {world_var}={world}")
        local_rank = _int(env, local_var) if local_var in env else 0
        local_world = _int(env, local_world_var) if local_world_var in env else None
        addr = env.get("MASTER_ADDR")
        port = _int(env, "MASTER_PORT") if "MASTER_PORT" in env else None
        if world > 1 and (addr is None or port is None):
            missing_vars = [v for v in ("MASTER_ADDR", "MASTER_PORT") if v not in env]
            raise UsageError(
                f"{launcher} launch of {world} ranks needs {' and '.join(missing_vars)} "
                "to find rank 0; export them before starting colbench"
            )
        return LaunchEnv(launcher, rank, world, local_rank, local_world, addr, port)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free now (only for tests; runs let TCPStore pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
