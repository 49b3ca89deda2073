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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from colbench.commands.gate.checks import DEFAULT_ALPHA
from colbench.commands.p2p.link_tests import MIN_NODES
from colbench.commands.p2p.links import MIN_RANKS, passes_needed
from colbench.commands.p2p.schedule import Selection, pair_steps
from colbench.config.sizes import format_size

#: Fewest timed messages per pair a cut leaves before it takes passes.
MIN_ITERS = 5
#: Smallest message a cut leaves: below it a "bandwidth" is mostly per-message latency.
MIN_SIZE_BYTES = 1024**2
#: Share of the time left that a cut plan may fill; the rest absorbs the probe's error
#: (one message, on a fabric whose other pairs may differ).
FILL = 0.85
#: After the last pass: gathering the times, p2p.csv, the verdict, the heatmap (measured
#: at 1.5-3 s on a busy 2-core machine).
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
    bandwidth, latency = step_costs_s(plan, probe)
    return plan.repeat * (shape.bandwidth_steps * bandwidth + shape.latency_steps * latency)


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
    if cost_s(plan, probe, shape) <= budget_s:
        return plan
    for name, value in _ladder(asked, floor):
        plan = replace(plan, **{name: value})
        if cost_s(plan, probe, shape) <= budget_s:
            break
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
        before, after = getattr(asked, name), getattr(ran, name)
        if before != after:
            shown = (format_size(before), format_size(after)) if name == "size_bytes" else (
                before, after)  # fmt: skip
            said.append(f"{words} {shown[0]} -> {shown[1]}")
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
