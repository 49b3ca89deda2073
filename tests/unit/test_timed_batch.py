"""colbench.bench.timing.timed_batch, the one timed loop of sweep, p2p and health: the
order of warm-up, barrier and batch, ranks that take no part, the longer batch of a
budget, and what the gather carries. The host clock times real calls; the side group is
a recording stand-in (its real barrier and gather are colbench.bench.groups')."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from colbench.bench.timing import Batch, HostTimer, timed_batch


class Side:
    """One rank's side group; the gather answers with this rank's values and another
    rank's, given."""

    def __init__(self, log: list[str], other: list[float] | None = None) -> None:
        self.log = log
        self.other = other

    def barrier(self) -> None:
        self.log.append("barrier")

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        self.log.append(f"gather {len(values)}")
        return [values] if self.other is None else [values, self.other]


class Timer(HostTimer):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def synchronize(self) -> None:
        self.log.append("sync")


def _call(log: list[str]) -> Callable[[], object]:
    return lambda: log.append("call")


def test_warm_up_then_barrier_then_the_batch_then_every_ranks_times() -> None:
    log: list[str] = []
    other = [5.0, 6.0, 7.0, math.nan, 40.0, 1.0]
    every = timed_batch(Side(log, other), Timer(log), _call(log), 3, warmup=2, say=log.append)
    assert log == [
        "warm-up", "call", "call", "sync", "timed batch", "barrier", "call", "call", "call",
        "combining times", "gather 6",
    ]  # fmt: skip
    mine, theirs = every
    assert len(mine.times_us) == 3 and all(t > 0 for t in mine.times_us)
    assert mine.enqueue_us is None and mine.wait_us >= 0 and mine.starved_us >= 0
    assert theirs == Batch([5.0, 6.0, 7.0], None, 40.0, 1.0)
    assert Batch.of_floats(Batch([1.0], 2.5, 3.0, 0.0).floats()) == Batch([1.0], 2.5, 3.0, 0.0)


def test_barrier_first_waits_before_the_warm_up() -> None:
    log: list[str] = []
    (mine,) = timed_batch(
        Side(log), Timer(log), _call(log), 2, warmup=1, gather=False, barrier_first=True
    )
    assert log == ["barrier", "call", "sync", "call", "call"]
    assert len(mine.times_us) == 2


@pytest.mark.parametrize("barrier_first", [False, True])
def test_a_rank_that_takes_no_part_only_waits_and_agrees(barrier_first: bool) -> None:
    log: list[str] = []
    agreed: list[list[float]] = []

    def longer(times_us: list[float]) -> int:
        agreed.append(times_us)
        return 10

    (mine,) = timed_batch(
        Side(log), Timer(log), None, 1, warmup=3, longer=longer, gather=False,
        barrier_first=barrier_first,
    )  # fmt: skip
    assert log == ["barrier", "barrier"]
    assert agreed == [[]] and mine.times_us == [] and mine.enqueue_us is None


@pytest.mark.parametrize(("more", "timed"), [(5, 5), (3, 3), (0, 3)])
def test_a_longer_batch_replaces_the_first_only_when_longer(more: int, timed: int) -> None:
    log: list[str] = []
    seen: list[int] = []

    def longer(times_us: list[float]) -> int:
        seen.append(len(times_us))
        return more

    (mine,) = timed_batch(Side(log), Timer(log), _call(log), 3, longer=longer, gather=False)
    assert seen == [3] and len(mine.times_us) == timed
    assert log.count("barrier") == (2 if more > 3 else 1)
    assert log.count("call") == 3 + (more if more > 3 else 0)
