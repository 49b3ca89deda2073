"""Keeping p2p to ``--max-time``: a probe prices a message, and a plan too long is cut.

At its defaults p2p sends (5 + 20) messages of 64 MiB per ordered pair, 5 passes over the
matrix: on 4 nodes at 400 Mbit/s that is 17 minutes, and on a degraded link hours. So
before the first pass every rank takes part in a probe: the first step's pairs send one
message (it sets their connection up), then time one bandwidth message and a few round
trips; the side group agrees on the slowest of each, so every rank prices the plan alike
(:func:`cost_s`) and, where it does not fit the time left, cuts it alike (:func:`fit`),
in this order:

1. warm-up messages beyond the first (they measure nothing; the first sets a pair up),
2. timed messages per pair, down to :data:`MIN_ITERS`,
3. passes, down to the fewest with which the verdict can still name a link
   (:func:`passes_floor`): the verdict judges passes, each a median of its messages,
4. the message size, halved down to :data:`MIN_SIZE_BYTES`,
5. passes down to one, then timed messages down to one.

Between passes the ranks check again that one more fits (:func:`another_pass_fits`).

The passes themselves run here too (:func:`measure`), in every rank: every rank computes
the same plan from the same agreed numbers (the probe's slowest, the earliest start), so
the ranks never disagree on which messages come next.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from colbench.bench.groups import SideGroup
from colbench.commands.gate.checks import DEFAULT_ALPHA
from colbench.commands.p2p.config import P2PConfig
from colbench.commands.p2p.link_tests import MIN_NODES
from colbench.commands.p2p.links import MIN_RANKS, passes_needed
from colbench.commands.p2p.measure import (
    Buffers,
    Pass,
    Stepper,
    Transport,
    bandwidth_call,
    latency_call,
    time_probe,
)
from colbench.commands.p2p.schedule import Selection, Step, directed_steps, pair_steps
from colbench.config.sizes import format_size
from colbench.host.pace import duration

#: Fewest timed messages per pair a cut leaves before it takes passes.
MIN_ITERS = 5
#: Smallest message a cut leaves: below it a "bandwidth" is mostly per-message latency.
MIN_SIZE_BYTES = 1024**2
#: Share of the time left that a cut plan may fill; the rest absorbs the probe's error
#: (one message, on a fabric whose other pairs may differ).
FILL = 0.85
#: Allowed after the last pass: gathering the times, p2p.csv, the verdict, the heatmap and
#: the ranks' exit (measured at 0.6-1.5 s on a 2-core machine, up to 5 s while it was
#: busy): an allowance, so a plan priced past the cap by it may still end within it.
REPORT_S = 3.0
#: Round trips the probe times (the fastest is kept: one may meet a busy host).
PROBE_TRIPS = 3


@dataclass(frozen=True)
class Plan:
    """What one p2p run measures per ordered pair."""

    size_bytes: int
    warmup: int
    iters: int
    repeat: int

    def text(self) -> str:
        return (
            f"{self.repeat} pass{'' if self.repeat == 1 else 'es'} x ({self.warmup} warm-up + "
            f"{self.iters} timed) messages of {format_size(self.size_bytes)} per ordered pair"
        )


@dataclass(frozen=True)
class Probe:
    """What the probe measured, the slowest rank's (seconds)."""

    #: One timed bandwidth iteration (a window of messages and its acknowledgement).
    message_s: float
    round_trip_s: float
    #: One barrier of the side group: every step begins with one.
    barrier_s: float
    #: The size the message was timed at.
    size_bytes: int
    #: Time since the host started, when the probe was done.
    elapsed_s: float

    def message_at(self, size_bytes: int) -> float:
        """A message of ``size_bytes``: a round trip's fixed part, the rest by the byte."""
        fixed = min(self.round_trip_s, self.message_s)
        return fixed + (self.message_s - fixed) * size_bytes / max(1, self.size_bytes)


@dataclass(frozen=True)
class Shape:
    """Steps of one pass over the matrix."""

    bandwidth_steps: int
    latency_steps: int


