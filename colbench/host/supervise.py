"""Keeping a run going and ending it: spawned ranks watched (fail fast, stop cleanly on
signals, bound the start-up), output that never stops it, and how it ends, in meta.json and
on the terminal (rows kept, done, failed).

The parent waits on its ranks' processes; when one fails, the others get a moment to
fail on their own (and write their reports, :mod:`colbench.host.protocol`) before they
are killed, so the verdict names the first failure, not its echoes.

A run's results are its files; what it prints is a view of them. A run started as
``colbench p2p 2>&- &``, piped into ``head``, or whose log pipe broke would otherwise die on
its next line (Python raises BrokenPipeError; a closed stderr is None). So the parent and
every rank write through :class:`Tolerant`, which drops what can no longer be written, and
a closed descriptor 1 or 2 is reopened on /dev/null first (else the next file opened would
take its number and receive gloo's warnings).
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

from colbench.errors import ExitCode, WriteFailed
from colbench.host.launchers.gpus import FABRIC_EMULATED
from colbench.host.protocol import Failure, startup_failure
from colbench.output import plural
from colbench.results.rows import SCHEMA_VERSION
from colbench.results.rundir import RunDir

#: After the first rank fails, how long the others get to fail on their own (they see a
#: closed connection and write their reports) before they are killed.
GRACE_S = 2.0
POLL_S = 0.1
#: How long after --init-timeout (counted from the start of the ranks) the parent stops a
#: start-up itself; the arrived ranks' own rendezvous timeout usually ends it first.
STARTUP_GRACE_S = 3.0


#: The signals that stop a run as SIGTERM does (rows kept, meta.json ``interrupted``,
#: exit 128 + n): SIGHUP when the terminal or the ssh session goes away, SIGQUIT from
#: Ctrl-\, SIGINT from Ctrl-C (unhandled, they would leave meta.json ``running``).
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Ignored when colbench started, these stay ignored: a background job of a script
#: (SIGINT) or a run under nohup (SIGHUP) asked not to be stopped by them.
IGNORED_STAYS = (signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """Turn the stopping signals (:data:`STOPPING`) into a flag the wait loop polls.

    A shell script starts its background jobs (``colbench sweep ... &``) with SIGINT
    ignored: Ctrl-C at its terminal is for its foreground, and such a run stops with SIGTERM,
    its rows kept (one sent before this handler exists would be ignored anyway).
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in STOPPING:
            if signum in IGNORED_STAYS and signal.getsignal(signum) is signal.SIG_IGN:
                continue
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or signal.SIGINT)


def stop_processes(processes: Sequence[Any], grace_s: float = 3.0) -> None:
    """SIGTERM every live process, then SIGKILL what is left after ``grace_s``."""
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in processes:
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)


class JoinCounter:
    """``ranks joined 37/1000`` while a start-up is slow: redrawn in place on a terminal,
    a line every :data:`LOG_EVERY_S` elsewhere (a job's log); nothing for a quick one."""

    #: A start-up quicker than this shows nothing.
    QUIET_S = 1.0
    LOG_EVERY_S = 10.0

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.started = time.monotonic()
        self.finished = False
        self._next = self.started + (self.QUIET_S if terminal else self.LOG_EVERY_S)
        self._drawn = False

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def show(self, joined: int, world_size: int) -> None:
        now = time.monotonic()
        text = f"colbench: ranks joined {joined}/{world_size} ({now - self.started:.0f} s)"
        if self.terminal:
            sys.stderr.write(f"\r{text}\033[K")
            self._drawn = True
            self._next = now + 0.5
        else:
            sys.stderr.write(text + "\n")
            self._next = now + self.LOG_EVERY_S
        sys.stderr.flush()

    def finish(self) -> None:
        """Every rank joined (or the start-up ended): clear the redrawn line."""
        if self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        self.finished = True


