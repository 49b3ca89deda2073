"""A task's world, settled before any rank starts: this process joins an external
launcher's job (torchrun, Slurm, MPI) as one of its ranks, or the host spawns the ranks
here; on which backend, with how many ranks, writing into which run directory (a launched
rank 0 makes it too). :func:`start` runs a task of one world (p2p, health); the sweep's
variants ask :func:`join_or_place` and start the spawned worlds themselves. `colbench env`
shows what this machine offers and what a sweep here would settle.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from colbench.config.model import LaunchConfig, OutputConfig
from colbench.errors import ExitCode, RankFailure, UsageError
from colbench.host import pace, protocol
from colbench.host import watchdog as hang_watchdog
from colbench.host.child import exit_now, rank_main
from colbench.host.job import InFlight, RankJob, RankTask, command_started_at
from colbench.host.launchers import gpus as gpus_module
from colbench.host.launchers import preflight
from colbench.host.launchers.detect import detect, join_or_spawn
from colbench.host.launchers.devices import blocking_wait_note
from colbench.host.launchers.env import (
    LaunchEnv,
    check_address_space,
    check_spawn,
    crowded_note,
    export,
)
from colbench.host.spawn import spawn_and_wait
from colbench.host.supervise import end_meta, guard, record_nccl_log
from colbench.results import rundir
from colbench.results.rundir import RunDir, stamped_name


def resolve_backend(requested: str, gpu_count: int, nccl_available: bool) -> str:
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


def choose_backend(launch: LaunchConfig) -> str:
    """The backend a run uses; --ranks-per-gpu without a GPU is refused first, by name."""
    import torch.distributed as dist

    if launch.backend == "gloo" and launch.ranks_per_gpu == 1:
        return "gloo"  # asked for by name: no GPU to count (CUDA's start-up, on a GPU build)
    gpus = gpus_module.gpu_count()
    if launch.ranks_per_gpu > 1 and gpus == 0:
        raise UsageError(
            f"--ranks-per-gpu {launch.ranks_per_gpu} shares GPUs among NCCL ranks, and no "
            "GPU is visible; without GPUs, --backend gloo runs CPU ranks (--nprocs)"
        )
    return resolve_backend(launch.backend, gpus, dist.is_nccl_available())


def spawned_world_size(launch: LaunchConfig, backend: str) -> int:
    """How many ranks to spawn: --nprocs, else the default, within what the GPUs allow."""
    if backend != "nccl":
        return launch.nprocs or default_nprocs(backend, 0)  # CPU ranks: no GPU bounds them
    gpus, per_gpu = gpus_module.gpu_count(), launch.ranks_per_gpu
    world_size = launch.nprocs or default_nprocs(backend, gpus, per_gpu)
    if world_size > gpus * per_gpu:
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
        notes += gpus_module.check_parent(launch.ranks_per_gpu, backend, gpus_module.visible_gpus())
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


def make_run_dir(output: OutputConfig, label: str, backend: str) -> Path:
    """Create the run directory: --out (new or empty), else a new
    ``<results>/<stamp>-<label>-<backend>``."""
    default = Path(output.results_root) / stamped_name(label, backend)
    return RunDir.create(output.out_dir, default).path


@dataclass(frozen=True)
class Spawning:
    """A world the host is to spawn here: its checks passed, its notes said, its run
    directory made."""

    backend: str
    world_size: int
    run_dir: Path


def start(task: RankTask) -> int:
    """Run ``task``, one world of ranks, to completion; returns the process exit code."""
    world = join_or_place(task)
    if isinstance(world, Spawning):
        return spawn_and_wait(task, world.backend, world.world_size, world.run_dir)
    return world


def join_or_place(task: RankTask) -> Spawning | int:
    """Run ``task`` as a rank of the launcher's job this process is one of, and return its
    exit code; else settle the world to spawn here for it."""
    # A long run outlives its terminal or its log's reader: what it prints must not end it.
    guard()
    launch_env, set_aside = join_or_spawn(task.launch.nprocs)
    backend = choose_backend(task.launch)
    if launch_env is not None:
        return run_launched(task, launch_env, backend)
    world_size = spawned_world_size(task.launch, backend)
    if os.environ.get("GLOO_SOCKET_IFNAME", "").strip():  # else there is nothing to refuse
        preflight.check_socket_ifname()
    notes = [_set_aside(set_aside, world_size)] if set_aside else []
    notes += task.check(world_size, backend) + nccl_notes(task.launch, backend)
    ranks, flag = world_size * task.worlds, f"--nprocs {world_size}"
    # Refused where this host's limits cannot hold the worlds of ranks alive at once.
    check_spawn(ranks, world_size, flag)
    chosen = one_gpu_note(task.launch.backend, backend, world_size)
    notes += [n for n in (check_address_space(flag), crowded_note(ranks), chosen) if n]
    run_dir = make_run_dir(task.output, task.label, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    return Spawning(backend, world_size, run_dir)


def _set_aside(placing: tuple[str, ...], world_size: int) -> str:
    """Unset a launcher's world of one that --nprocs overrides, so that the spawned ranks
    neither read its local world size (their memory share) nor pass it on; the note."""
    for name in (p.split("=", 1)[0] for p in placing):
        os.environ.pop(name, None)
    return (
        f"--nprocs {world_size}: spawning {world_size} ranks here, ignoring (and unsetting) "
        f"the launcher variables of a world of one: {' '.join(placing)}"
    )


def run_launched(task: RankTask, env: LaunchEnv, backend: str) -> int:
    """Join a job an external launcher started: this process is one rank of ``task``."""
    started_at = command_started_at()
    notes = task.check(env.world_size, backend)
    # Every rank checks its own node's GPUs (compute mode); rank 0 says the notes.
    notes += nccl_notes(task.launch, backend)
    preflight.check(env, backend, gpus_module.gpu_count())
    address_space = check_address_space(f"rank {env.rank}")
    notes += [address_space] if address_space else []
    # torch's env:// reads these; Slurm and MPI jobs get them from detect().
    export(env)
    if env.local_world_size is not None:
        # What the GPU pick and the memory budget read (Slurm's count is computed).
        os.environ.setdefault("LOCAL_WORLD_SIZE", str(env.local_world_size))
    run_dir: Path | None = None
    if env.rank == 0:
        run_dir = make_run_dir(task.output, task.label, backend)
        for note in notes:
            print(f"colbench: note: {note}", file=sys.stderr)
    job = RankJob(
        task=task,
        backend=backend,
        world_size=env.world_size,
        launcher=env.launcher,
        run_dir=str(run_dir.resolve()) if run_dir else None,
        run_id=run_dir.name if run_dir else "",
        single_host=env.multi_node is False,
        started_at=started_at,
    )
    # Each rank publishes its progress under its own rank, for the hang verdict.
    in_flight = InFlight(rank=env.rank)
    # Only rank 0 speaks: the others print nothing but their own errors.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rank_main(job, env.rank, env.local_rank, in_flight)
    except UsageError:
        raise
    except KeyboardInterrupt:
        if run_dir is not None:
            end_meta(run_dir, "interrupted", {"error": "interrupted by the user"})
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        raise _failed(task, env, run_dir, in_flight, exc) from None
    if run_dir is None:
        exit_now(int(ExitCode.OK))
    exit_now(_report(task, run_dir, in_flight, started_at))


def _failed(
    task: RankTask, env: LaunchEnv, run_dir: Path | None, in_flight: InFlight, exc: Exception
) -> RankFailure:
    """A launched rank's failure, recorded where this rank keeps the run directory (rank
    0); the error it ends with."""
    hang_watchdog.yield_to_verdict()
    in_flight.failed(exc)
    message = (
        f"rank {env.rank} on {socket.gethostname()} (pid {os.getpid()}) failed during "
        f"{in_flight.describe()}: {type(exc).__name__}: {exc}"
    )
    code = exc.exit_code if isinstance(exc, RankFailure) else None
    if run_dir is not None:
        end_meta(run_dir, "failed", {"failed_rank": env.rank, "error": message})
        if not hang_watchdog.fired():
            # A lost peer's exception does not say which peer: then nobody is named.
            # (A fired watchdog has given its own verdict on the hang.)
            failed = None if protocol.lost_a_peer(message) else env.rank
            failure = protocol.Failure(message, code or int(ExitCode.RANK_FAILURE), failed)
            task.failed(run_dir, failure)
    return RankFailure(message, code)


def _report(task: RankTask, run_dir: Path, in_flight: InFlight, started_at: float) -> int:
    """Rank 0's end of a clean run: the task's report, then the time taken against the
    time stated; the exit code."""
    # The process group is gone: a task's report (a figure, say) holds no peer up.
    record_nccl_log(run_dir)
    code = task.report(run_dir)
    forecast = in_flight.pace.forecast if in_flight.pace is not None else None
    pace.check_overrun(run_dir, forecast, time.time() - started_at)
    return code


def describe() -> str:
    import torch.distributed as dist

    vers = rundir.versions()
    gpus = rundir.gpus()
    backends = [b for b in ("gloo", "nccl", "mpi", "ucc") if getattr(dist, f"is_{b}_available")()]
    try:
        launch = detect()
        launcher = launch_lines(launch) if launch else "none: colbench spawns its own ranks"
    except UsageError as exc:
        launcher = f"misconfigured: {exc}"
        launch = None
    spawning = launch is None
    backend = resolve_backend("auto", len(gpus), dist.is_nccl_available())
    default = f"--backend {backend}" + (
        f" --nprocs {default_nprocs(backend, len(gpus))}" if spawning else ""
    )
    # What a run would be refused for, said here rather than by the run.
    ifname = os.environ.get("GLOO_SOCKET_IFNAME", "")
    refused = (
        "the launcher's environment above"
        if launcher.startswith("misconfigured")
        else ifname and preflight.socket_ifname_problem(ifname, preflight.interfaces())
    )
    lines = [
        f"colbench      {vers['colbench']}",
        f"torch         {vers['torch']}",
        f"cuda          {vers['cuda'] or 'none (CPU build or no driver)'}",
        f"nccl          {vers['nccl'] or 'not available'}",
        f"python        {vers['python']}",
        f"backends      {', '.join(backends) or 'none'}",
        f"gpus          {len(gpus)}"
        + "".join(f"\n  cuda:{i}      {name}" for i, name in enumerate(gpus)),
        f"cpu           {rundir.cpu_model()} ({os.cpu_count()} cores)",
        f"launcher      {launcher}",
        f"default run   refused: {refused}" if refused else f"default run   {default}",
    ]
    env = rundir.allowed_env()
    if env:
        lines.append("environment   " + " ".join(f"{k}={v}" for k, v in env.items()))
    return "\n".join(lines)


def launch_lines(launch: LaunchEnv) -> str:
    """What the launcher says about the job; nodes it does not name are counted at run time."""

    def known(value: object) -> str:
        return "not given (counted when the ranks meet)" if value is None else str(value)

    hosts = launch.hosts
    shown = ", ".join(hosts[:8]) + (f", ... ({len(hosts)} in all)" if len(hosts) > 8 else "")
    return "\n".join(
        [
            launch.launcher,
            f"  rank        {launch.rank} (local rank {launch.local_rank})",
            f"  world size  {launch.world_size}",
            f"  local world {known(launch.local_world_size)}",
            f"  nodes       {known(launch.nnodes)}",
            f"  hosts       {shown or 'not listed by the launcher'}",
            f"  master      {launch.master_addr}:{launch.master_port}",
        ]
    )