def step_costs_s(plan: Plan, probe: Probe) -> tuple[float, float]:
    """(a bandwidth step, a latency step) of ``plan``, in seconds."""
    messages = plan.warmup + plan.iters
    bandwidth = messages * probe.message_at(plan.size_bytes) + probe.barrier_s
    return bandwidth, messages * probe.round_trip_s + probe.barrier_s


def cost_s(plan: Plan, probe: Probe, shape: Shape) -> float:
    """All passes of ``plan``, in seconds."""
    return plan.repeat * sum_weights(shape, step_costs_s(plan, probe))


def _ladder(asked: Plan, floor: int) -> Iterator[tuple[str, int]]:
    """(field, value) in the order a cut tries them (see the module's docstring)."""
    yield from (("warmup", n) for n in range(asked.warmup - 1, 0, -1))
    lowest = min(asked.iters, MIN_ITERS)
    yield from (("iters", n) for n in range(asked.iters - 1, lowest - 1, -1))
    yield from (("repeat", n) for n in range(asked.repeat - 1, min(asked.repeat, floor) - 1, -1))
    size = asked.size_bytes // 2
    while size >= MIN_SIZE_BYTES:
        yield "size_bytes", size
        size //= 2
    yield from (("repeat", n) for n in range(min(asked.repeat, floor) - 1, 0, -1))
    yield from (("iters", n) for n in range(lowest - 1, 0, -1))


def fit(asked: Plan, probe: Probe, shape: Shape, budget_s: float, floor: int) -> Plan:
    """``asked`` when it fits ``budget_s``, else the first plan down the ladder that does
    (the smallest of them when none does). ``floor``: the passes the verdict needs."""
    plan = asked
    for name, value in _ladder(asked, floor):
        if cost_s(plan, probe, shape) <= budget_s:
            break
        plan = replace(plan, **{name: value})
    return plan


def budget_s(max_time_s: float, elapsed_s: float) -> float:
    """What the passes may take: the time left after the probe, less the report, filled
    to :data:`FILL` (an over-run is worse than a few messages fewer)."""
    return max(0.0, (max_time_s - elapsed_s - REPORT_S) * FILL)


def another_pass_fits(max_time_s: float, elapsed_s: float, pass_s: float) -> bool:
    """Whether one more pass, as long as the longest so far, ends before the report's time."""
    return elapsed_s + pass_s + REPORT_S <= max_time_s


def cuts(asked: Plan, ran: Plan) -> list[str]:
    """What a cut changed, in words (empty: nothing)."""
    said = []
    for name, words in (
        ("warmup", "warm-up messages"),
        ("iters", "timed messages"),
        ("size_bytes", "message size"),
        ("repeat", "passes"),
    ):
        show = format_size if name == "size_bytes" else str
        before, after = getattr(asked, name), getattr(ran, name)
        if before != after:
            said.append(f"{words} {show(before)} -> {show(after)}")
    return said


def passes_floor(selection: Selection, labels: Sequence[str], fail_below: bool) -> int:
    """The fewest passes with which the verdict can name a link (and --fail-below fail
    one): what a cut keeps before it takes message size."""
    ranks = selection.ranks
    if len(ranks) < MIN_RANKS:
        return 1
    links = len({frozenset(pair) for step in pair_steps(selection) for pair in step})
    nodes = len({labels[r] for r in ranks})
    family = 2 * ((nodes if nodes >= MIN_NODES else 0) + links)
    need = passes_needed(links, family, DEFAULT_ALPHA)
    if fail_below:
        need = max(need, passes_needed(links, links, DEFAULT_ALPHA))
    return need


