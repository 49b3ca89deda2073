"""Timers: how one batch of calls is timed on each device, and how long each rank waited
for the others in the side group's barrier just before it (rank skew), less the time it
was itself starved of CPU in there (Linux schedstat's run delay).

Every timer returns each timed call's duration in microseconds: the batch mean is their
sum over their count, so per-call stamps cost nothing extra, and nothing but the calls
sits between stamps. The GPU timers are :mod:`colbench.bench.cuda_timing`, loaded only
where a rank has a GPU; what the waits mean is :mod:`colbench.results.reporters.stragglers`.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


def rotation(calls: Sequence[Callable[[], object]]) -> Callable[[], object]:
    """A call that calls each buffer set's collective in turn (``--rotate``)."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


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
    (``cuda_graph``: the timed replays; 0: none). ``barrier`` aligns the ranks between
    graph capture and the timed replays. ``stream``: the direct engine's, current for the
    whole run; a graph must be captured on it, since its calls name that stream (torch
    captures on a side stream of its own otherwise)."""
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

    A rank throttled after it arrived leaves late although nobody waited for it: its
    CPU starvation inside the barrier (:func:`starved_ns`) is its own delay, so it is
    taken out of the wait (0 where the kernel does not say).

    ``then`` is the timed batch: between the barrier's return and ``then`` run only a
    clock read and one pread per barrier thread (files opened before the barrier); the
    snapshots are parsed after ``then``. The exit snapshot cannot move after ``then``:
    run delay is a running total, which would then hold the batch's starvation too.
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


class BatchSide(Protocol):
    """What a timed batch asks of the side group (colbench.bench.groups.SideGroup)."""

    def barrier(self) -> None: ...

    def gather_floats(self, values: list[float]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Batch:
    """One rank's timed batch, in us: per-call times, the host's time per call to enqueue
    them (None where calls block), and its wait for the others and CPU starvation in the
    barrier before it (:func:`wait_in`)."""

    times_us: list[float]
    enqueue_us: float | None
    wait_us: float
    starved_us: float

    def floats(self) -> list[float]:
        """What one gather carries (NaN for no enqueue time)."""
        enqueue_us = math.nan if self.enqueue_us is None else self.enqueue_us
        return [*self.times_us, enqueue_us, self.wait_us, self.starved_us]

    @classmethod
    def of_floats(cls, values: Sequence[float]) -> Batch:
        enqueue_us = values[-3]
        return cls(list(values[:-3]), None if math.isnan(enqueue_us) else enqueue_us, *values[-2:])


def timed_batch(
    side: BatchSide,
    timer: Timer,
    call: Callable[[], object] | None,
    iters: int,
    *,
    warmup: int = 0,
    longer: Callable[[list[float]], int] | None = None,
    gather: bool = True,
    barrier_first: bool = False,
    synchronize: Callable[[], None] | None = None,
    say: Callable[[str], None] = lambda _what: None,
    tick: Callable[[], None] = lambda: None,
) -> list[Batch]:
    """The heart of every timed measurement (sweep, p2p, health), every rank alike: warm
    up ``warmup`` calls, synchronize, wait for the others at the side group's barrier
    (:func:`wait_in`), time ``iters`` calls with ``timer``, gather every rank's batch.

    ``call``: None where this rank takes no part (a p2p step's other ranks): it only
    waits at the barriers. ``longer``: given the batch's times, the iterations every rank
    agreed on for a longer batch, timed in its place when more (a time budget).
    ``gather``: False keeps the batch to this rank (a one-element list); else every
    rank's, in rank order. ``barrier_first``: wait before the warm-up, not after it, so
    a step's calls never overlap the previous step's timed ones (p2p's pairs).
    ``synchronize``: the device's, where ``timer`` is the host clock of a blocking op.
    ``say``/``tick``: progress (the hang watchdog's) and COLBENCH_FAULT's count.
    """

    def warm_up() -> None:
        say("warm-up")
        if call is not None:  # else nothing of this rank's to wait for on its device
            for _ in range(warmup):
                call()
            (synchronize or timer.synchronize)()

    def after_barrier(count: int, first: Callable[[], None] | None) -> Batch:
        def then() -> list[float]:
            if first is not None:
                first()
            return [] if call is None else timer.time_batch(call, count)

        # Progress is said before the barrier: a store round trip between the barrier and
        # the first timestamp would be timed, and would skew the ranks.
        say("timed batch")
        tick()
        times_us, (wait_us, starved_us) = wait_in(side.barrier, then)
        return Batch(times_us, None if call is None else timer.enqueue_us, wait_us, starved_us)

    if not barrier_first:
        warm_up()
    mine = after_barrier(iters, warm_up if barrier_first else None)
    more = 0 if longer is None else longer(mine.times_us)
    if more > iters:
        mine = after_barrier(more, None)
    if not gather:
        return [mine]
    say("combining times")
    return [Batch.of_floats(rank) for rank in side.gather_floats(mine.floats())]


_TASKS = "/proc/self/task"
#: Threads a barrier on a gloo group runs on, by the names torch and gloo give them (the
#: main thread is found by its id). Others are left out: rank 0's store server answers
#: the other ranks' progress reports while it waits in the barrier, and a thread that
#: waits for a CPU then is not holding the barrier up.
_BARRIER_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop")
#: Enough for a schedstat line: three decimal counters.
_SCHEDSTAT_BYTES = 128


class BarrierThreads:
    """The schedstat files of the threads on a barrier's path, held open: listing and
    opening them costs tens of microseconds, so :func:`wait_in` does that before the
    barrier (:meth:`refresh`) and after it only reads, one ``os.pread`` each (:meth:`read`).
    """

    def __init__(self, tasks_dir: str = _TASKS) -> None:
        self._tasks_dir = tasks_dir
        #: Thread id -> its open schedstat file, for the threads on the barrier's path.
        self._files: dict[int, int] = {}
        #: Thread id -> whether it is on the path, for every thread seen alive.
        self._seen: dict[int, bool] = {}
        #: Threads found ended by a read, forgotten by the next refresh.
        self._ended: set[int] = set()

    def refresh(self) -> bool:
        """Open the files of threads started since the last call and close those of
        threads that ended; False where the kernel does not list them."""
        try:
            alive = {int(name) for name in os.listdir(self._tasks_dir)}
        except (OSError, ValueError):
            return False
        # A thread id is reused once its thread ended: a new thread with it is looked at
        # anew (an open file keeps naming the thread that ended).
        for tid in (set(self._seen) - alive) | self._ended:
            self._seen.pop(tid, None)
            if tid in self._files:
                os.close(self._files.pop(tid))
        self._ended.clear()
        for tid in alive - set(self._seen):
            self._seen[tid] = self._on_barrier_path(tid)
            if not self._seen[tid]:
                continue
            try:
                self._files[tid] = os.open(f"{self._tasks_dir}/{tid}/schedstat", os.O_RDONLY)
            except (FileNotFoundError, ProcessLookupError):
                self._seen[tid] = False  # a thread that ended meanwhile
            except OSError:
                del self._seen[tid]  # asked again next time
                return False
        return True

    def read(self) -> list[tuple[int, bytes]] | None:
        """Each open file's text as it is now, one pread each and nothing else; None
        where the kernel does not say."""
        texts = []
        try:
            for tid, fd in self._files.items():
                try:
                    texts.append((tid, os.pread(fd, _SCHEDSTAT_BYTES, 0)))
                except ProcessLookupError:
                    self._ended.add(tid)  # a thread that ended meanwhile
        except OSError:
            return None
        return texts

    def _on_barrier_path(self, tid: int) -> bool:
        try:
            with open(f"{self._tasks_dir}/{tid}/comm", encoding="utf-8") as f:
                name = f.read().strip()
        except OSError:
            name = ""
        return tid == os.getpid() or name.startswith(_BARRIER_THREADS)


def run_delays_ns(texts: list[tuple[int, bytes]] | None) -> dict[int, int] | None:
    """Per thread, from :meth:`BarrierThreads.read`'s texts, the time it has spent ready
    to run but without a CPU (throttled by a CPU quota, or preempted): schedstat's second
    field, a running total. None where the kernel does not say."""
    if texts is None:
        return None
    try:
        return {tid: int(text.split()[1]) for tid, text in texts}
    except (IndexError, ValueError):
        return None


#: This process's barrier threads, for every snapshot that is given none.
THREADS = BarrierThreads()


def thread_run_delays_ns(threads: BarrierThreads | None = None) -> dict[int, int] | None:
    """Per thread on a barrier's path (the main thread and gloo's), its run delay now
    (:func:`run_delays_ns`). None where the kernel does not say."""
    threads = THREADS if threads is None else threads
    return run_delays_ns(threads.read()) if threads.refresh() else None


def starved_ns(before: dict[int, int] | None, after: dict[int, int] | None) -> int:
    """How long the barrier's threads were held up for want of a CPU between two
    snapshots, summed over them (the caller caps it at the time that passed): which of
    them a stall held up is not known, and each is on the barrier's path."""
    if before is None or after is None:
        return 0
    return sum(after[tid] - before[tid] for tid in after if tid in before)
