"""The child side of a spawned world: one rank's life in its own process, from the moment
the parent starts it (forked, or in another interpreter) to its exit code.

Apart from :mod:`colbench.host.spawn` (the parent's side), so that both the parent and
:mod:`colbench.host.interpreter` import it and neither imports the other.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import TextIO

from colbench.errors import ExitCode
from colbench.host import protocol, supervise
from colbench.host import watchdog as hang_watchdog
from colbench.host.inflight import InFlight
from colbench.host.job import RankJob
from colbench.host.rank import exit_now, rank_main
from colbench.host.streams import guard
from colbench.results.rundir import RunDir


def spawned_rank(local_rank: int, job: RankJob) -> None:
    supervise.die_with_parent()
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
        log = RunDir(job.run_dir).rank_log(local_rank)
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
    """Send rank 0's Python warnings and unhandled library log records to its log file.

    Both would otherwise print on ``sys.stderr``, which rank 0 keeps on the terminal: torch
    turns its C++ ``TORCH_WARN`` into Python warnings when called from Python, and its
    ``logging`` records with no handler fall to ``logging.lastResort``. colbench's own notes
    are plain prints to ``sys.stderr`` and stay on the terminal.
    """

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
    report = protocol.make_report(
        rank,
        in_flight.failed_during or in_flight.describe(),
        kind,
        error,
        in_flight.failed_at or time.time(),
    )
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