@dataclass(frozen=True)
class Budgeted:
    """The plan a run measured, against the plan it was asked for."""

    asked: Plan
    planned: Plan
    probe: Probe
    shape: Shape
    max_time_s: float
    #: Passes measured: fewer than planned when time ran short between passes.
    passes: int

    @property
    def ran(self) -> Plan:
        return replace(self.planned, repeat=self.passes)

    def record(self) -> dict[str, Any]:
        """meta.json's ``plan``: the cap, the probe, the plan asked, planned and run."""
        return {
            "max_time_s": self.max_time_s,
            "probe": {k: round(v, 6) for k, v in asdict(self.probe).items()},
            "asked": asdict(self.asked),
            "asked_s": round(cost_s(self.asked, self.probe, self.shape), 1),
            "planned": asdict(self.planned),
            "planned_s": round(cost_s(self.planned, self.probe, self.shape), 1),
            "ran": asdict(self.ran),
            "cut": cuts(self.asked, self.ran),
        }


@dataclass
class Matrix:
    """One rank's means of measuring the matrix."""

    cfg: P2PConfig
    stepper: Stepper
    link: Transport
    side: SideGroup
    selection: Selection
    device: Any
    in_flight: Any
    #: When the host started (time.time()); the cap counts from it.
    started_at: float
    bufs: Buffers | None = None

    def bandwidth_steps(self) -> list[Step]:
        cfg = self.cfg
        return (pair_steps if cfg.bidirectional else directed_steps)(self.selection, cfg.serial)

    def latency_steps(self) -> list[Step]:
        return directed_steps(self.selection, self.cfg.serial)

    def allocate(self, size_bytes: int) -> None:
        if self.stepper.rank in self.selection.ranks:
            self.bufs = None  # the old buffers go before the new ones come
            self.bufs = Buffers.allocate(size_bytes, self.cfg.latency_bytes, self.device)

    def bandwidth(self, me: str, peer: int) -> Callable[[], None]:
        # Called only for a rank in a step, which takes part and so has its buffers.
        assert self.bufs is not None
        cfg, link = self.cfg, self.link
        return bandwidth_call(link, me, peer, self.bufs, cfg.bidirectional, link.window)

    def latency(self, me: str, peer: int) -> Callable[[], None]:
        assert self.bufs is not None
        return latency_call(self.link, me, peer, self.bufs)

    def agreed_max(self, *values: float) -> list[float]:
        """Each value's largest over the ranks."""
        every = self.side.gather_floats(list(values))
        return [max(column) for column in zip(*every, strict=True)]

    def measure_probe(self) -> Probe:
        cfg = self.cfg
        self.in_flight.size_bytes = cfg.size_bytes
        first = self.bandwidth_steps()[0]
        mine = time_probe(self.stepper, first, self.bandwidth, self.latency, PROBE_TRIPS)
        message_s, trip_s, barrier_s, elapsed_s = self.agreed_max(
            *mine, time.time() - self.started_at
        )
        return Probe(message_s, trip_s, barrier_s, cfg.size_bytes, elapsed_s)

    def one_pass(self, plan: Plan, index: int, weights: tuple[float, float]) -> Pass:
        """Pass ``index``: bandwidth of every pair, then latency of every pair."""
        cfg, window = self.cfg, self.link.window
        self.in_flight.size_bytes = plan.size_bytes
        which = f"pass {index + 1}/{plan.repeat}"
        windows = self.stepper.run(
            f"{which} bandwidth", self.bandwidth_steps(), self.bandwidth, cfg.bidirectional,
            weights[0],
        )  # fmt: skip
        # Rows report one message's time (a window's over its messages).
        bw = {pair: [t / window for t in times] for pair, times in windows.items()}
        self.in_flight.size_bytes = cfg.latency_bytes
        lat = self.stepper.run(
            f"{which} latency", self.latency_steps(), self.latency, weight=weights[1]
        )
        return bw, lat


#: Called in every rank after each pass with its index, the plan and the pass's times:
#: the rows of a pass are kept as soon as it is measured, as a sweep keeps each row.
PassDone = Callable[[int, Plan, Pass], None]


