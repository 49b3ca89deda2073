"""GPU timers: CUDA events around and between calls, or around the replays of a captured
CUDA graph (--cuda-graph), so that one host sync after the batch keeps the host out of it.

``enqueue_us`` is the host's time per call to hand the batch to the GPU: near the GPU's
time per call, the GPU waited for the host, and the row measures torch's launch cost.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable
from typing import Any

#: Timed replays of a captured graph (nccl-tests launches its graph several times too).
GRAPH_REPLAYS = 5


class _EventTimer:
    """What both GPU timers share: events recorded between launches, one host sync after.

    ``torch.cuda.Event`` creates its CUDA event on the first ``record()``: recording a
    fresh event inside the batch would time the event's creation with the collective, so
    :meth:`_take` makes and records events once, before any timed batch uses them.
    """

    enqueue_us: float | None = None

    def __init__(
        self,
        event_factory: Callable[[], Any] | None = None,
        device_synchronize: Callable[[], None] | None = None,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if event_factory is None or device_synchronize is None:
            import torch

            event_factory = event_factory or (lambda: torch.cuda.Event(enable_timing=True))
            device_synchronize = device_synchronize or torch.cuda.synchronize
        self._new_event = event_factory
        self._device_synchronize = device_synchronize
        self._clock_ns = clock_ns
        self._events: list[Any] = []

    def _take(self, count: int) -> list[Any]:
        if len(self._events) < count:
            fresh = [self._new_event() for _ in range(count - len(self._events))]
            for event in fresh:
                event.record()
            self._device_synchronize()
            self._events.extend(fresh)
        return self._events[:count]

    def _launches(self, launch: Callable[[], object], count: int) -> tuple[list[float], float]:
        """``count`` launches with an event between each two: the GPU time of each launch,
        and the host's time to hand them all over, both in microseconds."""
        events = self._take(count + 1)
        started_ns = self._clock_ns()
        events[0].record()
        for event in events[1:]:
            launch()
            event.record()
        host_us = (self._clock_ns() - started_ns) / 1e3
        events[count].synchronize()
        # elapsed_time is in milliseconds.
        return [a.elapsed_time(b) * 1e3 for a, b in itertools.pairwise(events)], host_us

    def synchronize(self) -> None:
        self._device_synchronize()


class CudaEventTimer(_EventTimer):
    """GPU (NCCL): CUDA events recorded on the current stream around and between calls.

    torch's blocking collectives make the current stream wait for the NCCL stream, so
    an event recorded after a call completes when the collective has. One host sync at
    the end, after the whole batch, keeps the host out of the measurement.
    """

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        per_call_us, host_us = self._launches(call, iters)
        self.enqueue_us = host_us / iters
        return per_call_us

    def run_once(self, call: Callable[[], object]) -> None:
        call()


class CudaGraphTimer(_EventTimer):
    """GPU (NCCL), ``--cuda-graph``: the batch captured in one CUDA graph and replayed
    (nccl-tests' -G).

    A replay launches every captured call at once, which removes torch's per-call launch
    cost from small-message latency. As nccl-tests: capture, align the ranks (capture
    takes each a different time), replay once untimed (the first launch uploads the
    graph), align again, time ``replays`` launches (-G N), each one mean per call.
    """

    def __init__(
        self,
        barrier: Callable[[], None],
        graph_factory: Callable[[], Any] | None = None,
        capture: Callable[[Any], Any] | None = None,
        event_factory: Callable[[], Any] | None = None,
        device_synchronize: Callable[[], None] | None = None,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        replays: int = GRAPH_REPLAYS,
    ) -> None:
        if graph_factory is None or capture is None:
            import torch

            graph_factory = graph_factory or torch.cuda.CUDAGraph
            capture = capture or torch.cuda.graph
        super().__init__(event_factory, device_synchronize, clock_ns)
        self._barrier = barrier
        self._new_graph = graph_factory
        self._capture = capture
        self._replays = replays

    def _captured(self, call: Callable[[], object], iters: int) -> Any:
        graph = self._new_graph()
        with warnings.catch_warnings():
            # A collective with nothing to move (in-place all_gather on one rank) launches
            # no kernel, and torch warns that the graph is empty: expected here.
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
            with self._capture(graph):
                for _ in range(iters):
                    call()
        self._device_synchronize()
        return graph

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        graph = self._captured(call, iters)
        self._barrier()
        graph.replay()
        self._device_synchronize()
        self._barrier()
        per_replay_us, host_us = self._launches(graph.replay, self._replays)
        self.enqueue_us = host_us / (iters * self._replays)
        return [replay_us / iters for replay_us in per_replay_us for _ in range(iters)]

    def run_once(self, call: Callable[[], object]) -> None:
        # Verification checks what a replayed graph wrote, not what an eager call would.
        self._captured(call, 1).replay()
