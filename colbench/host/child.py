"""A rank's life in its own process, whatever its task: spawned by colbench's parent (forked,
or in another interpreter) or launched by torchrun, mpirun or srun, it finds its device,
joins the world (the process group, the hang watchdog armed; on NCCL,
colbench.host.launchers.devices.prepare_nccl first), runs its task, and leaves with an exit
code.

Apart from :mod:`colbench.host.spawn` (the parent's side), so that both the parent and
:mod:`colbench.host.interpreter` import it and neither imports the other.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as _dt
import logging
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol, TextIO, TypeVar

from colbench.errors import ExitCode, UsageError
from colbench.host import protocol
from colbench.host import watchdog as hang_watchdog
from colbench.host.job import Fault, InFlight, RankJob
from colbench.host.launchers import devices, gpus
from colbench.host.launchers.env import declared_local_world_size, local_world_size_from_env
from colbench.host.launchers.rendezvous import rendezvous
from colbench.host.pace import KEY, Pace, ProgressLines, in_thread, lines_wanted, say
from colbench.host.supervise import end_meta, guard, kept_line
from colbench.results.rundir import RANK_LOG, RunDir


def spawned_rank(local_rank: int, job: RankJob) -> None:
    die_with_parent()
    # Testing aid, COLBENCH_FAULT=RANK:start:hang: RANK stops here for good, like a rank
    # stuck before its first line; it still has the parent's SIGTERM handler, so only
    # SIGKILL ends it, as it would a rank stuck on a lock.
    if os.environ.get("COLBENCH_FAULT", "").split(":") == [str(local_rank), "start", "hang"]:
        while True:
            time.sleep(3600)
    # The parent decides what an interrupt means; ranks just get terminated. A hang-up
    # or Ctrl-\ reaches the whole process group too: ranks that died of it would read as
    # failed ranks, not an interrupted run.
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)
    # A forked rank inherits the parent's SIGTERM handler; the parent's terminate()
    # must end it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.update(job.env)
    if job.run_dir is not None:
        log = Path(job.run_dir) / RANK_LOG.format(local_rank)
        _divert_stderr(log, keep_python=local_rank == 0)
    guard()
    in_flight = InFlight(rank=local_rank)
    try:
        rank_main(job, local_rank, local_rank, in_flight)
    except BaseException as exc:
        hang_watchdog.yield_to_verdict()
        _record_failure(job, local_rank, in_flight, exc)
        # Exit without torch's traceback print: the parent reports one line.
        os._exit(int(ExitCode.RANK_FAILURE))
    exit_now(int(ExitCode.OK))


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so a
    killed coordinator never leaves ranks behind."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    # The parent may have died before prctl took effect.
    if os.getppid() == 1:
        os._exit(int(ExitCode.RANK_FAILURE))


def _divert_stderr(log_path: Path, keep_python: bool) -> None:
    """Send the C++ layers' stderr (gloo and NCCL warnings) to the rank's log file.

    Rank 0 keeps Python's own stderr on the terminal for notes and the progress bar;
    the other ranks print nothing but through the parent.
    """
    terminal = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    if keep_python:
        sys.stderr = os.fdopen(terminal, "w", buffering=1)
        _library_warnings_to(os.fdopen(os.dup(2), "w", buffering=1))
    else:
        os.close(terminal)
        sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)


def _library_warnings_to(log: TextIO) -> None:
    """Send rank 0's Python warnings and unhandled library log records to its log file:
    both would print on ``sys.stderr``, which rank 0 keeps on the terminal for colbench's
    own notes (torch turns its C++ ``TORCH_WARN`` into Python warnings, and ``logging``
    records with no handler fall to ``logging.lastResort``)."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show
    last_resort = logging.StreamHandler(log)
    last_resort.setLevel(logging.WARNING)
    logging.lastResort = last_resort


