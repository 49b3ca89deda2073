"""Keeping a run going: spawned ranks watched (fail fast, stop cleanly on signals, bound
the start-up), and output that never stops it.

The parent waits on its ranks' processes; when one fails, the others get a moment to
fail on their own (and write their reports, :mod:`colbench.host.protocol`) before they
are killed, so the verdict names the first failure, not its echoes.

And stdout and stderr that never stop a run. A run's results are its files; what it
prints is a view of them. A long run started as ``colbench p2p 2>&- &``, or piped into
``head`` (whose reader leaves early), or whose log pipe broke, would otherwise die on its
next line: Python ignores SIGPIPE and raises BrokenPipeError instead, and a closed stderr
is None (``sys.stderr.write`` fails). So the parent and every rank write through
:class:`Tolerant`, which drops what can no longer be written, and a closed descriptor 1
or 2 is reopened on /dev/null first (else the next file opened would take its number and
receive gloo's warnings).
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from colbench.errors import ExitCode
from colbench.host.protocol import Failure, startup_failure

#: After the first rank fails, how long the others get to fail on their own (they see a
#: closed connection and write their reports) before they are killed.
GRACE_S = 2.0
POLL_S = 0.1
#: How long after --init-timeout (counted from the start of the ranks) the parent stops a
#: start-up itself; the arrived ranks' own rendezvous timeout usually ends it first.
STARTUP_GRACE_S = 3.0


#: The signals that stop a run as SIGTERM does (rows kept, meta.json ``interrupted``,
#: exit 128 + n): SIGHUP when the terminal or the ssh session goes away, SIGQUIT from
#: Ctrl-\, SIGINT from Ctrl-C. Without a handler SIGHUP and SIGQUIT ended the parent
#: silently, its meta.json left ``running``.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Ignored when colbench started, these stay ignored: a background job of a script
#: (SIGINT) or a run under nohup (SIGHUP) asked not to be stopped by them.
IGNORED_STAYS = (signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """Turn the stopping signals (:data:`STOPPING`) into a flag the wait loop polls.

    A SIGINT that was ignored when colbench started stays ignored: a shell script starts
    its background jobs (``colbench sweep ... &``) so, and by that convention Ctrl-C at
    the script's terminal stops the script's foreground, not its background runs. Such a
    run is stopped with SIGTERM (``kill PID``), its rows kept, like any other. Handling
    SIGINT there would also make the answer depend on timing: one sent while Python
    starts up, before this handler exists, is ignored anyway.
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


def join_counter(progress: bool | None) -> JoinCounter | None:
    """The start-up's count of ranks joined: redrawn on a terminal (as the progress bar
    is; ``progress`` None: when stderr is one), a line now and then in a log; none with
    --no-progress."""
    if progress is False:
        return None
    return JoinCounter(terminal=sys.stderr.isatty() if progress is None else True)


@dataclass
class StartupWatch:
    """The parent's own deadline for every rank to check in at the rendezvous.

    The ranks that did arrive time out in the rendezvous by themselves, but a rank that
    never gets there (stuck before its first line of colbench) reports nothing, and
    neither do arrived ranks that are stuck too; the parent, which owns the store,
    sees who checked in and stops the start-up at ``deadline`` (time.monotonic()).
    """

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
        if self.counter is None or self.counter.finished:
            return
        if not self.counter.due():
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
    returns rank -> exit code, None for ranks that had to be killed. When ``startup``
    expires (a rank never checked in), every rank is killed at once. ``tick`` is called
    at every poll (the progress lines, colbench.host.pace).
    """
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
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
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
