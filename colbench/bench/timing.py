"""Timers: how one batch of calls is timed on each device, and how long each rank waited
for the others in the side group's barrier just before it (rank skew).

Every timer takes a callable that issues exactly one collective and returns the
duration of each timed iteration in microseconds; the batch mean is their sum over
their count, so per-iteration stamps cost nothing extra. Nothing but the calls sits
between stamps.

GPU timers also measure the host's side: ``enqueue_us`` is the host time per call
spent handing the batch to the GPU. When it is close to the GPU time per call, the GPU
was waiting for the host, and the row measures torch's launch cost, not the network.

The barrier's wait is less the time the rank was itself starved of CPU in there; what
the waits mean (the straggler of a row, the skew, the run's straggler test) and
per_rank.csv are :mod:`colbench.results.reporters.stragglers`.
"""

from __future__ import annotations

import gc
import itertools
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from colbench.bench.schedstat import (
    THREADS,
    BarrierThreads,
    run_delays_ns,
    starved_ns,
    thread_run_delays_ns,
)

#: Timed replays of a captured graph (nccl-tests launches its graph several times too).
GRAPH_REPLAYS = 5


class _Rotation:
    """Calls each buffer set's collective in turn (``--rotate``)."""

    __slots__ = ("_calls", "_next")

    def __init__(self, calls: Sequence[Any]) -> None:
        self._calls = tuple(calls)
        self._next = 0

    def __call__(self) -> None:
        self._calls[self._next % len(self._calls)]()
        self._next += 1


class Timer(Protocol):
    #: Host time per call to enqueue the last batch, microseconds; None where calls block.
    enqueue_us: float | None

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        """Run ``call`` ``iters`` times back to back; microseconds per timed iteration."""
        ...

    def run_once(self, call: Callable[[], object]) -> None:
        """Run ``call`` once the way timed batches run it (the result is verified)."""
        ...

    def synchronize(self) -> None:
        """Wait until all queued device work is done (no-op on CPU)."""
        ...


