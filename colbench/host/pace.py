"""How long a run takes, said while it runs: rank 0's forecast, and what it says.

A user must be able to tell a long run from a hung one. Rank 0 of every task keeps a
:class:`Pace`: its plan in steps, each weighed by the task's model of its cost (seconds
where the task can measure them first, as p2p's probe and health's budget do; bytes where
it cannot, as a sweep), and the steps done. Once a rate is known (a model's, or the first
step's) it forecasts the whole run, from the host's start to the report, and says it once
when the run is long enough to wait on (:func:`every_s`); at the end the host compares the
time taken with the time stated (:func:`check_overrun`).

Where stderr is no terminal (a batch job's log, a pipe), a sweep's live bar draws nothing
and p2p and health have none: a plain progress line at least every :func:`every_s` says how
far the run is and how long it has left. Spawned, the parent draws them from the forecast
rank 0 publishes in the store (:data:`KEY`; rank 0 may be inside a 34-second step);
launched, rank 0 draws them from a thread. A line that cannot be written is dropped.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from colbench.host.protocol import read_progress
from colbench.results.rundir import RunDir

#: The longest gap between two progress lines: a 64 MiB message at 400 Mbit/s takes
#: 1.3 s, a p2p step of 25 of them 34 s, and a log silent for minutes reads as a hang.
EVERY_S = 30.0
#: Shortens the gap (tests; a user who wants more lines); never lengthens it past EVERY_S.
EVERY_ENV = "COLBENCH_PROGRESS_EVERY_S"
#: The store key rank 0 publishes its forecast under, for the parent.
KEY = "colbench/pace"


def every_s(env: Mapping[str, str] | None = None) -> float:
    """The gap between progress lines: :data:`EVERY_S`, or shorter by :data:`EVERY_ENV`
    (a value that is no positive number is ignored: the default is safe)."""
    text = (os.environ if env is None else env).get(EVERY_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return EVERY_S
    return min(EVERY_S, value) if math.isfinite(value) and value > 0 else EVERY_S


def duration(seconds: float) -> str:
    """``45 s``, ``8 min 20 s``, ``1 h 05 min``: what a person reads at a glance."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


