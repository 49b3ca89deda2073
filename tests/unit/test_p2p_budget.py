"""Keeping p2p to --max-time (colbench.commands.p2p.budget): a plan priced from a probe, cut in
the documented order, and the verdict's word on it."""

from __future__ import annotations

import pytest

from colbench.commands.p2p import budget
from colbench.commands.p2p.budget import Plan, Probe, Shape, cost_s, cuts, fit, passes_floor
from colbench.commands.p2p.options import DEFAULT_MAX_TIME_S
from colbench.commands.p2p.report import cut_lines
from colbench.commands.p2p.schedule import select

MIB = 1024**2
#: 64 MiB at 400 Mbit/s, 4 nodes one rank each: the issue's run.
PROBE = Probe(message_s=1.342, round_trip_s=0.001, barrier_s=0.002, size_bytes=64 * MIB,
              elapsed_s=8.0)  # fmt: skip
SHAPE = Shape(bandwidth_steps=6, latency_steps=6)
DEFAULTS = Plan(size_bytes=64 * MIB, warmup=5, iters=20, repeat=5)


def test_the_issues_run_is_priced_at_its_seventeen_minutes() -> None:
    assert cost_s(DEFAULTS, PROBE, SHAPE) == pytest.approx(1007, rel=0.01)


def test_a_plan_that_fits_is_left_alone() -> None:
    assert fit(DEFAULTS, PROBE, SHAPE, budget_s=2000, floor=3) == DEFAULTS


def test_the_default_cap_keeps_five_passes_and_cuts_messages_first() -> None:
    room = budget.budget_s(DEFAULT_MAX_TIME_S, PROBE.elapsed_s)
    planned = fit(DEFAULTS, PROBE, SHAPE, room, floor=3)
    # Warm-up to one message (it measures nothing), then timed messages: passes stay.
    assert planned == Plan(64 * MIB, warmup=1, iters=11, repeat=5)
    assert cost_s(planned, PROBE, SHAPE) <= room
    assert DEFAULT_MAX_TIME_S - (PROBE.elapsed_s + cost_s(planned, PROBE, SHAPE)) > 60
    assert cuts(DEFAULTS, planned) == ["warm-up messages 5 -> 1", "timed messages 20 -> 11"]


def test_a_tight_cap_takes_passes_to_the_verdicts_floor_then_the_size_then_the_rest() -> None:
    planned = fit(DEFAULTS, PROBE, SHAPE, budget_s=60, floor=3)
    assert (planned.warmup, planned.iters, planned.repeat) == (1, 5, 3)
    assert planned.size_bytes < 64 * MIB and cost_s(planned, PROBE, SHAPE) <= 60
    smallest = fit(DEFAULTS, PROBE, SHAPE, budget_s=0.001, floor=3)
    assert smallest == Plan(budget.MIN_SIZE_BYTES, warmup=1, iters=1, repeat=1)
    assert cuts(DEFAULTS, smallest)[-1] == "passes 5 -> 1"


def test_a_plan_asked_small_is_never_cut_up() -> None:
    asked = Plan(4 * MIB, warmup=1, iters=3, repeat=2)
    planned = fit(asked, PROBE, SHAPE, budget_s=0.001, floor=3)
    assert planned.iters <= 3 and planned.repeat <= 2 and planned.warmup == 1


def test_the_floor_is_what_the_verdict_needs() -> None:
    four = select(["a", "b", "c", "d"])
    assert passes_floor(four, ["a", "b", "c", "d"], fail_below=False) == 3
    assert passes_floor(four, ["a", "b", "c", "d"], fail_below=True) >= 3
    assert passes_floor(select(["a", "b", "c"]), ["a", "b", "c"], fail_below=False) == 1


def test_another_pass_runs_only_when_it_ends_before_the_report() -> None:
    assert budget.another_pass_fits(600, elapsed_s=400, pass_s=100)
    assert not budget.another_pass_fits(600, elapsed_s=500, pass_s=100)


def test_the_verdict_says_the_cut_and_old_runs_say_nothing() -> None:
    ran = Plan(64 * MIB, 1, 11, 5)
    plan = {"max_time_s": 600.0, "asked": DEFAULTS.__dict__, "ran": ran.__dict__,
            "cut": cuts(DEFAULTS, ran)}  # fmt: skip
    assert cut_lines(plan) == [
        "verdict: measured 5 passes x (1 warm-up + 11 timed) messages of 64M per ordered pair, "
        "cut from 5 passes x (5 warm-up + 20 timed) messages of 64M per ordered pair to keep "
        "to --max-time 600 s (warm-up messages 5 -> 1, timed messages 20 -> 11; meta.json's "
        "plan)"
    ]
    assert cut_lines({**plan, "cut": []}) == [] and cut_lines(None) == []


def test_the_cut_line_compares_the_runs_end_with_the_cap_not_the_passes_alone() -> None:
    # The review's runs: 1.3 s in at the probe, 4 gloo ranks. Passes of 5 s with a cap of
    # 6 s were said to be "past" it: the end they are compared with is stated now.
    said = budget.why_cut(asked_s=5.0, elapsed_s=1.3, max_time_s=6)
    assert "would take about 5 s, ending about 9.3 s after the start" in said
    assert "(1.3 s so far, 3 s allowed for the report), past --max-time 6 s" in said
    # Within the cap, but past what passes may fill of it: not said to be past it.
    close = budget.why_cut(asked_s=1.5, elapsed_s=1.3, max_time_s=6)
    assert "past --max-time" not in close and "within --max-time 6 s" in close


def test_a_cut_plan_priced_past_the_cap_says_by_how_much_and_never_0_s() -> None:
    # The review's --max-time 4: a 0.2 s plan read "even this takes about 0 s: it cannot
    # keep to the cap", and the run ended at 2.1 s.
    still = budget.still_over(planned_s=0.2, elapsed_s=1.33, max_time_s=4)
    assert "takes about 0.2 s and ends about 4.6 s after the start, past --max-time 4 s" in still
    assert "it may overrun the cap" in still and "cannot" not in still
    assert budget.still_over(planned_s=0.2, elapsed_s=0.5, max_time_s=4) == ""
    # Rounded up: an end just past the cap never reads as the cap itself.
    assert budget.about(4.01) == "4.1 s" and budget.about(0.3) == "0.3 s"
    assert budget.about(600.2) == "10 min 01 s"