class HostTimer:
    """CPU (gloo): blocking calls bracketed by ``time.perf_counter_ns``."""

    enqueue_us: float | None = None

    def __init__(self, clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self._clock_ns = clock_ns

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        clock = self._clock_ns
        # As timeit does: a garbage collection inside the batch would be timed as if the
        # collective were slower.
        gc_was_enabled = gc.isenabled()
        # The stamps' list is made before the batch and filled by index: an append per
        # call costs the loop a third more than the store (benchmarks/harness_overhead.py).
        stamps = [0] * (iters + 1)
        gc.disable()
        try:
            stamps[0] = clock()
            for i in range(1, iters + 1):
                call()
                stamps[i] = clock()
        finally:
            if gc_was_enabled:
                gc.enable()
        return [(b - a) / 1e3 for a, b in itertools.pairwise(stamps)]

    def run_once(self, call: Callable[[], object]) -> None:
        call()

    def synchronize(self) -> None:
        pass


class _EventPool:
    """CUDA events made and recorded once before any timed batch uses them.

    ``torch.cuda.Event`` creates its CUDA event on the first ``record()``: recording a
    fresh event inside the batch would time the event's creation with the collective.
    """

    def __init__(self, new_event: Callable[[], Any], device_synchronize: Callable[[], None]):
        self._new_event = new_event
        self._device_synchronize = device_synchronize
        self._events: list[Any] = []

    def take(self, count: int) -> list[Any]:
        if len(self._events) < count:
            fresh = [self._new_event() for _ in range(count - len(self._events))]
            for event in fresh:
                event.record()
            self._device_synchronize()
            self._events.extend(fresh)
        return self._events[:count]


def _cuda_defaults(
    event_factory: Callable[[], Any] | None, device_synchronize: Callable[[], None] | None
) -> tuple[Callable[[], Any], Callable[[], None]]:
    if event_factory is not None and device_synchronize is not None:
        return event_factory, device_synchronize
    import torch

    return (
        event_factory or (lambda: torch.cuda.Event(enable_timing=True)),
        device_synchronize or torch.cuda.synchronize,
    )


class CudaEventTimer:
    """GPU (NCCL): CUDA events recorded on the current stream around and between calls.

    torch's blocking collectives make the current stream wait for the NCCL stream, so
    an event recorded after a call completes when the collective has. One host sync at
    the end, after the whole batch, keeps the host out of the measurement.
    """

    enqueue_us: float | None = None

    def __init__(
        self,
        event_factory: Callable[[], Any] | None = None,
        device_synchronize: Callable[[], None] | None = None,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        new_event, self._device_synchronize = _cuda_defaults(event_factory, device_synchronize)
        self._events = _EventPool(new_event, self._device_synchronize)
        self._clock_ns = clock_ns

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        events = self._events.take(iters + 1)
        started_ns = self._clock_ns()
        events[0].record()
        for i in range(iters):
            call()
            events[i + 1].record()
        self.enqueue_us = (self._clock_ns() - started_ns) / 1e3 / iters
        events[iters].synchronize()
        # elapsed_time is in milliseconds.
        return [a.elapsed_time(b) * 1e3 for a, b in itertools.pairwise(events[: iters + 1])]

    def run_once(self, call: Callable[[], object]) -> None:
        call()

    def synchronize(self) -> None:
        self._device_synchronize()


class CudaGraphTimer:
    """GPU (NCCL), ``--cuda-graph``: the batch captured in one CUDA graph and replayed
    (nccl-tests' -G).

    A replay launches every captured call at once, which removes torch's per-call
    launch cost from small-message latency. In the order nccl-tests uses: capture,
    let every rank finish capturing (capture takes each rank a different time),
    replay once untimed (a graph's first launch uploads it to the device and is
    slower), align the ranks again, then time ``replays`` launches (-G N). Each
    replay yields one mean per call, reported for each of its calls.
    """

    enqueue_us: float | None = None

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
        new_event, self._device_synchronize = _cuda_defaults(event_factory, device_synchronize)
        self._barrier = barrier
        self._new_graph = graph_factory
        self._capture = capture
        self._events = _EventPool(new_event, self._device_synchronize)
        self._clock_ns = clock_ns
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
        events = self._events.take(self._replays + 1)
        started_ns = self._clock_ns()
        events[0].record()
        for i in range(self._replays):
            graph.replay()
            events[i + 1].record()
        self.enqueue_us = (self._clock_ns() - started_ns) / 1e3 / (iters * self._replays)
        events[self._replays].synchronize()
        per_call_us = [
            a.elapsed_time(b) * 1e3 / iters
            for a, b in itertools.pairwise(events[: self._replays + 1])
        ]
        return [mean for mean in per_call_us for _ in range(iters)]

    def run_once(self, call: Callable[[], object]) -> None:
        # Verification checks what a replayed graph wrote, not what an eager call would.
        self._captured(call, 1).replay()

    def synchronize(self) -> None:
        self._device_synchronize()


def make_timer(
    device_type: str, cuda_graph: int, barrier: Callable[[], None], stream: Any = None
) -> Timer:
    """Host clock on CPU; CUDA events on GPU, around a replayed graph with --cuda-graph
    (``cuda_graph``: the timed replays; 0: none).

    ``barrier`` aligns the ranks between graph capture and the timed replays (a side
    group's barrier: the measured group carries nothing but the measured op).
    ``stream``: the direct engine's (colbench.direct.engine), current for the whole run,
    so the events are recorded on it already; a graph must be captured on it too, since
    its calls name that stream (torch captures on a side stream of its own otherwise).
    """
    if device_type != "cuda":
        return HostTimer()
    if not cuda_graph:
        return CudaEventTimer()
    if stream is None:
        return CudaGraphTimer(barrier, replays=cuda_graph)
    import functools

    import torch

    capture = functools.partial(torch.cuda.graph, stream=stream)
    return CudaGraphTimer(
        barrier, graph_factory=torch.cuda.CUDAGraph, capture=capture, replays=cuda_graph
    )


T = TypeVar("T")


def wait_in(
    barrier: Callable[[], None], then: Callable[[], T], threads: BarrierThreads | None = None
) -> tuple[T, tuple[float, float]]:
    """Pass ``barrier``, then run ``then`` at once: (what ``then`` returned, (time
    waiting for the others, time starved of CPU) in us).

    The wall time inside the barrier counts this rank's own stalls too: a rank throttled
    after it arrived leaves late although nobody waited for it, and would look early.
    Its CPU starvation inside the barrier (:func:`starved_ns`) is its own delay, not a
    wait for the others, so it is taken out (0 where the kernel does not say).

    ``then`` is the timed batch: between the barrier's return and ``then`` run only a
    clock read and one pread per barrier thread, of files opened before the barrier;
    the snapshots are parsed after ``then``. The snapshot at the barrier's exit cannot
    move after ``then``: run delay is a running total, and the batch's own starvation
    could not be told apart from the barrier's, nor measured without that snapshot.
    """
    threads = THREADS if threads is None else threads
    before = thread_run_delays_ns(threads)
    entered_ns = time.perf_counter_ns()
    barrier()
    wall_ns = time.perf_counter_ns() - entered_ns
    left = threads.read() if before is not None else None
    result = then()
    starved = min(wall_ns, max(0, starved_ns(before, run_delays_ns(left))))
    return result, ((wall_ns - starved) / 1e3, starved / 1e3)
