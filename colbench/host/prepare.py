"""What the parent decides before any rank starts: backend, world size, run directory.

Spawned and launched runs share these: a launched rank 0 makes the run directory too.
"""

from __future__ import annotations

import os
from pathlib import Path

from colbench.config.model import LaunchConfig, OutputConfig
from colbench.errors import UsageError
from colbench.host.launchers import gpus as gpus_module
from colbench.host.launchers import limits
from colbench.results.rundir import RunDir, stamped_name


def resolve_backend(requested: str, spawning: bool, gpu_count: int, nccl_available: bool) -> str:
    """``auto`` -> nccl when there is a GPU for it, else gloo; explicit nccl is checked.

    One GPU is enough, spawned or launched: a world of one rank is what nccl-tests
    ``-g 1`` measures on such a machine (see :func:`one_gpu_note`).
    """
    if requested == "gloo":
        return "gloo"
    if requested == "nccl":
        if gpu_count == 0:
            raise UsageError(
                "--backend nccl needs CUDA GPUs and none are visible; use --backend gloo"
            )
        if not nccl_available:
            raise UsageError("--backend nccl: this torch build has no NCCL; use --backend gloo")
        return "nccl"
    return "nccl" if gpu_count >= 1 and nccl_available else "gloo"


def default_nprocs(backend: str, gpu_count: int, ranks_per_gpu: int = 1) -> int:
    """Ranks to spawn: one per GPU on NCCL (a single GPU gives a world of one; K per GPU
    with --ranks-per-gpu K), else 2."""
    return max(1, gpu_count) * ranks_per_gpu if backend == "nccl" else 2


def choose_backend(launch: LaunchConfig, spawning: bool) -> str:
    """The backend a run uses; --ranks-per-gpu without a GPU is refused first, by name."""
    import torch.distributed as dist

    gpus = gpus_module.gpu_count()
    if launch.ranks_per_gpu > 1 and gpus == 0:
        raise UsageError(
            f"--ranks-per-gpu {launch.ranks_per_gpu} shares GPUs among NCCL ranks, and no "
            "GPU is visible; without GPUs, --backend gloo runs CPU ranks (--nprocs)"
        )
    return resolve_backend(launch.backend, spawning, gpus, dist.is_nccl_available())


def spawned_world_size(launch: LaunchConfig, backend: str) -> int:
    """How many ranks to spawn: --nprocs, else the default, within what the GPUs allow."""
    gpus, per_gpu = gpus_module.gpu_count(), launch.ranks_per_gpu
    world_size = launch.nprocs or default_nprocs(backend, gpus, per_gpu)
    if backend == "nccl" and world_size > gpus * per_gpu:
        more = (
            f"--ranks-per-gpu {per_gpu} allows {gpus * per_gpu}"
            if per_gpu > 1
            else "NCCL needs one GPU per rank (--ranks-per-gpu K shares each among K emulated "
            "nodes)"
        )
        raise UsageError(
            f"--nprocs {world_size} but only {gpus} GPU(s): {more}; --backend gloo runs "
            f"{world_size} ranks on the CPU"
        )
    return world_size


def nccl_notes(launch: LaunchConfig, backend: str) -> list[str]:
    """Checks and notes of an NCCL run before any rank starts (every launch mode)."""
    if backend != "nccl":
        return []
    notes = []
    if launch.ranks_per_gpu > 1:
        from colbench.host.launchers import emulation

        notes += emulation.check_parent(launch.ranks_per_gpu, backend, gpus_module.visible_gpus())
    from colbench.host.nccl_start import blocking_wait_note

    blocked = blocking_wait_note(os.environ)
    return notes + ([blocked] if blocked else [])


def one_gpu_note(requested: str, backend: str, world_size: int) -> str | None:
    """Say so when ``auto`` chose a world of one: its bus bandwidths are mostly 0."""
    if requested != "auto" or backend != "nccl" or world_size != 1:
        return None
    return (
        "one GPU: measuring NCCL with 1 rank, as nccl-tests -g 1 does (bus bandwidth is 0 "
        "for collectives that move data between ranks); --backend gloo runs 2 CPU ranks"
    )


def spawn_notes(world_size: int, worlds: int = 1) -> list[str]:
    """Refuse spawning ``worlds`` worlds of ``world_size`` ranks at once where this host's
    limits cannot hold them (colbench.host.launchers.limits); else what to say before they start."""
    ranks = world_size * worlds
    limits.check_spawn(ranks, world_size, f"--nprocs {world_size}")
    notes = [limits.check_address_space(f"--nprocs {world_size}"), limits.crowded_note(ranks)]
    return [note for note in notes if note]


def make_run_dir(output: OutputConfig, label: str, backend: str) -> Path:
    """Create the run directory: --out (new or empty), else a new
    ``<results>/<stamp>-<label>-<backend>``."""
    default = Path(output.results_root) / stamped_name(label, backend)
    return RunDir.create(output.out_dir, default).path
