"""How long a run takes, said while it runs: rank 0's forecast, and what it says.

A benchmark over a slow link can take many minutes; a user must be able to tell a long
run from a hung one. Rank 0 of every task keeps a :class:`Pace`: its plan in steps, each
step weighed by the task's model of its cost (seconds where the task can measure them
first, as p2p's probe and health's budget do; bytes where it cannot, as a sweep), and the
steps done so far. Once a rate is known (a model's, or the first step's) it forecasts
the whole run, from the host's start to the report, and says it once when the run is
long enough to wait on: at least :func:`every_s` (the gap between two progress lines).

The forecast travels as one record (:class:`Forecast`): spawned ranks publish it in the
rendezvous store under :data:`KEY` for the parent's progress lines; a launched rank 0
prints its lines itself (:mod:`colbench.host.ticker` draws both). At the end the host
compares the time taken with the time stated (:func:`colbench.host.ticker.check_overrun`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

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
        fields = json.loads(text)
        return cls(**fields)


class Pace:
    """Rank 0's forecast of its run (see the module's docstring).

    ``say`` prints the one line that states the run's time; ``publish`` sends each
    forecast to whoever draws the progress lines (the parent's store; None: nobody).
    """

    def __init__(
        self,
        started_at: float,
        say: Callable[[str], None] | None = None,
        publish: Callable[[str], None] | None = None,
        threshold_s: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.started_at = started_at
        self.forecast: Forecast | None = None
        self._say = say
        self._publish = publish
        self._threshold_s = every_s() if threshold_s is None else threshold_s
        self._clock = clock
        self._current: float | None = None

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
        now = self._clock()
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
            updated_at=self._clock(),
        )
        self._changed()

    def _changed(self) -> None:
        f = self.forecast
        if f is None:
            return
        total = f.total_s()
        if not f.stated_s and total is not None and total >= self._threshold_s:
            self.forecast = f = replace(f, stated_s=total, stated_at=self._clock())
            if self._say is not None:
                self._say(stated_line(f))
        # One store write per step, as every rank's InFlight makes: the parent's next
        # line must not show a count a 34-second step old.
        if self._publish is not None:
            self._publish(f.encode())


def stated_line(forecast: Forecast) -> str:
    """The line that states the run's time, once."""
    after = forecast.stated_at - forecast.started_at
    return (
        f"colbench: this run takes about {duration(forecast.stated_s)} in all "
        f"({forecast.units_total} {forecast.unit}; forecast {duration(after)} in)"
    )


def counting(on_step: Callable[[str], None], pace: Pace | None) -> Callable[[str], None]:
    """``on_step`` (a rank's step, for the hang watchdog) that also tells ``pace`` a step
    of weight 1 began."""
    if pace is None:
        return on_step

    def step(what: str) -> None:
        pace.step()
        on_step(what)

    return step
