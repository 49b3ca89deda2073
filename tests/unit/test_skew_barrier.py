"""The barrier's wait and starvation (colbench.bench.timing.wait_in): what is read, and when.

Between the barrier's return and the timed batch only the open schedstat files are
read again, and the starvation taken out is the barrier's, not the batch's. The
ordering tests run over a directory laid out like /proc/self/task whose counters the
fake barrier and batch advance, so the starvation each of them adds is known exactly.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colbench.bench.timing import BarrierThreads, run_delays_ns, thread_run_delays_ns, wait_in

#: Audit events raised while a test records (sys.addaudithook cannot be removed, so the
#: hook stays but records only while a list is set here).
_recording: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording and event in ("open", "os.listdir", "os.scandir"):
        _recording[-1].append(f"audit {event}")


sys.addaudithook(_audit)


@pytest.fixture
def audited() -> Iterator[list[str]]:
    log: list[str] = []
    _recording.append(log)
    try:
        yield log
    finally:
        _recording.remove(log)


class Tasks:
    """A directory laid out like /proc/self/task: a comm and a schedstat per thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, tid: int, comm: str, run_delay_ns: int = 0) -> None:
        (self.root / str(tid)).mkdir(parents=True)
        (self.root / str(tid) / "comm").write_text(comm + "\n")
        self.set(tid, run_delay_ns)

    def set(self, tid: int, run_delay_ns: int) -> None:
        # Rewritten in place (same inode), as the kernel's counters change under an open file.
        (self.root / str(tid) / "schedstat").write_bytes(f"1000 {run_delay_ns} 3\n".encode())

    def bump(self, tid: int, by_ns: int) -> None:
        text = (self.root / str(tid) / "schedstat").read_bytes()
        self.set(tid, int(text.split()[1]) + by_ns)


class Recorded(BarrierThreads):
    """The real reader, its two steps logged."""

    def __init__(self, tasks_dir: str, log: list[str]) -> None:
        super().__init__(tasks_dir)
        self.log = log

    def refresh(self) -> bool:
        self.log.append("refresh")
        return super().refresh()

    def read(self) -> list[tuple[int, bytes]] | None:
        self.log.append("read")
        return super().read()


GLOO, RUNLOOP, STORE = 4_000_001, 4_000_002, 4_000_003


def _tasks(tmp_path: Path) -> Tasks:
    tasks = Tasks(tmp_path / "task")
    tasks.add(os.getpid(), "python3", 1_000)
    tasks.add(GLOO, "gloo_tcp_loop", 2_000)
    tasks.add(RUNLOOP, "pt_gloo_runloop:0", 0)
    tasks.add(STORE, "python3", 0)  # rank 0's store server: not on the barrier's path
    return tasks


def test_only_reads_run_between_the_barrier_and_the_batch(
    tmp_path: Path, audited: list[str]
) -> None:
    tasks = _tasks(tmp_path)
    log = audited
    threads = Recorded(str(tasks.root), log)

    def barrier() -> None:
        log.append("barrier entered")
        time.sleep(0.01)  # longer than the starvation below, which is capped by it
        tasks.bump(GLOO, 3_000_000)  # starved inside the barrier: 3 ms + 2 ms
        tasks.bump(os.getpid(), 2_000_000)
        tasks.bump(STORE, 9_000_000)  # off the path: not counted
        log.append("barrier returned")

    def batch() -> str:
        log.append("batch")
        tasks.bump(os.getpid(), 7_000_000)  # the batch's own starvation: not the barrier's
        return "times"

    result, (wait_us, starved_us) = wait_in(barrier, batch, threads)

    assert result == "times"
    assert starved_us == 5_000.0 and wait_us >= 10_000.0 - 5_000.0
    first = log.index("barrier returned")
    # The threads are listed and their files opened before the barrier; after it, up
    # to the batch, only the open files are read: no file opened, no directory listed.
    assert "audit os.listdir" in log[: log.index("barrier entered")]
    assert log[first : log.index("batch") + 1] == ["barrier returned", "read", "batch"]


def test_threads_started_in_the_barrier_are_left_out(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)

    def barrier() -> None:
        time.sleep(0.01)
        tasks.add(4_000_004, "gloo_tcp_loop", 8_000_000)

    _, (_, starved_us) = wait_in(barrier, lambda: None, BarrierThreads(str(tasks.root)))
    assert starved_us == 0.0
    # The next snapshot sees it.
    assert 4_000_004 in (thread_run_delays_ns(BarrierThreads(str(tasks.root))) or {})


def test_where_the_kernel_does_not_say_nothing_is_taken_out(tmp_path: Path) -> None:
    threads = BarrierThreads(str(tmp_path / "absent"))
    result, (wait_us, starved_us) = wait_in(lambda: time.sleep(0.005), lambda: 1, threads)
    assert (result, starved_us) == (1, 0.0) and wait_us >= 5_000
    assert run_delays_ns([(1, b"garbled")]) is None and run_delays_ns(None) is None


class EveryThread(BarrierThreads):
    """Counts every thread of this process (Python does not give the kernel its names)."""

    def _on_barrier_path(self, tid: int) -> bool:
        return True


def test_a_thread_that_ends_after_its_file_was_opened_is_skipped() -> None:
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    threads = EveryThread()
    assert threads.refresh()
    assert worker.native_id in dict(threads.read() or [])
    done.set()
    worker.join()
    # join returns when Python is done with the thread, the kernel's may end a little later.
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{worker.native_id}") and time.monotonic() < deadline:
        time.sleep(0.001)
    read = dict(threads.read() or [])
    assert worker.native_id not in read and threading.get_native_id() in read
    assert threads.refresh()  # its file is closed, and the others stay open
    assert set(dict(threads.read() or [])) == set(read)