def measure(matrix: Matrix, floor: int, speaks: bool, done: PassDone) -> Budgeted:
    """Probe, plan, and every pass that fits; ``speaks``: this rank says the plan."""
    cfg = matrix.cfg
    asked = Plan(cfg.size_bytes, max(1, cfg.warmup), cfg.iters, cfg.repeat)
    found = matrix.measure_probe()
    shape = Shape(len(matrix.bandwidth_steps()), len(matrix.latency_steps()))
    room_s = budget_s(cfg.max_time_s, found.elapsed_s)
    planned = fit(asked, found, shape, room_s, floor)
    if speaks and planned != asked:
        say_cut(asked, planned, found, shape, cfg.max_time_s)
    if planned.size_bytes != asked.size_bytes:
        matrix.allocate(planned.size_bytes)
    matrix.stepper.iters, matrix.stepper.warmup = planned.iters, planned.warmup
    weights = step_costs_s(planned, found)
    pace = matrix.in_flight.pace
    steps_per_pass = shape.bandwidth_steps + shape.latency_steps
    if pace is not None:
        total_s = cost_s(planned, found, shape)
        pace.plan(planned.repeat * steps_per_pass, total_s, "steps", 1.0, REPORT_S)
    longest_s, passes = 0.0, 0
    for index in range(planned.repeat):
        begun = time.time()
        done(index, planned, matrix.one_pass(planned, index, weights))
        passes = index + 1
        if passes == planned.repeat:
            break
        elapsed_s, pass_s = matrix.agreed_max(time.time() - matrix.started_at, time.time() - begun)
        longest_s = max(longest_s, pass_s)
        if not another_pass_fits(cfg.max_time_s, elapsed_s, longest_s):
            if pace is not None:
                pace.replan(passes * steps_per_pass, passes * sum_weights(shape, weights))
            break
    if pace is not None:
        pace.end()
    return Budgeted(asked, planned, found, shape, cfg.max_time_s, passes)


def sum_weights(shape: Shape, weights: tuple[float, float]) -> float:
    return shape.bandwidth_steps * weights[0] + shape.latency_steps * weights[1]


def say_cut(asked: Plan, planned: Plan, found: Probe, shape: Shape, max_time_s: float) -> None:
    """The line that says the plan was cut, and why."""
    print(
        f"colbench: p2p: a {format_size(found.size_bytes)} message takes {found.message_s:.3g} s "
        f"on the first step's pairs, so {asked.text()} "
        f"{why_cut(cost_s(asked, found, shape), found.elapsed_s, max_time_s)}: measuring "
        f"{planned.text()} instead ({', '.join(cuts(asked, planned))})"
        f"{still_over(cost_s(planned, found, shape), found.elapsed_s, max_time_s)}",
        file=sys.stderr,
        flush=True,
    )


def about(seconds: float) -> str:
    """An estimate, rounded up (to 0.1 s below a minute): an end past the cap never reads
    as at or within it, nor a short plan as taking 0 s."""
    if seconds < 60:
        return f"{math.ceil(round(seconds * 10, 6)) / 10:g} s"
    return duration(math.ceil(seconds))


def why_cut(asked_s: float, elapsed_s: float, max_time_s: float) -> str:
    """Why a plan whose passes take ``asked_s`` was cut: the cap counts the whole run, so the
    end it is compared with adds the time spent so far and the report's allowance."""
    end_s = elapsed_s + asked_s + REPORT_S
    said = (
        f"would take about {about(asked_s)}, ending about {about(end_s)} after the start "
        f"({about(elapsed_s)} so far, {REPORT_S:g} s allowed for the report)"
    )
    if end_s > max_time_s:
        return f"{said}, past --max-time {max_time_s:g} s"
    return (
        f"{said}, within --max-time {max_time_s:g} s but past the {FILL:.0%} of the time left "
        "that passes may fill"
    )


def still_over(planned_s: float, elapsed_s: float, max_time_s: float) -> str:
    """The cut line's ending when even the cut plan is priced past the cap (else empty)."""
    end_s = elapsed_s + planned_s + REPORT_S
    if end_s <= max_time_s:
        return ""
    return (
        f"; even this takes about {about(planned_s)} and ends about {about(end_s)} after the "
        f"start, past --max-time {max_time_s:g} s if the report takes all of its "
        f"{REPORT_S:g} s: it may overrun the cap"
    )
