"""Timers with fake clocks and fake CUDA events (colbench.bench.timing)."""

from __future__ import annotations

import pytest

from colbench.bench.cuda_timing import CudaEventTimer
from colbench.bench.timing import HostTimer


class ScriptedClock:
    """perf_counter_ns stand-in returning the given stamps in order."""

    def __init__(self, stamps_ns: list[int]) -> None:
        self.stamps = list(stamps_ns)
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.stamps.pop(0)


def test_host_timer_gives_each_iteration_in_microseconds() -> None:
    clock = ScriptedClock([1_000, 3_500, 4_500, 104_500])
    calls: list[int] = []
    times = HostTimer(clock_ns=clock).time_batch(lambda: calls.append(clock.reads), 3)
    assert times == [2.5, 1.0, 100.0]
    # One stamp before the batch, one after each call, and each call between two stamps.
    assert clock.reads == 4
    assert calls == [1, 2, 3]


def test_host_timer_batch_mean_is_total_over_iters() -> None:
    clock = ScriptedClock([0, 10_000, 30_000, 60_000, 100_000])
    times = HostTimer(clock_ns=clock).time_batch(lambda: None, 4)
    assert sum(times) / len(times) == pytest.approx(25.0)
    assert clock.stamps == []


def test_host_timer_synchronize_is_a_no_op() -> None:
    clock = ScriptedClock([])
    HostTimer(clock_ns=clock).synchronize()
    assert clock.reads == 0


class FakeEvent:
    """torch.cuda.Event stand-in: its 'time' is set by the fake stream when recorded."""

    def __init__(self, log: list[str], stream: FakeStream) -> None:
        self.log = log
        self.stream = stream
        self.at_ms: float | None = None
        self.records = 0
        self.syncs = 0

    def record(self) -> None:
        self.records += 1
        self.at_ms = self.stream.now_ms
        self.log.append("record")

    def synchronize(self) -> None:
        self.syncs += 1
        self.log.append("event-sync")

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at_ms is not None and end.at_ms is not None, "event never recorded"
        return end.at_ms - self.at_ms


class FakeStream:
    def __init__(self, durations_ms: list[float]) -> None:
        self.durations_ms = list(durations_ms)
        self.now_ms = 5.0

    def run_one(self) -> None:
        self.now_ms += self.durations_ms.pop(0)


def make_cuda_timer(
    durations_ms: list[float],
) -> tuple[CudaEventTimer, list, list[str], FakeStream]:
    log: list[str] = []
    stream = FakeStream(durations_ms)
    events: list[FakeEvent] = []

    def factory() -> FakeEvent:
        log.append("create")
        events.append(FakeEvent(log, stream))
        return events[-1]

    timer = CudaEventTimer(event_factory=factory, device_synchronize=lambda: log.append("device"))
    return timer, events, log, stream


def test_cuda_event_timer_per_iteration_microseconds() -> None:
    timer, events, log, stream = make_cuda_timer([0.25, 0.5, 0.125])

    def call() -> None:
        log.append("call")
        stream.run_one()

    times = timer.time_batch(call, 3)
    assert times == pytest.approx([250.0, 500.0, 125.0])
    assert len(events) == 4
    # torch.cuda.Event makes its CUDA event on the first record(): every event is made
    # and recorded once, and the device drained, before the batch; in the batch, one
    # record before the first call and one after each call.
    assert log[:9] == ["create"] * 4 + ["record"] * 4 + ["device"]
    assert log[9:] == ["record", "call", "record", "call", "record", "call", "record", "event-sync"]
    assert [e.records for e in events] == [2, 2, 2, 2]
    # One host sync, on the last event only; the device is not synchronised in the batch.
    assert [e.syncs for e in events] == [0, 0, 0, 1]


def test_cuda_event_timer_reuses_its_events() -> None:
    timer, events, log, stream = make_cuda_timer([0.1] * 5)

    def call() -> None:
        stream.run_one()

    timer.time_batch(call, 3)
    log.clear()
    timer.time_batch(call, 2)
    # A shorter batch takes events already made: nothing is created or warmed again.
    assert len(events) == 4
    assert log == ["record"] * 3 + ["event-sync"]


def test_cuda_event_timer_measures_the_host_enqueue_time() -> None:
    log: list[str] = []
    stream = FakeStream([0.01] * 4)
    clock = ScriptedClock([1_000_000, 1_000_000 + 4 * 40_000])
    timer = CudaEventTimer(
        event_factory=lambda: FakeEvent(log, stream),
        device_synchronize=lambda: None,
        clock_ns=clock,
    )
    assert timer.enqueue_us is None
    times = timer.time_batch(stream.run_one, 4)
    # 40 us of host time per call against 10 us of GPU time: the GPU waited on the host.
    assert timer.enqueue_us == pytest.approx(40.0)
    assert sum(times) / len(times) == pytest.approx(10.0)
    assert clock.reads == 2


def test_cuda_event_timer_synchronize_uses_the_device_sync() -> None:
    timer, events, log, _ = make_cuda_timer([])
    timer.synchronize()
    assert log == ["device"]
    assert events == []