def _record_failure(job: RankJob, rank: int, in_flight: InFlight, exc: BaseException) -> None:
    # Stamped (if rank_main did not already): the hang watchdog leaves this rank alone now.
    in_flight.failed(exc)
    text = str(exc).strip()
    error = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    kind = protocol.classify(exc)
    if kind in (protocol.KIND_USAGE, protocol.KIND_WRITE):
        error = text
    doing = in_flight.failed_during or in_flight.describe()
    report = protocol.make_report(rank, doing, kind, error, in_flight.failed_at or time.time())
    # The store first: on a full disk the report's file is lost, and the parent would
    # blame the rank for whatever it was doing.
    protocol.publish_report(in_flight.store, report)
    if job.run_dir is None:
        print(
            f"colbench: rank {rank} on {report['host']} (pid {report['pid']}) failed during "
            f"{report['doing']}: {report['error']}",
            file=sys.stderr,
        )
        return
    run_dir = RunDir(job.run_dir)
    with contextlib.suppress(OSError):
        with open(run_dir.rank_log(rank), "a", encoding="utf-8") as log:
            log.write(traceback.format_exc())
        protocol.write_report(run_dir.path, report)


class _Gathers(Protocol):
    """The side group's one collective :func:`meet_peers` needs (colbench.bench.groups'
    ``SideGroup`` is one): the host knows tasks, not the sweep that makes one."""

    def gather_objects(self, mine: Any) -> list[Any]: ...


class _Introduction(Protocol):
    @property
    def digest(self) -> object: ...
    @property
    def rank(self) -> int: ...


PeerT = TypeVar("PeerT", bound=_Introduction)


def rank_main(job: RankJob, rank: int, local_rank: int, in_flight: InFlight) -> None:
    """One rank's whole life: join the group, run its task, leave."""
    import torch.distributed as dist

    device = _device_for(job, local_rank)
    in_flight.phase = "rendezvous"
    in_flight.store = init_process_group(job, rank, device, in_flight)
    stop_lines = keep_pace(job, rank, in_flight)
    try:
        in_flight.step("setup")
        job.task.run_rank(job, rank, device, in_flight)
    except BaseException as exc:
        # Stamp the failure now: tearing down would close connections and make the
        # peers fail too, and the first failure must stay recognisable as the first.
        in_flight.failed(exc)
        raise
    finally:
        stop_lines()
    # Only a clean run tears down: after a failure the process exits at once, and a
    # teardown could block on peers that are gone.
    in_flight.phase = "shutdown"
    dist.destroy_process_group()


def keep_pace(job: RankJob, rank: int, in_flight: InFlight) -> Callable[[], None]:
    """Rank 0's forecast (``in_flight.pace``, colbench.host.pace), published for a spawning
    parent's progress lines; a launched rank 0 prints them itself, from a thread. Returns
    what stops that thread."""
    if rank != 0:
        return lambda: None
    started_at = job.started_at or time.time()
    store = in_flight.store
    spawned = job.store_host is not None and store is not None

    def publish(text: str) -> None:
        # Failing, the parent's lines go without numbers; the run goes on.
        with contextlib.suppress(RuntimeError, OSError):
            store.set(KEY, text)

    in_flight.pace = pace = Pace(started_at, say=say, publish=publish if spawned else None)
    if spawned or not lines_wanted(job.output.progress, job.task.live_bar):
        return lambda: None

    def source() -> tuple[Any, str]:
        return pace.forecast, in_flight.describe() if in_flight.seq else ""

    return in_thread(ProgressLines(source, started_at))


def gpu_record(device: Any, ranks_per_gpu: int) -> dict[str, Any]:
    """This rank's GPU for meta.json: index and bus id, and under --ranks-per-gpu the
    emulated node's NCCL variables as this rank saw them (they differ per rank)."""
    if device.type != "cuda":
        return {}
    record: dict[str, Any] = {"index": device.index, "bus_id": devices.gpu_bus_id(device)}
    if ranks_per_gpu > 1:
        record["nccl_env"] = {name: os.environ.get(name) for name in gpus.VARIABLES}
    return record


