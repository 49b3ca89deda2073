"""How long a rank's barrier threads waited for a CPU: Linux schedstat's run delay.

A thread's run delay is the time it has spent ready to run but without a CPU (throttled
by a CPU quota, or preempted), a running total the kernel keeps per thread in
``/proc/self/task/<tid>/schedstat``. colbench.bench.timing takes a rank's own starvation inside
the barrier before a timed batch out of its wait for the others: the difference of two
snapshots, one on each side of the barrier.
"""

from __future__ import annotations

import os

_TASKS = "/proc/self/task"
#: Threads a barrier on a gloo group runs on, by the names torch and gloo give them (the
#: main thread is found by its id). Others are left out: rank 0's store server answers
#: the other ranks' progress reports while it waits in the barrier, and a thread that
#: waits for a CPU then is not holding the barrier up.
_BARRIER_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop")
#: Enough for a schedstat line: three decimal counters.
_SCHEDSTAT_BYTES = 128


class BarrierThreads:
    """The schedstat files of the threads on a barrier's path, held open.

    Listing the threads and opening their files costs tens of microseconds; reading
    files already open costs one ``os.pread`` each. colbench.bench.timing.wait_in lists and opens
    before the barrier (:meth:`refresh`) and, between the barrier and the timed batch,
    only reads (:meth:`read`).
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
    """Per thread, from :meth:`BarrierThreads.read`'s texts, the time it has spent
    ready to run but without a CPU (throttled by a CPU quota, or preempted): Linux
    schedstat's run delay, its second field. None where the kernel does not say."""
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
