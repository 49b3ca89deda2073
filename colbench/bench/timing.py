"""Timers: how one batch of calls is timed on each device, and how long each rank waited
for the others in the side group's barrier just before it (rank skew).

Every timer takes a callable that issues exactly one collective and returns the
duration of each timed iteration in microseconds; the batch mean is their sum over
their count, so per-iteration stamps cost nothing extra. Nothing but the calls sits
between stamps.

The GPU timers are :mod:`colbench.bench.cuda_timing`, loaded only where a rank has a GPU.

The barrier's wait is less the time the rank was itself starved of CPU in there; what
the waits mean (the straggler of a row, the skew, the run's straggler test) and
per_rank.csv are :mod:`colbench.results.reporters.stragglers`.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from colbench.bench.schedstat import (
    THREADS,
    BarrierThreads,
    run_delays_ns,
    starved_ns,
    thread_run_delays_ns,
)


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
    from colbench.bench.cuda_timing import CudaEventTimer, CudaGraphTimer

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