def exit_now(code: int) -> NoReturn:
    """End a rank that has finished cleanly, skipping the interpreter's teardown: everything
    is on disk and the process group is gone by now, but torch's C++ teardown at exit
    sometimes aborts a clean rank ("terminate called without an active exception"), and a
    SIGABRT would turn a complete run into a failed one."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def meet_peers(side: _Gathers, me: PeerT, disagreement: str) -> list[PeerT]:
    """Gather every rank's introduction (a :class:`Peer`, or another task's with a ``digest``
    and a ``rank``); stop with ``disagreement`` (naming the ``{ranks}``) if their digests
    differ from rank 0's: the first collective after the side group exists, so ranks started
    with different plans are told so before any waits in a collective the others never call.
    """
    peers: list[PeerT] = side.gather_objects(me)
    differing = [p.rank for p in peers if p.digest != peers[0].digest]
    if differing:
        raise UsageError(disagreement.format(ranks=", ".join(map(str, differing))))
    return peers


def _device_for(job: RankJob, local_rank: int) -> Any:
    import torch

    if job.backend == "nccl":
        # The launcher's own count, not ``local_world_size``: that falls back to the world
        # size, which on several nodes over-counts the ranks sharing this node's GPUs.
        # Spawned ranks have none: local rank = rank, one GPU each (run_sweep checked).
        index = devices.pick_cuda_index(
            local_rank, declared_local_world_size(), gpus.gpu_count(), job.launch.ranks_per_gpu
        )
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        return device
    share_cpu_threads(local_world_size_from_env(job.world_size))
    return torch.device("cpu")


def share_cpu_threads(local_world_size: int) -> None:
    """Give each CPU rank its share of the host's cores for torch's intra-op threads (an
    OMP_NUM_THREADS set wins): with more threads than cores, every parallel region (data
    fill, verification) waits for a descheduled thread, and idle OpenMP threads spin after
    each region, stealing the core a collective is timed on."""
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world_size)))


def init_process_group(
    job: RankJob, rank: int, device: Any, in_flight: InFlight | None = None
) -> Any:
    """Join the process group; returns the rendezvous store (for progress). With
    ``in_flight``, the hang watchdog is armed as the communicator starts (--init-timeout
    for the start-up itself, which torch leaves unbounded on NCCL; --timeout after it)."""
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=hang_watchdog.process_group_timeout_s(job.launch.timeout_s))
    kwargs: dict[str, Any] = {"rank": rank, "world_size": job.world_size, "timeout": timeout}
    # A direct-NCCL world (--engine nccl) makes its own communicator through nccl4py
    # (colbench.direct); torch's group is then gloo and creates no NCCL communicator.
    torch_backend = "gloo" if getattr(job.task, "direct_nccl", False) else job.backend
    if torch_backend == "nccl":
        # Eager NCCL init: the communicator exists (and fails) here, not on the first call.
        kwargs["device_id"] = device
    # store_host None: env:// (an external launcher's MASTER_ADDR, or torchrun's store).
    store = rendezvous(
        job.store_host,
        job.store_port,
        rank,
        job.world_size,
        job.launch.init_timeout_s,
        job.launch.timeout_s,
    )
    if in_flight is not None:
        in_flight.store = store
        in_flight.step(hang_watchdog.COMM_STARTUP)
        _arm_watchdog(job, in_flight)
        Fault(rank, os.environ.get("COLBENCH_FAULT")).at_init()
    if job.backend == "nccl":
        log = _nccl_log_path(job, rank, store)
        per_gpu, world_size = job.launch.ranks_per_gpu, job.world_size
        devices.prepare_nccl(rank, world_size, device, store, log, per_gpu, job.single_host)
    dist.init_process_group(torch_backend, store=store, **kwargs)
    return store


_RUN_DIR_KEY = "colbench/run-dir"


def _nccl_log_path(job: RankJob, rank: int, store: Any) -> Path:
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


def _arm_watchdog(job: RankJob, in_flight: InFlight) -> hang_watchdog.Watchdog:
    """Start the rank's hang watchdog (see :mod:`colbench.host.watchdog`)."""
    import torch.distributed as dist

    run_dir = Path(job.run_dir) if job.run_dir is not None else None
    launched = job.store_host is None
    connect = None
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if launched and host and port.isdigit():
        # A client of its own: the rank's store client may be held by the blocked call.
        def connect() -> Any:
            return dist.TCPStore(
                host,
                int(port),
                is_master=False,
                timeout=_dt.timedelta(seconds=hang_watchdog.EXCHANGE_S),
                wait_for_workers=False,
            )

    def on_verdict(failure: protocol.Failure) -> None:
        if run_dir is not None:
            end_meta(run_dir, "failed", failure.meta())
            print(f"colbench: {kept_line(run_dir)}", file=sys.stderr)
            job.task.failed(run_dir, failure)

    return hang_watchdog.Watchdog(
        in_flight,
        world_size=job.world_size,
        timeout_s=job.launch.timeout_s,
        init_timeout_s=job.launch.init_timeout_s,
        run_dir=run_dir,
        launched=launched,
        connect=connect,
        on_verdict=on_verdict,
    ).start()
