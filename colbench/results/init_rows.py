"""init.csv: communicator set-up as rows of their own (``sweep --init-only``).

A row is one set-up of one communicator of every rank: how long until every rank could
use it, and the device memory it took. It is no measurement of a collective, so it has a
table of its own beside results.csv (PARAM's ``--init-only`` and torchcomms'
communicator-memory benchmark measure the same): a fleet that runs it at several world
sizes sees set-up time and memory grow with scale (``load_init`` of each run).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.results.tables import Table, TableRow, column, read_cells, register

INIT_VERSION = 1
INIT_HISTORY: dict[int, str] = {
    1: "first release (colbench results schema 9): `sweep --init-only`'s set-up rows.",
}


@dataclass(frozen=True, kw_only=True)
class InitRow(TableRow):
    """One communicator set-up, the slowest rank's view beside the ranks' average."""

    schema_version: int = column("version of this column list (see below)", "", INIT_VERSION)
    run_id: str = column("identifier of the run (the run directory's name)")
    variant: str = column("environment variant of the run, e.g. NCCL_ALGO=Tree (empty: none)")
    backend: str = column("torch.distributed backend of the world: gloo or nccl")
    engine: str = column(
        "what made the communicator: torch (a torch.distributed group) or nccl (NCCL "
        "itself, through nccl4py)"
    )
    device: str = column("cpu, or the GPU model")
    world_size: int = column("ranks in the communicator (every rank of the run)", "ranks")
    nnodes: int = column("hosts the ranks ran on", "nodes")
    ranks_per_gpu: int = column("NCCL ranks sharing one GPU (--ranks-per-gpu); 1 otherwise")
    repeat: int = column("set-up index 0..R-1 of sweep --init-only --repeat R")
    init_us: float = column(
        "from the ranks' common start (a barrier of the side group) until the last rank "
        "could use the communicator: the largest create_us + first_call_us over ranks",
        "us",
    )
    init_ranks_avg_us: float = column("create_us + first_call_us, the mean over ranks", "us")
    create_us: float = column(
        "making the communicator, the longest over ranks: torch, dist.new_group of every "
        "rank; nccl, rank 0's ncclGetUniqueId, its bytes carried over the gloo side group, "
        "and ncclCommInitRank (as nccl-tests' set-up)",
        "us",
    )
    first_call_us: float | None = column(
        "torch only: the first call on the new group (a one-element all_reduce, waited "
        "for), in which torch starts NCCL's communicator (lazily); the longest over ranks. "
        "Empty for engine nccl, whose ncclCommInitRank is the whole set-up",
        "us",
    )
    slowest_rank: int = column("the rank with the largest create_us + first_call_us", "rank")
    device_mem_bytes: int | None = column(
        "device memory the set-up took: free memory (cudaMemGetInfo) before minus after, "
        "the largest over ranks; ranks sharing a GPU (--ranks-per-gpu) see each other's. "
        "Empty without a GPU",
        "B",
    )


INIT = Table(
    "init.csv",
    InitRow,
    INIT_VERSION,
    INIT_HISTORY,
    "With `sweep --init-only`: one row per communicator set-up (per repeat).",
)
register(INIT)


def load_init(path: str | os.PathLike[str]) -> Any:
    """init.csv as a DataFrame (through the bounded reader); a run without one (not made
    with --init-only) or of a newer version is one line naming the file."""
    import pandas as pd

    file = Path(path)
    file = file / INIT.file_name if file.is_dir() else file
    if not file.is_file():
        raise UsageError(f"no {INIT.file_name} in {file.parent}: sweep --init-only writes it")
    header, rows = read_cells(file, INIT.file_name)
    if "schema_version" not in header:
        raise UsageError(f"{file} is not an {INIT.file_name}: it has no schema_version column")
    frame = pd.DataFrame(rows, columns=header).replace("", None)
    versions = {int(v) for v in frame["schema_version"]} or {INIT_VERSION}
    if max(versions) > INIT_VERSION:
        raise UsageError(
            f"{file}: {INIT.file_name} version {max(versions)} is newer than this colbench "
            f"reads (1 to {INIT_VERSION}): upgrade colbench to read it"
        )
    missing = [c for c in INIT.columns if c not in header]
    if missing:
        raise UsageError(f"{file} is not an {INIT.file_name}: it lacks {', '.join(missing)}")
    for name in INIT.columns:
        if name not in INIT.text_columns:
            frame[name] = pd.to_numeric(frame[name])
    return frame
