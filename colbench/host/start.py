"""Starting any task: where its ranks come from, on which backend, how many, where it writes.

One path for the sweep, p2p and the tasks to come: join an external launcher's job, or
spawn the ranks here. A task that runs more than one world (the sweep's variants) passes
its own way of running them once the host has chosen.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from colbench.host.job import RankTask
from colbench.host.launched import run_launched
from colbench.host.launchers import join_or_spawn, preflight
from colbench.host.prepare import (
    choose_backend,
    make_run_dir,
    nccl_notes,
    one_gpu_note,
    spawn_notes,
    spawned_world_size,
)
from colbench.host.spawn import spawn_and_wait
from colbench.host.streams import guard

#: Runs a task's spawned ranks once the host chose (task, backend, world size, run dir);
#: returns the exit code.
Spawner = Callable[[RankTask, str, int, Path], int]


def start(task: RankTask, spawner: Spawner | None = None) -> int:
    """Run ``task`` to completion; returns the process exit code."""
    # A long run outlives its terminal or its log's reader: what it prints must not end it.
    guard()
    launch_env, set_aside = join_or_spawn(task.launch.nprocs)
    backend = choose_backend(task.launch, spawning=launch_env is None)
    if launch_env is not None:
        return run_launched(task, launch_env, backend)
    world_size = spawned_world_size(task.launch, backend)
    preflight.check_socket_ifname()
    notes = [_set_aside(set_aside, world_size)] if set_aside else []
    notes += task.check(world_size, backend) + nccl_notes(task.launch, backend)
    notes += spawn_notes(world_size, task.worlds)
    chosen = one_gpu_note(task.launch.backend, backend, world_size)
    notes += [chosen] if chosen else []
    run_dir = make_run_dir(task.output, task.label, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    if spawner is None:
        return spawn_and_wait(task, backend, world_size, run_dir)
    return spawner(task, backend, world_size, run_dir)


def _set_aside(placing: tuple[str, ...], world_size: int) -> str:
    """Unset a launcher's world of one that --nprocs overrides, so that the spawned ranks
    neither read its local world size (their memory share) nor pass it on; the note."""
    for name in (p.split("=", 1)[0] for p in placing):
        os.environ.pop(name, None)
    return (
        f"--nprocs {world_size}: spawning {world_size} ranks here, ignoring (and unsetting) "
        f"the launcher variables of a world of one: {' '.join(placing)}"
    )
