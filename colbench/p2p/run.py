"""Running ``colbench p2p``: the same start-up as a sweep (colbench.run), another task."""

from __future__ import annotations

from colbench.analysis.links import MIN_RANKS
from colbench.errors import UsageError
from colbench.p2p.config import P2PConfig
from colbench.p2p.task import P2PTask


def run_p2p(cfg: P2PConfig) -> int:
    """Measure the matrix in spawned or launched ranks; returns the process exit code."""
    import torch.distributed as dist

    from colbench.launch import detect
    from colbench.run.launched import run_launched
    from colbench.run.prepare import _gpu_count, default_nprocs, make_run_dir, resolve_backend
    from colbench.run.spawn import spawn_and_wait

    launch_env = detect()
    spawning = launch_env is None
    backend = resolve_backend(cfg.backend, spawning, _gpu_count(), dist.is_nccl_available())
    run_cfg = cfg.run_config()
    task = P2PTask(cfg)
    world_size = (
        launch_env.world_size if launch_env else cfg.nprocs or default_nprocs(backend, _gpu_count())
    )
    if world_size < 2:
        raise UsageError(
            f"p2p measures pairs of ranks: it needs at least 2, this job has {world_size}"
        )
    if cfg.fail_below_pct is not None and world_size < MIN_RANKS:
        raise UsageError(
            f"--fail-below needs at least {MIN_RANKS} ranks to tell a slow link from the others; "
            f"this job has {world_size}"
        )
    if launch_env is not None:
        return run_launched(run_cfg, launch_env, backend, task)
    if backend == "nccl" and world_size > _gpu_count():
        raise UsageError(
            f"--nprocs {world_size} but only {_gpu_count()} GPU(s): NCCL needs one GPU per "
            f"rank; --backend gloo runs {world_size} ranks on the CPU"
        )
    run_dir = make_run_dir(run_cfg, backend)
    return spawn_and_wait(run_cfg, backend, world_size, run_dir, task=task)
