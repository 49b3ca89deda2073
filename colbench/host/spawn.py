"""Starting our own ranks and waiting for them; the parent's verdict when they fail.

The parent owns the rendezvous store on a port the OS picks, so two runs at once
never collide. Rank 0 writes every file; the parent only finalises ``meta.json``
when rank 0 could not.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.config.model import LaunchConfig
from colbench.config.variants import Variant
from colbench.errors import ExitCode, UsageError
from colbench.host import pace, protocol, supervise
from colbench.host.child import spawned_rank
from colbench.host.job import RankJob, RankTask, command_started_at
from colbench.host.launchers.rendezvous import arrived_ranks
from colbench.host.supervise import end_meta, forget_job, kept_line, record_nccl_log
from colbench.output import plural
from colbench.results.rundir import RunDir

#: Spawned ranks connect to the parent's store here; single-node runs stay on loopback.
LOCAL_HOST = "127.0.0.1"


def loopback_interface() -> str:
    """Name of the loopback interface (lo on Linux, lo0 on macOS)."""
    try:
        return next((n for _, n in socket.if_nameindex() if n.startswith("lo")), "lo")
    except OSError:
        return "lo"


def rank_environment(launch_cfg: LaunchConfig, backend: str, run_dir: Path) -> dict[str, str]:
    """Variables every spawned rank sets before its process group exists."""
    env: dict[str, str] = {}
    if "GLOO_SOCKET_IFNAME" not in os.environ:
        # A single-node run must not listen on the machine's public interfaces.
        env["GLOO_SOCKET_IFNAME"] = loopback_interface()
    if launch_cfg.debug and backend == "nccl":
        # torch's NCCL flight recorder: keep the last collectives and dump them when a
        # collective times out, one file per rank in the run directory.
        env.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
        env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
        env.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(run_dir / "nccl_trace_rank_"))
    return env


def start_method(backend: str) -> str:
    """How ranks are started: forked on CPU (a forked rank inherits the parent's imported
    torch: ready in milliseconds, not seconds), spawned with CUDA (unusable in a forked
    child) and wherever fork is not the platform's safe default."""
    return "fork" if backend == "gloo" and sys.platform.startswith("linux") else "spawn"


def listen_loopback() -> socket.socket:
    """A listening socket on 127.0.0.1 for the store: TCPStore alone binds every interface."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOCAL_HOST, 0))
    sock.listen(1024)
    return sock


def spawn_and_wait(
    task: RankTask,
    backend: str,
    world_size: int,
    run_dir: Path,
    variant: Variant | None = None,
) -> int:
    """Start the task's ranks, wait for them, report."""
    with supervise.StopSignals() as stop:
        world = fork_world(task, backend, world_size, run_dir, variant)
        world.serve()
        exit_codes = supervise.wait_for_ranks(
            world.processes, stop, world.watch, world.progress_lines()
        )
        if stop.received is not None:
            supervise.stop_processes(world.processes)
            return _report_interrupted(run_dir, stop)
    return finish_world(world, exit_codes)


@dataclass
class World:
    """One world of ranks started by the parent, and what it needs to judge their end."""

    job: RankJob
    context: Any
    listener: socket.socket
    started: float
    #: The run directory as the user named it (messages show it so).
    run_dir: Path
    #: The world's rendezvous store and start-up deadline, once :meth:`serve` ran.
    store: Any = None
    watch: supervise.StartupWatch | None = None

    @property
    def processes(self) -> list[Any]:
        return list(self.context.processes)

    def serve(self, show_joins: bool = True) -> None:
        """Serve the store the ranks meet at (they queue on the listener until then);
        ``show_joins``: count the ranks joining while the start-up is slow."""
        try:
            self.store = _serve_store(self.listener, self.job.world_size, self.job.launch.timeout_s)
        except BaseException:
            supervise.stop_processes(self.processes)
            raise
        store, world_size, progress = self.store, self.job.world_size, self.job.output.progress
        # The ranks joined, counted while the start-up is slow: redrawn on a terminal (as
        # the progress bar is; --progress: always), a line now and then in a log.
        counting = show_joins and progress is not False
        terminal = sys.stderr.isatty() if progress is None else True
        self.watch = supervise.StartupWatch(
            deadline=self.started + self.job.launch.init_timeout_s + supervise.STARTUP_GRACE_S,
            arrived=lambda: arrived_ranks(store, world_size),
            world_size=world_size,
            counter=supervise.JoinCounter(terminal) if counting else None,
        )

    def progress_lines(self) -> Callable[[], None] | None:
        """What draws this world's progress lines from its store (colbench.host.pace), to
        call as the parent waits; None where none are wanted."""
        job = self.job
        if self.store is None or not pace.lines_wanted(job.output.progress, job.task.live_bar):
            return None
        return pace.ProgressLines(pace.store_source(self.store), job.started_at).tick


