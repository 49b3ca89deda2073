"""A p2p run's passes over the matrix, in every rank, kept to ``--max-time``: the probe,
the plan (cut when too long, colbench.commands.p2p.budget), the passes, and what was measured.

Every rank computes the same plan from the same agreed numbers (the probe's slowest, the
earliest start), so the ranks never disagree on which messages come next.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from colbench.bench.groups import SideGroup
from colbench.commands.p2p import budget
from colbench.commands.p2p.budget import Plan, Probe, Shape
from colbench.commands.p2p.config import P2PConfig
from colbench.commands.p2p.measure import (
    Buffers,
    Stepper,
    Times,
    Transport,
    bandwidth_call,
    latency_call,
    probe,
)
from colbench.commands.p2p.schedule import Selection, Step, directed_steps, pair_steps
from colbench.config.sizes import format_size
from colbench.host.pace import duration


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
            "asked_s": round(budget.cost_s(self.asked, self.probe, self.shape), 1),
            "planned": asdict(self.planned),
            "planned_s": round(budget.cost_s(self.planned, self.probe, self.shape), 1),
            "ran": asdict(self.ran),
            "cut": budget.cuts(self.asked, self.ran),
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
        found = probe(self.stepper, first, self.bandwidth, self.latency, budget.PROBE_TRIPS)
        (elapsed_s,) = self.agreed_max(time.time() - self.started_at)
        return Probe(*found, size_bytes=cfg.size_bytes, elapsed_s=elapsed_s)

    def one_pass(self, plan: Plan, index: int, weights: tuple[float, float]) -> tuple[Times, Times]:
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
PassDone = Callable[[int, Plan, tuple[Times, Times]], None]


def measure(matrix: Matrix, floor: int, speaks: bool, done: PassDone) -> Budgeted:
    """Probe, plan, and every pass that fits; ``speaks``: this rank says the plan."""
    cfg = matrix.cfg
    asked = Plan(cfg.size_bytes, max(1, cfg.warmup), cfg.iters, cfg.repeat)
    found = matrix.measure_probe()
    shape = Shape(len(matrix.bandwidth_steps()), len(matrix.latency_steps()))
    room_s = budget.budget_s(cfg.max_time_s, found.elapsed_s)
    planned = budget.fit(asked, found, shape, room_s, floor)
    if speaks and planned != asked:
        say_cut(asked, planned, found, shape, cfg.max_time_s)
    if planned.size_bytes != asked.size_bytes:
        matrix.allocate(planned.size_bytes)
    matrix.stepper.iters, matrix.stepper.warmup = planned.iters, planned.warmup
    weights = budget.step_costs_s(planned, found)
    pace = matrix.in_flight.pace
    steps_per_pass = shape.bandwidth_steps + shape.latency_steps
    if pace is not None:
        total_s = budget.cost_s(planned, found, shape)
        pace.plan(planned.repeat * steps_per_pass, total_s, "steps", 1.0, budget.REPORT_S)
    longest_s, passes = 0.0, 0
    for index in range(planned.repeat):
        begun = time.time()
        done(index, planned, matrix.one_pass(planned, index, weights))
        passes = index + 1
        if passes == planned.repeat:
            break
        elapsed_s, pass_s = matrix.agreed_max(time.time() - matrix.started_at, time.time() - begun)
        longest_s = max(longest_s, pass_s)
        if not budget.another_pass_fits(cfg.max_time_s, elapsed_s, longest_s):
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
    asked_s = budget.cost_s(asked, found, shape)
    planned_s = budget.cost_s(planned, found, shape)
    still = ""
    if found.elapsed_s + planned_s + budget.REPORT_S > max_time_s:
        still = f"; even this takes about {duration(planned_s)}: it cannot keep to the cap"
    print(
        f"colbench: p2p: a {format_size(found.size_bytes)} message takes {found.message_s:.3g} s "
        f"on the first step's pairs, so {asked.text()} would take about {duration(asked_s)}, past "
        f"--max-time {max_time_s:g} s: measuring {planned.text()} instead "
        f"({', '.join(budget.cuts(asked, planned))}){still}",
        file=sys.stderr,
        flush=True,
    )
