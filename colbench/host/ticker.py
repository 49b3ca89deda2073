"""Progress lines on stderr, and the word at the end on a run that overran its time.

Where stderr is no terminal (a batch job's log, a pipe) a sweep's live bar draws nothing,
and p2p and health have none: a plain line at least every :func:`colbench.host.pace.every_s`
says how far the run is and how long it has left. Spawned, the parent draws them on a
timer from the forecast rank 0 publishes in the store (rank 0 may be inside a 34-second
step); launched (torchrun, srun), rank 0 draws them from a thread of its own. A line
that cannot be written (stderr closed, its reader gone) is dropped: progress never stops
a run.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from colbench.host.pace import KEY, Forecast, duration, every_s
from colbench.host.protocol import read_progress
from colbench.results.rundir import RunDir

#: A run that takes more than this much longer than it stated says so at the end.
OVERRUN_FRACTION = 0.5

#: What a line source gives: rank 0's forecast (None before it has one) and what rank 0
#: is doing now ("" when unknown).
Source = Callable[[], tuple[Forecast | None, str]]


def say(line: str) -> None:
    """Print ``line`` on stderr, or nothing when stderr is closed or its reader gone."""
    try:
        stream = sys.stderr
        if stream is None:
            return
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (OSError, ValueError):
        return False


def lines_wanted(progress: bool | None, live_bar: bool) -> bool:
    """Whether to print progress lines: not with --no-progress; where a task draws a live
    bar (a sweep), only when stderr is no terminal (the bar shows nothing there)."""
    if progress is False:
        return False
    return not (live_bar and _isatty(sys.stderr))


def progress_line(forecast: Forecast | None, elapsed_s: float, now: float, doing: str) -> str:
    """``colbench: progress: 14/60 steps, 2 min 05 s in, about 6 min 15 s left (doing)``."""
    if forecast is None:
        text = f"colbench: progress: {duration(elapsed_s)} in, starting"
    else:
        text = (
            f"colbench: progress: {forecast.units_done}/{forecast.units_total} "
            f"{forecast.unit}, {duration(elapsed_s)} in"
        )
        left = forecast.left_s(now)
        if left is not None:
            text += f", about {duration(left)} left"
    return f"{text} ({doing})" if doing else text


class ProgressLines:
    """Prints a progress line from ``source`` every ``interval_s`` (:func:`every_s`)."""

    def __init__(
        self,
        source: Source,
        started_at: float,
        interval_s: float | None = None,
        write: Callable[[str], None] = say,
    ) -> None:
        self.source = source
        self.started_at = started_at
        self.interval_s = every_s() if interval_s is None else interval_s
        self.write = write
        self._next = time.monotonic() + self.interval_s

    def tick(self) -> None:
        """Print a line when one is due; cheap when none is (the wait loop polls it)."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.interval_s
        try:
            forecast, doing = self.source()
        except (RuntimeError, OSError, ValueError, TypeError):
            # The store going away (the run is ending) costs this line its numbers only.
            forecast, doing = None, ""
        now = time.time()
        self.write(progress_line(forecast, now - self.started_at, now, doing))


def store_source(store: Any) -> Source:
    """The parent's view: rank 0's forecast and step from the rendezvous store."""

    def read() -> tuple[Forecast | None, str]:
        forecast = read_forecast(store)
        rank0 = read_progress(store, 1).get(0)
        return forecast, rank0.describe() if rank0 is not None and rank0.seq else ""

    return read


def read_forecast(store: Any) -> Forecast | None:
    """Rank 0's last published forecast, None when it published none (or the store is gone)."""
    if store is None:
        return None
    try:
        if not store.check([KEY]):
            return None
        return Forecast.decode(store.get(KEY).decode())
    except (RuntimeError, OSError, ValueError, TypeError):
        return None


def in_thread(lines: ProgressLines) -> Callable[[], None]:
    """Tick ``lines`` from a daemon thread (a launched rank 0, whose main thread may sit
    in one collective for a minute); returns the function that stops it."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(min(1.0, lines.interval_s / 4)):
            lines.tick()

    threading.Thread(target=run, name="colbench-progress", daemon=True).start()
    return stop.set


def check_overrun(run_dir: Path | None, forecast: Forecast | None, taken_s: float) -> None:
    """At a run's clean end: record in meta.json's ``timing`` the time stated and taken,
    and say so when the run took more than :data:`OVERRUN_FRACTION` longer than stated."""
    if forecast is None or not forecast.stated_s:
        return
    over = taken_s / forecast.stated_s - 1
    overran = over > OVERRUN_FRACTION
    if overran:
        say(
            f"colbench: note: this run took {duration(taken_s)}, {over:.0%} more than the "
            f"about {duration(forecast.stated_s)} it stated"
        )
    if run_dir is None:
        return
    timing = {
        "stated_s": round(forecast.stated_s, 1),
        "stated_after_s": round(forecast.stated_at - forecast.started_at, 1),
        "taken_s": round(taken_s, 1),
        "overran": overran,
    }
    with contextlib.suppress(OSError, ValueError):  # no meta.json to add to
        RunDir(run_dir).update_meta(timing=timing)