def fork_world(
    task: RankTask,
    backend: str,
    world_size: int,
    run_dir: Path,
    variant: Variant | None = None,
    **fields: Any,
) -> World:
    """Start one world's ranks, not yet its store (:meth:`World.serve`): several worlds
    are all started before any store thread exists (see :func:`_start_ranks`).
    ``fields`` replace the job's (turns, results_dir, run_id)."""
    listener = listen_loopback()
    job = RankJob(
        task=task,
        backend=backend,
        world_size=world_size,
        launcher="colbench-spawn",
        run_dir=str(run_dir.resolve()),
        run_id=run_dir.name,
        store_host=LOCAL_HOST,
        store_port=int(listener.getsockname()[1]),
        env=rank_environment(task.launch, backend, run_dir),
        variant=variant.name if variant else "",
        variant_keys=variant.keys if variant else (),
        started_at=command_started_at(),
    )
    job = dataclasses.replace(job, **fields)
    started = time.monotonic()
    context = _start_ranks(job, variant.python if variant else None)
    return World(job, context, listener, started, run_dir)


def finish_world(world: World, exit_codes: dict[int, int | None] | None) -> int:
    """Report a world's end: done (``exit_codes`` None) or the diagnosed failure."""
    run_dir, task = world.run_dir, world.job.task
    forget_job(run_dir)
    # A start-up that failed at 1000 ranks left 1000 empty logs: only those that say
    # something stay.
    RunDir(run_dir).tidy_logs()
    if exit_codes is None:
        record_nccl_log(run_dir)
        world.listener.close()
        code = task.report(run_dir)
        forecast = pace.read_forecast(world.store)
        pace.check_overrun(run_dir, forecast, time.time() - world.job.started_at)
        return code
    failure = diagnose_world(world, exit_codes)
    code = _report_failure(run_dir, failure)
    task.failed(run_dir, failure)
    return code


def diagnose_world(world: World, exit_codes: dict[int, int | None]) -> protocol.Failure:
    """What went wrong in a world whose ranks did not all exit 0."""
    launch_cfg = world.job.launch
    pids = dict(enumerate(world.context.pids()))
    failure = protocol.diagnose(
        exit_codes,
        protocol.read_reports(
            world.run_dir, protocol.store_reports(world.store, world.job.world_size)
        ),
        protocol.read_progress(world.store, world.job.world_size),
        socket.gethostname(),
        pids,
        launch_cfg.timeout_s,
    )
    if world.watch is not None:
        failure = world.watch.verdict(
            failure, pids, launch_cfg.init_timeout_s, time.monotonic() - world.started
        )
    world.listener.close()
    return failure


def _start_ranks(job: RankJob, python: str | None = None) -> Any:
    """Start the ranks (before the store they meet at); returns their context.

    ``python``: run the ranks in this interpreter (a ``--python`` variant) instead of
    forking or spawning this one.
    """
    import torch.multiprocessing as mp

    # Ranks first, store second: the store serves from a thread of its own, and a rank
    # forked while that thread holds a lock (the allocator's, stdio's, the loader's,
    # torch's) inherits the lock held and waits on it for ever. Their connections
    # queue on the listening socket until the store takes it over.
    if python is not None:
        from colbench.host.interpreter import start_in_interpreter

        return start_in_interpreter(python, job)
    return mp.start_processes(
        spawned_rank,
        args=(job,),
        nprocs=job.world_size,
        join=False,
        start_method=start_method(job.backend),
    )


def _report_interrupted(run_dir: Path, stop: supervise.StopSignals) -> int:
    files = RunDir(run_dir)
    files.tidy_logs()
    name = protocol.signal_name(stop.received or signal.SIGINT)
    end_meta(
        run_dir, "interrupted", {"error": f"interrupted by {name}", "exit_code": stop.exit_code}
    )
    rows = plural(files.rows_kept(), "row")
    print(f"colbench: interrupted by {name}; {rows} kept in {run_dir}", file=sys.stderr)
    return stop.exit_code


def _report_failure(run_dir: Path, failure: protocol.Failure) -> int:
    if failure.exit_code == ExitCode.USAGE:
        end_meta(run_dir, "refused", failure.meta())
        raise UsageError(failure.message)
    end_meta(run_dir, "failed", failure.meta())
    print(f"colbench: {failure.message}", file=sys.stderr)
    print(f"colbench: {kept_line(run_dir)}; rank logs: rank*.log there", file=sys.stderr)
    return failure.exit_code


def _serve_store(listener: socket.socket, world_size: int, timeout_s: float) -> Any:
    """The parent's TCPStore, serving on ``listener`` (connections already queued there)."""
    import torch.distributed as dist

    store = dist.TCPStore(
        LOCAL_HOST,
        int(listener.getsockname()[1]),
        world_size,
        is_master=True,
        timeout=_dt.timedelta(seconds=timeout_s),
        wait_for_workers=False,
        master_listen_fd=listener.fileno(),
    )
    hand_over(listener)
    return store


def hand_over(listener: socket.socket) -> None:
    """Leave a listening socket to the store now serving on it: its server thread closes
    the descriptor when the store goes, and a second close from Python would land on
    whatever reused the number in between (a font file matplotlib holds, a subprocess's
    error pipe). After this, ``listener.close()`` closes nothing."""
    listener.detach()
