"""``colbench p2p`` as a plain function: the same start-up as a sweep (colbench.run), another
task."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from colbench.analysis.links import MIN_RANKS
from colbench.errors import UsageError
from colbench.p2p.config import P2PConfig, from_options
from colbench.p2p.task import P2PTask


def run(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> int:
    """Check the options (``values``: every row of colbench.p2p.options.table()), measure the
    matrix in spawned or launched ranks, report; the exit code."""
    return run_p2p(from_options(values, command_line))


def run_p2p(cfg: P2PConfig) -> int:
    """Measure the matrix in spawned or launched ranks; returns the process exit code."""

    from colbench.launch import detect
    from colbench.run.launched import run_launched
    from colbench.run.prepare import (
        choose_backend,
        make_run_dir,
        nccl_notes,
        spawn_notes,
        spawned_world_size,
    )
    from colbench.run.spawn import spawn_and_wait

    launch_env = detect()
    spawning = launch_env is None
    run_cfg = cfg.run_config()
    backend = choose_backend(run_cfg.launch, spawning)
    task = P2PTask(cfg)
    world_size = (
        launch_env.world_size if launch_env else spawned_world_size(run_cfg.launch, backend)
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
    notes = nccl_notes(run_cfg.launch, backend) + spawn_notes(world_size)
    run_dir = make_run_dir(run_cfg, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    return spawn_and_wait(run_cfg, backend, world_size, run_dir, task=task)
