"""What the parent decides before any rank starts: backend, world size, run directory.

Spawned and launched runs share these: a launched rank 0 makes the run directory too.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from colbench.config import SweepConfig, validate_for_world
from colbench.errors import UsageError
from colbench.ops import REGISTRY
from colbench.plan import count_units, plan


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


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


def default_nprocs(backend: str, gpu_count: int) -> int:
    """Ranks to spawn: one per GPU on NCCL (a single GPU gives a world of one), else 2."""
    return max(1, gpu_count) if backend == "nccl" else 2


def one_gpu_note(requested: str, backend: str, world_size: int) -> str | None:
    """Say so when ``auto`` chose a world of one: its bus bandwidths are mostly 0."""
    if requested != "auto" or backend != "nccl" or world_size != 1:
        return None
    return (
        "one GPU: measuring NCCL with 1 rank, as nccl-tests -g 1 does (bus bandwidth is 0 "
        "for collectives that move data between ranks); --backend gloo runs 2 CPU ranks"
    )


def run_label(cfg: SweepConfig) -> str:
    if set(cfg.ops) == {op.name for op in REGISTRY}:
        return "all"
    label = "-".join(cfg.ops)
    return label if len(label) <= 48 else label[:45] + "etc"


def make_run_dir(cfg: SweepConfig, backend: str) -> Path:
    """Create the run directory (empty); a non-empty existing one is refused."""
    if cfg.out_dir is not None:
        run_dir = Path(cfg.out_dir)
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
            raise UsageError(
                f"run directory {run_dir} already exists and is not empty; pick another --out"
            )
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create run directory {run_dir}: {exc.strerror}") from None
        if not os.access(run_dir, os.W_OK):
            raise UsageError(f"run directory {run_dir} is not writable")
        return run_dir
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(cfg.results_root) / f"{stamp}-{run_label(cfg)}-{backend}"
    for attempt in range(1, 1000):
        run_dir = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(
                f"cannot create run directory under {cfg.results_root}: {exc.strerror}"
            ) from None
    raise UsageError(f"could not find a free run directory name next to {base}")


def checked_notes(cfg: SweepConfig, world_size: int, backend: str) -> list[str]:
    """Validation that needs the world size; refuses a sweep that would measure nothing."""
    notes = validate_for_world(cfg, world_size, backend)
    n = cfg.group_size or world_size
    if count_units(plan(cfg, n, backend)) == 0:
        raise UsageError(
            f"nothing to run: at {n} ranks every size leaves less than one 16-byte "
            "chunk per rank; use larger sizes"
        )
    return notes
