"""Joining a job an external launcher (torchrun, Slurm, MPI) started: this process is one rank."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

from colbench.errors import ExitCode, RankFailure, UsageError
from colbench.host import launchers as launch
from colbench.host import protocol, ticker
from colbench.host import watchdog as hang_watchdog
from colbench.host.child import exit_now, rank_main
from colbench.host.inflight import InFlight
from colbench.host.job import RankJob, RankTask
from colbench.host.launchers import LaunchEnv, gpus, limits, preflight
from colbench.host.outcome import end_meta, record_nccl_log
from colbench.host.pace import command_started_at
from colbench.host.prepare import make_run_dir, nccl_notes


def run_launched(task: RankTask, env: LaunchEnv, backend: str) -> int:
    """Join a job an external launcher started: this process is one rank of ``task``."""
    started_at = command_started_at()
    notes = task.check(env.world_size, backend)
    # Every rank checks its own node's GPUs (compute mode); rank 0 says the notes.
    notes += nccl_notes(task.launch, backend)
    preflight.check(env, backend, gpus.gpu_count())
    address_space = limits.check_address_space(f"rank {env.rank}")
    notes += [address_space] if address_space else []
    # torch's env:// reads these; Slurm and MPI jobs get them from detect().
    launch.export(env)
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
        raise RankFailure(message, code) from None
    if run_dir is None:
        exit_now(int(ExitCode.OK))
    exit_now(_report(task, run_dir, in_flight, started_at))


def _report(task: RankTask, run_dir: Path, in_flight: InFlight, started_at: float) -> int:
    """Rank 0's end of a clean run: the task's report, then the time taken against the
    time stated; the exit code."""
    # The process group is gone: a task's report (a figure, say) holds no peer up.
    record_nccl_log(run_dir)
    code = task.report(run_dir)
    forecast = in_flight.pace.forecast if in_flight.pace is not None else None
    ticker.check_overrun(run_dir, forecast, time.time() - started_at)
    return code
