"""CudaGraphTimer with fake graphs, events and barrier (the real one runs in tests/gpu).

The fakes share one log, so the tests check the order and the target of every call:
what is captured, when the device is drained, where the ranks are aligned, which
replays are timed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from colbench.bench.cuda_timing import CudaGraphTimer
from colbench.bench.timing import rotation


class Device:
    """A fake GPU: a clock that replays advance, and the log every fake writes to."""

    def __init__(self, first_replay_ms: float, replay_ms: float) -> None:
        self.now_ms = 0.0
        self.log: list[str] = []
        self.replays = 0
        self.first_replay_ms = first_replay_ms
        self.replay_ms = replay_ms


class FakeEvent:
    def __init__(self, device: Device, index: int) -> None:
        self.device = device
        self.index = index
        self.at_ms: float | None = None

    def record(self) -> None:
        self.at_ms = self.device.now_ms
        self.device.log.append(f"record e{self.index}")

    def synchronize(self) -> None:
        self.device.log.append(f"sync e{self.index}")

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.at_ms is not None and other.at_ms is not None
        return other.at_ms - self.at_ms


class FakeGraph:
    def __init__(self, device: Device, index: int) -> None:
        self.device = device
        self.index = index
        self.captured = 0

    def replay(self) -> None:
        device = self.device
        device.log.append(f"replay g{self.index}")
        # A graph's first launch uploads it: slower than the ones after.
        device.now_ms += device.first_replay_ms if device.replays == 0 else device.replay_ms
        device.replays += 1


def make_timer(device: Device, replays: int = 3) -> CudaGraphTimer:
    graphs: list[FakeGraph] = []
    events: list[FakeEvent] = []

    @contextlib.contextmanager
    def capture(graph: FakeGraph) -> Iterator[None]:
        device.log.append(f"capture g{graph.index} begin")
        yield
        device.log.append(f"capture g{graph.index} end")

    def new_graph() -> FakeGraph:
        graphs.append(FakeGraph(device, len(graphs)))
        return graphs[-1]

    def new_event() -> FakeEvent:
        events.append(FakeEvent(device, len(events)))
        return events[-1]

    return CudaGraphTimer(
        barrier=lambda: device.log.append("barrier"),
        graph_factory=new_graph,
        capture=capture,
        event_factory=new_event,
        device_synchronize=lambda: device.log.append("device sync"),
        replays=replays,
    )


def test_capture_barrier_untimed_replay_barrier_then_timed_replays() -> None:
    device = Device(first_replay_ms=3.0, replay_ms=0.5)
    timer = make_timer(device, replays=3)
    per_call_us = timer.time_batch(lambda: device.log.append("call"), 4)
    assert device.log == [
        "capture g0 begin", "call", "call", "call", "call", "capture g0 end",
        # Capture is finished on every rank before any rank replays.
        "device sync", "barrier",
        # The first launch is untimed, then the ranks start the timed replays together.
        "replay g0", "device sync", "barrier",
        # The timer's events are made and recorded once before they time anything.
        "record e0", "record e1", "record e2", "record e3", "device sync",
        "record e0", "replay g0", "record e1", "replay g0", "record e2", "replay g0",
        "record e3", "sync e3",
    ]  # fmt: skip
    # Three replays of 4 calls in 0.5 ms each: 125 us per call, for each of the 12 calls;
    # the 3 ms first launch is nowhere in it.
    assert per_call_us == [125.0] * 12


def test_the_batch_length_does_not_change_the_time_per_call() -> None:
    # On the H100, -n 20 read 3.42 us per call and --time-budget 1.08 us: the first,
    # slow launch was timed and divided by the batch length.
    means = []
    for iters in (5, 50):
        device = Device(first_replay_ms=1.0, replay_ms=0.01 * iters)
        times = make_timer(device).time_batch(lambda: None, iters)
        means.append(sum(times) / len(times))
    assert means == pytest.approx([10.0, 10.0])


def test_verification_runs_a_replayed_graph_of_one_call() -> None:
    device = Device(first_replay_ms=0.1, replay_ms=0.1)
    timer = make_timer(device)
    timer.run_once(lambda: device.log.append("call"))
    assert device.log == [
        "capture g0 begin", "call", "capture g0 end", "device sync", "replay g0"
    ]  # fmt: skip


def test_rotation_cycles_through_buffer_sets() -> None:
    seen: list[int] = []
    rotate = rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        rotate()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
