"""Rank skew, measured: how long each rank waited for the others in the side group's
barrier before a timed batch, less the time it was itself starved of CPU in there.

What the waits mean (the straggler of a row, the skew, the run's straggler test) and
per_rank.csv are :mod:`colbench.results.reporters.stragglers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from colbench.bench.schedstat import (
    THREADS,
    BarrierThreads,
    run_delays_ns,
    starved_ns,
    thread_run_delays_ns,
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
