"""The per-rank loop's order of calls, with recording fakes for everything it talks to.

RankBench runs here against a fake side group, a fake progress store, a fake timer
and a recording collective, all writing to one log, so the tests check the order and
the target of every call: what the measured op does, what goes to the side group, and
what is published to the parent's store and when.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from colbench.bench.groups import Groups
from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.ops.base import Buffers, Collective, Context, Layout, whole_buffer
from colbench.bench.plan import RunInfo, plan
from colbench.config.model import SweepConfig
from colbench.host.job import InFlight


class Log(list[str]):
    pass


class FakeSide:
    """The side group of a world of one: records every bookkeeping call."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.world_size = 1

    def barrier(self) -> None:
        self.log.append("side.barrier")

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        self.log.append(f"side.gather_floats({len(values)})")
        return [values]

    def min_int(self, value: int) -> int:
        self.log.append(f"side.min_int({value})")
        return value

    def sum_int(self, value: int) -> int:
        self.log.append(f"side.sum_int({value})")
        return value

    def max_float(self, value: float) -> float:
        self.log.append("side.max_float")
        return value


class FakeStore:
    def __init__(self, log: Log) -> None:
        self.log = log

    def set(self, key: str, value: str) -> None:
        self.log.append(f"store.set {value.split('|')[-1]}")


class FakeTimer:
    def __init__(self, log: Log, per_call_us: float, enqueue_us: float | None) -> None:
        self.log = log
        self.per_call_us = per_call_us
        self.enqueue_us: float | None = None
        self._enqueue_us = enqueue_us

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        self.log.append(f"timer.time_batch({iters})")
        for _ in range(iters):
            call()
        self.enqueue_us = self._enqueue_us
        return [self.per_call_us] * iters

    def run_once(self, call: Callable[[], object]) -> None:
        self.log.append("timer.run_once")
        call()

    def synchronize(self) -> None:
        self.log.append("timer.synchronize")


class Recorded(Collective):
    """A collective whose every step is logged (the real ones need a process group)."""

    name = "all_reduce"
    summary = size_rule = count_rule = busbw_rule = torch_call = "recorded"
    placements = ("in",)

    def __init__(self, log: Log) -> None:
        self.log = log

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        return whole_buffer(requested_bytes, elem_bytes)

    def busbw_factor(self, world_size: int) -> float:
        return 1.0

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        self.log.append("op.fill")

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        return functools.partial(self.log.append, "op.call")

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        self.log.append("op.count_wrong")
        return 0


class Rows:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def rows(self, coll: Collective, rows: list[dict[str, Any]]) -> None:
        self.written.extend(rows)

    def note(self, message: str) -> None:
        self.notes.append(message)


def run_bench(
    cfg: SweepConfig, log: Log, per_call_us: float = 10.0, enqueue_us: float | None = None
) -> Rows:
    op = Recorded(log)
    work = [w.__class__(**{**w.__dict__, "coll": op}) for w in plan(cfg, 1, "gloo")]
    flight = InFlight(store=FakeStore(log))
    sink = Rows()
    info = RunInfo("t", "gloo", "cpu", world_size=1, nnodes=1)
    groups = Groups(FakeSide(log))  # type: ignore[arg-type]
    timer = FakeTimer(log, per_call_us, enqueue_us)
    RankBench(
        BenchContext(cfg, info, 0, torch.device("cpu"), timer, groups, flight),
        sink,
    ).run(work)
    return sink


def test_one_row_in_order() -> None:
    log = Log()
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=3, warmup=2)
    run_bench(cfg, log)
    assert log == [
        "store.set allocation", "side.min_int(1)",
        "store.set fill", "op.fill", "store.set warm-up", "op.call", "op.call",
        "timer.synchronize",
        # Progress goes to the store before the barrier: nothing but the barrier sits
        # between the ranks' alignment and the first timestamp.
        "store.set timed batch", "side.barrier", "timer.time_batch(3)",
        "op.call", "op.call", "op.call",
        # 3 iteration times, the enqueue time, the barrier's wait and CPU starvation.
        "store.set combining times", "side.gather_floats(6)",
        # Verification runs the way the batch ran (a replayed graph under -G).
        "store.set verification", "op.fill", "timer.run_once", "op.call",
        "timer.synchronize", "op.count_wrong", "side.sum_int(0)",
    ]  # fmt: skip


def test_time_budget_publishes_before_its_second_barrier() -> None:
    log = Log()
    cfg = SweepConfig.of(
        ops=("all_reduce",), sizes_bytes=(1024,), iters=2, warmup=0, check=False,
        time_budget_s=0.0001,
    )  # fmt: skip
    run_bench(cfg, log, per_call_us=10.0)
    timed = log[log.index("timer.synchronize") :]
    assert timed[:9] == [
        "timer.synchronize",
        "store.set timed batch", "side.barrier", "timer.time_batch(2)", "op.call", "op.call",
        "side.max_float",
        "store.set timed batch", "side.barrier",
    ]  # fmt: skip
    # 100 us at 10 us per call: a batch of 10.
    assert timed[9] == "timer.time_batch(10)"


@pytest.mark.parametrize(("enqueue_us", "expected"), [(None, None), (5.0, 0), (9.0, 1), (12.0, 1)])
def test_host_bound_rows(enqueue_us: float | None, expected: int | None) -> None:
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=2, warmup=0)
    (row,) = run_bench(cfg, Log(), per_call_us=10.0, enqueue_us=enqueue_us).written
    assert row["host_bound"] == expected
    if enqueue_us is None:
        assert row["enqueue_us"] is None
    else:
        assert math.isclose(row["enqueue_us"], enqueue_us)


class WrongOnPass(Recorded):
    """A recorded collective whose verification finds ``wrong[i]`` elements on pass i."""

    def __init__(self, log: Log, wrong: list[int]) -> None:
        super().__init__(log)
        self.wrong = wrong

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        self.log.append("op.count_wrong")
        return self.wrong.pop(0)


@pytest.mark.parametrize(
    ("passes", "wrong", "expected_passes", "expected_wrong"),
    [(3, [0, 0, 0], 3, 0), (3, [0, 7, 0], 2, 7), (1, [0], 1, 0), (0, [], 0, None)],
)
def test_check_passes_like_nccl_tests(
    passes: int, wrong: list[int], expected_passes: int, expected_wrong: int | None
) -> None:
    """nccl-tests' -c N: N passes of fill, one call, verify; the first wrong pass ends them
    and its count is the row's; -c 0 verifies nothing."""
    log = Log()
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=1, warmup=0, check=passes)
    op = WrongOnPass(log, wrong)
    work = [w.__class__(**{**w.__dict__, "coll": op}) for w in plan(cfg, 1, "gloo")]
    sink = Rows()
    RankBench(
        BenchContext(
            cfg,
            RunInfo("t", "gloo", "cpu", world_size=1, nnodes=1),
            0,
            torch.device("cpu"),
            FakeTimer(log, 10.0, None),
            Groups(FakeSide(log)),  # type: ignore[arg-type]
            InFlight(store=FakeStore(log)),
        ),
        sink,
    ).run(work)
    assert log.count("store.set verification") == expected_passes
    assert log.count("op.count_wrong") == expected_passes
    assert [row["wrong"] for row in sink.written] == [expected_wrong]