@dataclass
class StartupWatch:
    """The parent's own deadline for every rank to check in at the rendezvous: a rank that
    never gets there (stuck before its first line of colbench) reports nothing, nor do
    arrived ranks stuck too; the parent, which owns the store, sees who checked in and stops
    the start-up at ``deadline`` (time.monotonic())."""

    deadline: float
    #: Ranks checked in so far; raises RuntimeError or OSError when the store is gone.
    arrived: Callable[[], Sequence[int]]
    world_size: int
    #: Set once the deadline passed with these ranks missing.
    missing: list[int] = field(default_factory=list)
    done: bool = False
    #: Shows how many ranks have joined so far (:class:`JoinCounter`); None: nothing.
    counter: JoinCounter | None = None

    def show_progress(self) -> None:
        """Count the ranks joined so far on the counter, until every rank has."""
        if self.counter is None or self.counter.finished or not self.counter.due():
            return
        try:
            joined = len(self.arrived())
        except (RuntimeError, OSError):
            return
        if joined >= self.world_size:
            self.counter.finish()
        else:
            self.counter.show(joined, self.world_size)

    def never_arrived(self) -> list[int]:
        """Ranks not checked in now ([] when the store cannot say)."""
        try:
            arrived = set(self.arrived())
        except (RuntimeError, OSError):
            return []
        return [rank for rank in range(self.world_size) if rank not in arrived]

    def verdict(
        self, failure: Failure, pids: Mapping[int, int], init_timeout_s: float, elapsed_s: float
    ) -> Failure:
        """``failure`` as diagnosed, or start-up when ranks never checked in: the deadline
        passed, or the ranks that did arrive timed out in the rendezvous waiting for them."""
        missing = self.missing or (
            self.never_arrived() if failure.exit_code == ExitCode.TIMEOUT else []
        )
        if not missing:
            return failure
        return startup_failure(missing, self.world_size, pids, init_timeout_s, elapsed_s)

    def expired(self) -> bool:
        """True (once) when the deadline has passed and some rank never checked in."""
        if self.done or time.monotonic() < self.deadline:
            return False
        self.done = True
        self.missing = self.never_arrived()
        return bool(self.missing)


def wait_for_ranks(
    processes: Sequence[Any],
    stop: StopSignals,
    startup: StartupWatch | None = None,
    tick: Callable[[], None] | None = None,
) -> dict[int, int | None] | None:
    """Block until every rank exits 0 (returns None), one fails, or a stop signal arrives.
    On failure, the others get :data:`GRACE_S` to fail on their own, then are killed;
    returns rank -> exit code (None: killed). An expired ``startup`` (a rank never checked
    in) kills every rank at once; ``tick`` is called at every poll (the progress lines)."""
    try:
        while True:
            if stop.received is not None:
                return None
            codes = [p.exitcode for p in processes]
            if all(code == 0 for code in codes):
                return None
            if any(code not in (None, 0) for code in codes):
                break
            if startup is not None and startup.expired():
                stopped = {rank: p.exitcode for rank, p in enumerate(processes)}
                stop_processes(processes, grace_s=0.5)
                return stopped
            if startup is not None:
                startup.show_progress()
            if tick is not None:
                tick()
            # Woken by the first rank to exit rather than the next poll: a short run ends
            # up to POLL_S sooner.
            multiprocessing.connection.wait(
                [p.sentinel for p, code in zip(processes, codes, strict=True) if code is None],
                POLL_S,
            )
    finally:
        if startup is not None and startup.counter is not None:
            startup.counter.finish()
    grace_s = GRACE_S
    if startup is not None and not startup.done and startup.never_arrived():
        # A rank that never checked in cannot fail on its own: waiting for it is no use.
        grace_s = 0.0
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.exitcode is None for p in processes):
        time.sleep(POLL_S)
    final: dict[int, int | None] = {rank: p.exitcode for rank, p in enumerate(processes)}
    stop_processes(processes, grace_s=0.5)
    return final


class Tolerant:
    """A text stream whose writes and flushes never raise: once one fails (EPIPE, EBADF,
    a closed file), the rest are dropped."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return int(self.stream.write(text))
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        # fileno, encoding, buffer...: what print, rich and click may ask of a stream.
        return getattr(self.stream, name)


def _reopen_if_closed(fd: int) -> bool:
    """Put /dev/null on ``fd`` when it is closed; whether it was."""
    with contextlib.suppress(OSError):
        os.fstat(fd)
        return False
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return True


def guard() -> None:
    """Make this process's stdout and stderr :class:`Tolerant` (idempotent)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        reopened = _reopen_if_closed(fd)
        stream = getattr(sys, name)
        if isinstance(stream, Tolerant):
            continue
        if stream is None or reopened:
            stream = open(fd, "w", buffering=1, closefd=False, encoding="utf-8")  # noqa: SIM115
        setattr(sys, name, cast(TextIO, Tolerant(stream)))


