"""CudaGraphTimer logic with fake graphs and events (the real one runs in tests/gpu)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from colbench.bench import _Rotation
from colbench.timing import CudaGraphTimer


class FakeEvent:
    clock_ms = 0.0

    def __init__(self) -> None:
        self.at_ms: float | None = None
        self.synced = False

    def record(self) -> None:
        self.at_ms = FakeEvent.clock_ms

    def synchronize(self) -> None:
        self.synced = True

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.at_ms is not None and other.at_ms is not None
        return other.at_ms - self.at_ms


class FakeGraph:
    def __init__(self) -> None:
        self.captured: list[str] = []
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        # Each captured call takes 0.25 ms of "device" time.
        FakeEvent.clock_ms += 0.25 * len(self.captured)


def test_graph_timer_captures_the_batch_and_times_one_replay() -> None:
    graphs: list[FakeGraph] = []
    capturing: list[FakeGraph] = []
    events: list[FakeEvent] = []
    syncs: list[int] = []

    @contextlib.contextmanager
    def capture(graph: FakeGraph) -> Iterator[None]:
        capturing.append(graph)
        yield
        capturing.pop()

    def new_graph() -> FakeGraph:
        graphs.append(FakeGraph())
        return graphs[-1]

    def new_event() -> FakeEvent:
        events.append(FakeEvent())
        return events[-1]

    def call() -> None:
        # Calls happen only inside the capture, never eagerly.
        assert capturing, "collective issued outside the graph capture"
        capturing[-1].captured.append("all_reduce")

    timer = CudaGraphTimer(new_graph, capture, new_event, lambda: syncs.append(1))
    per_iter_us = timer.time_batch(call, 8)
    assert len(graphs) == 1 and graphs[0].captured == ["all_reduce"] * 8
    assert graphs[0].replays == 1
    assert per_iter_us == [250.0] * 8  # 8 * 0.25 ms / 8, in microseconds
    assert len(events) == 2 and events[1].synced
    assert syncs == [1]  # capture finished on the device before the timed replay


def test_rotation_cycles_through_buffer_sets() -> None:
    seen: list[int] = []
    rotation = _Rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        rotation()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
