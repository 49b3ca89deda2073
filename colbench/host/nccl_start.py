"""What must hold before a rank's NCCL communicator exists: torch's blocking wait unset,
NCCL's start-up log placed, an emulated node's variables set (--ranks-per-gpu), and every
rank's GPU distinct. NCCL reads its environment once, when it starts; a gloo rank never
comes here.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench.host.job import RankJob
from colbench.host.launchers import devices, gpus
from colbench.results.rundir import RunDir

#: torch's variables that make every work's wait() poll on the host (the old name too).
BLOCKING_WAIT_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")


def blocking_wait_note(environ: Mapping[str, str]) -> str | None:
    """The note for a blocking-wait variable colbench unsets in its NCCL ranks."""
    found = [name for name in BLOCKING_WAIT_VARS if environ.get(name, "") not in ("", "0")]
    if not found:
        return None
    return (
        f"{found[0]}={environ[found[0]]} is unset in colbench's ranks: it makes every "
        "collective's wait() poll on the host, which breaks CUDA graph capture and changes "
        "what CUDA events time (hangs are still caught: --timeout)"
    )


#: NCCL's start-up subsystems: ranks, nodes, channels, each peer connection's transport,
#: the network chosen, the environment it read. None of them logs per call (TUNING does:
#: see colbench.commands.sweep.probe), so the timed loop pays nothing for the log.
NCCL_LOG_SUBSYS = "INIT,ENV,NET,GRAPH"


def nccl_log_environment(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """Variables that send NCCL's INFO log of start-up to ``path`` (never the terminal).

    A user's own NCCL_DEBUG, NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE wins: their log is
    theirs to place (then colbench reads what it finds at ``path``, if anything).
    """
    if "NCCL_DEBUG" in environ:
        return {}
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": environ.get("NCCL_DEBUG_SUBSYS", NCCL_LOG_SUBSYS),
        "NCCL_DEBUG_FILE": environ.get("NCCL_DEBUG_FILE", str(path)),
    }


_RUN_DIR_KEY = "colbench/run-dir"


def nccl_log_path(job: RankJob, rank: int, store: Any) -> Path:
    """Where this rank's NCCL log goes: the run directory (launched ranks learn rank 0's
    through the store, and use it where their host shares the file system), else a file
    of their own in the temporary directory."""
    launched = job.store_host is None
    if launched and rank == 0:
        store.set(_RUN_DIR_KEY, job.run_dir or "")
    shared = store.get(_RUN_DIR_KEY).decode() if launched and rank != 0 else None
    run_dir = job.run_dir or shared or ""
    if run_dir and os.access(run_dir, os.W_OK):
        return RunDir(run_dir).nccl_log(rank)
    return Path(tempfile.gettempdir()) / f"colbench-{job.run_id or 'run'}-nccl-rank{rank}.log"


def prepare_nccl(job: RankJob, rank: int, device: Any, store: Any) -> None:
    """What must hold before this rank's NCCL communicator exists.

    NCCL reads its environment once, when it starts: the emulated node's variables
    (--ranks-per-gpu) and the removal of torch's blocking wait happen here. Then every
    rank's GPU and host identity are compared over the store, so ranks NCCL would
    refuse ("Duplicate GPU detected") are refused first, in one line naming them.
    """
    for name in BLOCKING_WAIT_VARS:
        os.environ.pop(name, None)
    os.environ.update(nccl_log_environment(os.environ, nccl_log_path(job, rank, store)))
    host = socket.gethostname()
    if job.launch.ranks_per_gpu > 1:
        to_set, _ = gpus.rank_environment(rank, host, job.single_host, os.environ)
        os.environ.update(to_set)
    mine = devices.GpuIdentity(
        rank=rank,
        host=host,
        nccl_host=devices.nccl_host_identity(),
        bus_id=devices.gpu_bus_id(device),
        uuid=devices.gpu_uuid(device),
    )
    devices.check_distinct_gpus(devices.exchange_identities(store, rank, job.world_size, mine))