#: The job file, in the world's run directory while its ranks run.
JOB_FILE = ".rank-job.pickle"


def record_nccl_log(run_dir: Path) -> None:
    """meta.json's ``nccl``: what NCCL's own start-up logs (nccl-rank*.log, left beside it;
    none on gloo or under a user's own NCCL_DEBUG) say about the run, then its ``verdicts``,
    every one the run's evidence gives (docs/explain.md), each also printed."""
    from colbench.hardware.node import run_verdicts
    from colbench.nccl.log import parse_log, summary

    files = RunDir(run_dir)
    try:
        meta = files.read_meta()
    except (OSError, ValueError):  # no meta.json to add to (a failed start): logs stay
        return
    logs = files.nccl_logs()
    found = None
    if logs:
        text = "".join(path.read_text(encoding="utf-8", errors="replace") for path in logs)
        # The sweep writes ``fabric``; every task's config has ranks_per_gpu (p2p, health).
        per_gpu = (meta.get("config") or {}).get("ranks_per_gpu") or 1
        emulated = (meta.get("fabric") or {}).get("kind") == FABRIC_EMULATED or per_gpu > 1
        found = summary(parse_log(text), emulated_nodes=emulated)
        found.pop("algorithms", None)  # start-up logs have no TUNING lines
        meta["nccl"] = {"logs": [p.name for p in logs], **found}
    verdicts = run_verdicts(meta)
    for line in verdicts:
        print(f"colbench: verdict: {line}", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        files.update_meta(verdicts=verdicts, **({"nccl": meta["nccl"]} if found else {}))


def report_done(run_dir: Path) -> int:
    files = RunDir(run_dir)
    meta = files.read_meta()
    wrong = int(meta.get("wrong_total") or 0)
    rows = plural(int(meta.get("rows", 0)), "row")
    print(f"colbench: {rows} in {files.table_path()}", file=sys.stderr)
    if wrong:
        print(f"colbench: {wrong} wrong element(s): results are not trustworthy", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    if meta.get("rows_oom"):
        oom = f"{meta['rows_oom']} row(s) could not allocate their buffers (status oom)"
        print(f"colbench: {oom}", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.OK)


def end_meta(run_dir: Path, status: str, fields: dict[str, Any]) -> None:
    """meta.json of a run that did not complete: its status, why, and the rows it kept (a
    reader of results.csv checks the file against that count). A write that fails now (a
    full disk) is said in one line: the exit code stays the run's (SIGTERM's 143, say).
    ``fields`` may name the rows planned where meta.json does not (interleaved worlds')."""
    files = RunDir(run_dir)
    try:
        meta = files.read_meta()
    except (OSError, ValueError):  # missing or broken: start afresh
        meta = {"run_id": files.name, "schema_version": SCHEMA_VERSION}
    meta.update(status=status, **fields)
    if files.has_table():
        # An interleaved variant's world keeps its rows in the run's one results.csv.
        kept = files.rows_kept()
        meta.update(rows=kept, rows_complete=_complete(kept, meta.get("rows_planned")))
    try:
        files.write_meta(meta)
    except WriteFailed as exc:
        print(f"colbench: {exc}: the run's end is not recorded in meta.json", file=sys.stderr)


def _complete(kept: int, planned: object) -> bool:
    return isinstance(planned, int) and kept >= planned > 0


def kept_line(run_dir: Path) -> str:
    """What a failed or interrupted run kept, for its last words: every planned row (the
    failure came after the last), or how many were measured before it."""
    files = RunDir(run_dir)
    kept = files.rows_kept()
    try:
        planned = files.read_meta().get("rows_planned")
    except (OSError, ValueError):
        planned = None
    if _complete(kept, planned):
        return (
            f"every row was measured before the failure: all {kept} are in "
            f"{files.table_path()}, which is complete"
        )
    of = f" (of {planned} planned)" if isinstance(planned, int) else ""
    verb = "is" if kept == 1 else "are"
    return f"{plural(kept, 'row')} measured before the failure{of} {verb} in {run_dir}"


def forget_job(run_dir: Path) -> None:
    """Remove the job file once the world's ranks are done with it."""
    (run_dir / JOB_FILE).unlink(missing_ok=True)