@dataclass(frozen=True)
class Forecast:
    """Rank 0's plan and progress at one moment; times are wall-clock (time.time()), the
    one clock a spawned rank and its parent share."""

    #: When the host started the ranks: every "in all" counts from here.
    started_at: float
    #: When the plan began (its steps are what the rate is measured over).
    planned_at: float
    #: When the last step was done.
    updated_at: float
    units_done: int
    units_total: int
    #: What a unit is: ``steps``, ``rows``.
    unit: str
    weight_done: float
    weight_total: float
    #: The task's own rate before any step is done (seconds per unit of weight); 0: none.
    model_s: float = 0.0
    #: Time after the last step: gathering results, the report.
    tail_s: float = 0.0
    #: The total this run stated (seconds from started_at); 0: not stated yet.
    stated_s: float = 0.0
    #: When it was stated.
    stated_at: float = 0.0

    def rate_s(self) -> float | None:
        """Seconds per unit of weight: as measured once a step is done, else the model's."""
        if self.weight_done > 0:
            return max(0.0, self.updated_at - self.planned_at) / self.weight_done
        return self.model_s or None

    def total_s(self) -> float | None:
        """The whole run's expected time from :attr:`started_at`; None before any rate."""
        rate = self.rate_s()
        if rate is None:
            return None
        return self.planned_at - self.started_at + self.weight_total * rate + self.tail_s

    def left_s(self, now: float) -> float | None:
        """Expected time left at ``now``: the weight to go at the rate, less the time the
        step under way has run already (a step that runs long never makes it negative)."""
        rate = self.rate_s()
        if rate is None:
            return None
        under_way = now - self.updated_at
        return max(0.0, (self.weight_total - self.weight_done) * rate - under_way) + self.tail_s

    def encode(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def decode(cls, text: str) -> Forecast:
        """A published record; ValueError (or TypeError) when it is not one."""
        return cls(**json.loads(text))


@dataclass
class Pace:
    """Rank 0's forecast of its run (see the module's docstring).

    ``say`` prints the one line that states the run's time; ``publish`` sends each
    forecast to whoever draws the progress lines (the parent's store; None: nobody).
    """

    started_at: float
    say: Callable[[str], None] | None = None
    publish: Callable[[str], None] | None = None
    #: A run forecast to take this long says so; None: :func:`every_s`.
    threshold_s: float | None = None
    clock: Callable[[], float] = time.time
    forecast: Forecast | None = field(default=None, init=False)
    _current: float | None = field(default=None, init=False)

    def plan(
        self,
        units_total: int,
        weight_total: float,
        unit: str = "steps",
        model_s: float = 0.0,
        tail_s: float = 0.0,
        stated_s: float = 0.0,
    ) -> None:
        """The steps ahead, from now. ``model_s``: seconds per unit of weight, when the
        task knows them before a step is done; ``stated_s``: the task said its time
        itself (health), so nothing more is said."""
        now = self.clock()
        self.forecast = Forecast(
            self.started_at, now, now, 0, units_total, unit, 0.0, weight_total,
            model_s, tail_s, stated_s, now if stated_s else 0.0,
        )  # fmt: skip
        self._current = None
        self._changed()

    def replan(self, units_total: int, weight_total: float) -> None:
        """Fewer (or more) steps than planned, keeping those done (p2p drops a pass)."""
        if self.forecast is not None:
            self.forecast = replace(
                self.forecast, units_total=units_total, weight_total=weight_total
            )
            self._changed()

    def step(self, weight: float = 1.0) -> None:
        """A step of ``weight`` begins; the step before it, if any, is done."""
        if self._current is not None:
            self.done(self._current)
        self._current = weight

    def end(self) -> None:
        """The last step is done."""
        if self._current is not None:
            self.done(self._current)
            self._current = None

    def done(self, weight: float, units: int = 1) -> None:
        """``units`` of ``weight`` in all are done."""
        if self.forecast is None:
            return
        f = self.forecast
        self.forecast = replace(
            f,
            units_done=f.units_done + units,
            weight_done=f.weight_done + weight,
            updated_at=self.clock(),
        )
        self._changed()

    def _changed(self) -> None:
        f = self.forecast
        if f is None:
            return
        total = f.total_s()
        threshold_s = every_s() if self.threshold_s is None else self.threshold_s
        if not f.stated_s and total is not None and total >= threshold_s:
            self.forecast = f = replace(f, stated_s=total, stated_at=self.clock())
            if self.say is not None:
                after = duration(f.stated_at - f.started_at)
                self.say(
                    f"colbench: this run takes about {duration(f.stated_s)} in all "
                    f"({f.units_total} {f.unit}; forecast {after} in)"
                )
        # One store write per step, as every rank's InFlight makes: the parent's next
        # line must not show a count a 34-second step old.
        if self.publish is not None:
            self.publish(f.encode())


def counting(on_step: Callable[[str], None], pace: Pace | None) -> Callable[[str], None]:
    """``on_step`` (a rank's step, for the hang watchdog) that also tells ``pace`` a step
    of weight 1 began."""
    if pace is None:
        return on_step

    def step(what: str) -> None:
        pace.step()
        on_step(what)

    return step


#: A run that takes more than this much longer than it stated says so at the end.
OVERRUN_FRACTION = 0.5

#: What a line source gives: rank 0's forecast (None before it has one) and what rank 0
#: is doing now ("" when unknown).
Source = Callable[[], tuple[Forecast | None, str]]


def say(line: str) -> None:
    """Print ``line`` on stderr, or nothing when stderr is closed (None: AttributeError) or
    its reader gone."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def lines_wanted(progress: bool | None, live_bar: bool) -> bool:
    """Whether to print progress lines: not with --no-progress; where a task draws a live
    bar (a sweep), only when stderr is no terminal (the bar shows nothing there)."""
    if progress is False:
        return False
    try:
        return not (live_bar and sys.stderr.isatty())
    except (OSError, ValueError, AttributeError):  # closed, or None: no terminal
        return True


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


@dataclass
class ProgressLines:
    """Prints a progress line from ``source`` every ``interval_s`` (:func:`every_s`)."""

    source: Source
    started_at: float
    interval_s: float = field(default_factory=every_s)
    write: Callable[[str], None] = say

    def __post_init__(self) -> None:
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


def check_overrun(run_dir: Path, forecast: Forecast | None, taken_s: float) -> None:
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
    timing = {
        "stated_s": round(forecast.stated_s, 1),
        "stated_after_s": round(forecast.stated_at - forecast.started_at, 1),
        "taken_s": round(taken_s, 1),
        "overran": overran,
    }
    with contextlib.suppress(OSError, ValueError):  # no meta.json to add to
        RunDir(run_dir).update_meta(timing=timing)
