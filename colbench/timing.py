"""Timers: how one batch of calls is timed on each device.

Both timers take a callable that issues exactly one collective and return the
duration of each iteration in microseconds; the batch mean is their sum / iters, so
per-iteration stamps cost nothing extra. Nothing but the calls sits between stamps.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        """Run ``call`` ``iters`` times back to back; microseconds per iteration."""
        ...

    def synchronize(self) -> None:
        """Wait until all queued device work is done (no-op on CPU)."""
        ...


class HostTimer:
    """CPU (gloo): blocking calls bracketed by ``time.perf_counter_ns``."""

    def __init__(self, clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self._clock_ns = clock_ns

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        clock = self._clock_ns
        # As timeit does: a garbage collection inside the batch would be timed as if the
        # collective were slower.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            stamps = [clock()]
            for _ in range(iters):
                call()
                stamps.append(clock())
        finally:
            if gc_was_enabled:
                gc.enable()
        return [(b - a) / 1e3 for a, b in itertools.pairwise(stamps)]

    def synchronize(self) -> None:
        pass


class CudaEventTimer:
    """GPU (NCCL): CUDA events recorded on the current stream around and between calls.

    torch's blocking collectives make the current stream wait for the NCCL stream, so
    an event recorded after a call completes when the collective has. One host sync at
    the end, after the whole batch, keeps the host out of the measurement.
    """

    def __init__(
        self,
        event_factory: Callable[[], Any] | None = None,
        device_synchronize: Callable[[], None] | None = None,
    ) -> None:
        if event_factory is None or device_synchronize is None:
            import torch

            event_factory = event_factory or (lambda: torch.cuda.Event(enable_timing=True))
            device_synchronize = device_synchronize or torch.cuda.synchronize
        self._new_event = event_factory
        self._device_synchronize = device_synchronize

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        # Events are created before the first one is recorded: creation is not free.
        events = [self._new_event() for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            call()
            events[i + 1].record()
        events[-1].synchronize()
        # elapsed_time is in milliseconds.
        return [a.elapsed_time(b) * 1e3 for a, b in itertools.pairwise(events)]

    def synchronize(self) -> None:
        self._device_synchronize()


class CudaGraphTimer:
    """GPU (NCCL), ``--cuda-graph``: the whole batch captured in one CUDA graph, replayed
    between two events (nccl-tests' -G).

    Replaying a graph removes the per-call launch cost from the host, which is what
    dominates small-message latency. Capture happens before the timed replay and is not
    timed. A graph replay has no per-call events, so every iteration reports the mean.
    """

    def __init__(
        self,
        graph_factory: Callable[[], Any] | None = None,
        capture: Callable[[Any], Any] | None = None,
        event_factory: Callable[[], Any] | None = None,
        device_synchronize: Callable[[], None] | None = None,
    ) -> None:
        if None in (graph_factory, capture, event_factory, device_synchronize):
            import torch

            graph_factory = graph_factory or torch.cuda.CUDAGraph
            capture = capture or torch.cuda.graph
            event_factory = event_factory or (lambda: torch.cuda.Event(enable_timing=True))
            device_synchronize = device_synchronize or torch.cuda.synchronize
        assert graph_factory and capture and event_factory and device_synchronize
        self._new_graph = graph_factory
        self._capture = capture
        self._new_event = event_factory
        self._device_synchronize = device_synchronize

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        graph = self._new_graph()
        with self._capture(graph):
            for _ in range(iters):
                call()
        self._device_synchronize()
        start, end = self._new_event(), self._new_event()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        mean_us = start.elapsed_time(end) * 1e3 / iters
        return [mean_us] * iters

    def synchronize(self) -> None:
        self._device_synchronize()
