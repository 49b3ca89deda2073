"""The hang watchdog: a rank whose step stops moving ends itself with exit code 4.

Why inside the rank: on NCCL, torch's own watchdog aborts a hung rank (SIGABRT) before
Python sees an exception, so the run would be reported as a crash; under torchrun or
srun no colbench parent watches at all. A daemon thread in every rank reads the rank's
:class:`~colbench.host.job.InFlight`; when its step has not moved for ``--timeout``
(``--init-timeout`` while the communicator starts), it writes the rank's failure report
(kind timeout) and ends the process with exit code 4, before torch's longer timeout
(:func:`process_group_timeout_s`). A hung CUDA graph replay is covered alike.

A timeout alone does not say who is stuck: the rank that hangs and the ranks waiting for
it stop alike. Where the main thread stands does: inside ``torch.distributed`` or a CUDA
synchronize it waits on its peers; anywhere else the rank itself is what holds the
others up. Each report says which. Spawned, the parent reads the reports; launched,
the firing ranks swap them through the rendezvous store and each prints one line
naming the stuck ranks, the op and the size.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from colbench.errors import ExitCode
from colbench.host import protocol
from colbench.host.job import InFlight
from colbench.host.turns import WAITING_PHASE

#: The phase between rendezvous and a working communicator (NCCL connects its peers).
COMM_STARTUP = "communicator start-up"
#: The gloo side group's start-up, right after: also held to --init-timeout.
SIDE_GROUP_STARTUP = "side group start-up"
#: How long a firing rank of a launched job waits for the other ranks' reports.
EXCHANGE_S = 2.0
#: Modules whose frames mean the main thread waits for other ranks.
_WAITING_MODULES = ("torch.distributed", "torch.cuda")
_KEY = "colbench/hang/"
_DONE_KEY = "colbench/hang-done/"
_RECORDED_KEY = "colbench/hang-recorded"
_LEFT_KEY = "colbench/hang-left/"


def process_group_timeout_s(timeout_s: float) -> float:
    """The timeout to give torch's process groups (the world group and every subgroup):
    later than colbench's own deadline by the poll and the exchange of reports, so the
    watchdog here reports a hang (exit 4, naming the stuck ranks) before torch's NCCL
    watchdog aborts the process (SIGABRT) or one gloo rank raises alone. torch's timeout
    stays as the backstop should this thread never get to run."""
    return timeout_s + max(30.0, timeout_s / 4)


def deadline(
    phase: str, seq: int, timeout_s: float, init_timeout_s: float
) -> tuple[float, str] | None:
    """Seconds a step may last and the option that set it; None for an unwatched one.
    Nothing is watched before the first step (seq 0: the rendezvous bounds itself);
    ``--init-timeout`` bounds the start-up of the communicator and of the side group,
    ``--timeout`` every step after them, a timed batch as a whole, as NCCL's own watchdog
    times each call from when it was enqueued."""
    if seq == 0 or phase == WAITING_PHASE:
        # An interleaved world waiting for the other's turn is not stuck.
        return None
    if phase in (COMM_STARTUP, SIDE_GROUP_STARTUP):
        return init_timeout_s, "--init-timeout"
    return timeout_s, "--timeout"


def main_thread_place(frame: FrameType | None) -> tuple[bool, str]:
    """Whether the main thread waits on other ranks, and where it is (file:line in func)."""
    if frame is None:
        return False, ""
    code = frame.f_code
    where = f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
    module = str(frame.f_globals.get("__name__", ""))
    return module.startswith(_WAITING_MODULES), where


@dataclass
class Watchdog:
    """Watches one rank's progress from a daemon thread (see the module's docstring).

    ``launched``: no colbench parent reads the reports, so the rank prints the verdict
    itself. ``connect``: a fresh client of the rendezvous store for the exchange of reports
    (the rank's own client may be held by the blocked call); None for a world of one.
    ``on_verdict``: what a launched rank does with the verdict besides printing it (rank 0:
    meta.json).
    """

    in_flight: InFlight
    _: KW_ONLY
    world_size: int
    timeout_s: float
    init_timeout_s: float
    run_dir: Path | None
    launched: bool = False
    connect: Callable[[], Any] | None = None
    on_verdict: Callable[[protocol.Failure], None] | None = None
    exit_process: Callable[[int], Any] = os._exit

    def __post_init__(self) -> None:
        self.poll_s = min(1.0, max(0.05, min(self.timeout_s, self.init_timeout_s) / 20))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="colbench-watchdog", daemon=True)
        self._main_id = threading.main_thread().ident

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def overdue(self, now_s: float) -> tuple[float, str] | None:
        """(deadline, option) when the current step has outlived its deadline."""
        flight = self.in_flight
        if flight.failed_at is not None:
            return None  # the main thread is already reporting a failure of its own
        limit = deadline(flight.phase, flight.seq, self.timeout_s, self.init_timeout_s)
        if limit is None or now_s - flight.since_s < limit[0]:
            return None
        return limit

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            limit = self.overdue(time.monotonic())
            if limit is not None:
                self.fire(*limit)
                return

    def report(self, after_s: float, option: str) -> dict[str, Any]:
        """This rank's failure report: kind timeout, and whether it waits on peers."""
        waiting, where = main_thread_place(sys._current_frames().get(self._main_id or -1))
        flight = self.in_flight
        doing = flight.describe()
        return protocol.make_report(
            flight.rank,
            doing,
            protocol.KIND_TIMEOUT,
            f"no progress for {after_s:g} s ({option}) during {doing}",
            time.time(),
            waiting=waiting,
            stuck_at="" if waiting else where,
            timeout_s=after_s,
            deadline=option,
        )

    def fire(self, after_s: float, option: str) -> None:
        """Report the hang and end the process; it ends even if reporting fails."""
        _FIRED.set()
        try:
            report = self.report(after_s, option)
            if self.run_dir is not None:
                protocol.write_report(self.run_dir, report)
            if self.launched:
                self._speak(report)
            dump_flight_recorder(self.in_flight.rank)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            self.exit_process(int(ExitCode.TIMEOUT))

    def _speak(self, mine: dict[str, Any]) -> None:
        """Launched: swap reports with the other ranks, print the verdict in one line."""
        store = _connected(self.connect, self.world_size)
        reports, progress = _swap(store, mine, self.world_size)
        progress.setdefault(int(mine["rank"]), self.in_flight)
        reported = {int(r["rank"]) for r in reports}
        silent = [r for r in range(self.world_size) if r not in reported]
        failure = protocol.diagnose_timeout(reports, silent, progress, self.timeout_s)
        who = f"rank {mine['rank']} on {socket.gethostname()} (pid {os.getpid()})"
        print(f"colbench: error: {who}: {failure.message}", file=sys.stderr)
        if self.on_verdict is not None:
            self.on_verdict(failure)
        _leave_after_rank0(store, int(mine["rank"]), self.world_size)


#: Set once a watchdog of this process has fired: the process is about to end with
#: exit code 4 from that thread.
_FIRED = threading.Event()


def fired() -> bool:
    """Whether this process's hang watchdog has fired (its verdict stands)."""
    return _FIRED.is_set()


def yield_to_verdict(wait_s: float = 4 * EXCHANGE_S) -> None:
    """Called by a rank's failure path: if the hang watchdog has fired, wait for it to end
    the process with the hang's verdict (exit 4). The peers it exchanged reports with
    leave first, and their closed connections make the blocked collective raise in the
    main thread, which must not turn the hang into a crash (exit 3)."""
    if _FIRED.is_set():
        time.sleep(wait_s)


def dump_flight_recorder(rank: int) -> Path | None:
    """Write torch's NCCL flight recorder where ``--debug`` asked torch to dump it on a
    timeout (TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank): this watchdog ends the rank before
    torch's would, so torch never gets to. Last, after the report: the dump queries CUDA
    events, which a wedged device may not answer."""
    prefix = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix or os.environ.get("TORCH_NCCL_DUMP_ON_TIMEOUT") != "1":
        return None
    import torch._C._distributed_c10d as c10d

    dump = getattr(c10d, "_dump_nccl_trace", None)
    if dump is None:  # no NCCL in this build: nothing was recorded
        return None
    path = Path(f"{prefix}{rank}")
    try:
        path.write_bytes(dump())
    except (RuntimeError, OSError):
        return None
    return path


def exchange(
    connect: Callable[[], Any] | None, mine: dict[str, Any], world_size: int
) -> tuple[list[dict[str, Any]], dict[int, InFlight]]:
    """Publish this rank's report, collect the others' for up to :data:`EXCHANGE_S`, and
    read every rank's progress; with whatever arrived if the store fails or goes away."""
    return _swap(_connected(connect, world_size), mine, world_size)


def _connected(connect: Callable[[], Any] | None, world_size: int) -> Any:
    """A store client of its own, or None (a world of one, or no store to reach)."""
    if connect is None or world_size < 2:
        return None
    try:
        return connect()
    except (RuntimeError, OSError, ValueError):
        return None


def _swap(
    store: Any, mine: dict[str, Any], world_size: int
) -> tuple[list[dict[str, Any]], dict[int, InFlight]]:
    """:func:`exchange` over ``store``. Ranks that reported also wait for each other to
    have read, so the rank hosting the store (rank 0 under env://) does not take it away
    from a peer still reading."""
    rank = int(mine["rank"])
    reports: dict[int, dict[str, Any]] = {rank: mine}
    progress: dict[int, InFlight] = {}
    if store is None:
        return list(reports.values()), progress
    try:
        store.set(f"{_KEY}{rank}", json.dumps(mine))
        _wait_for(store, [f"{_KEY}{r}" for r in range(world_size)])
        for r in range(world_size):
            if r != rank and store.check([f"{_KEY}{r}"]):
                reports[r] = json.loads(store.get(f"{_KEY}{r}").decode())
        progress = protocol.read_progress(store, world_size)
        store.set(f"{_DONE_KEY}{rank}", "1")
        _wait_for(store, [f"{_DONE_KEY}{r}" for r in reports])
    except (RuntimeError, OSError, ValueError):
        pass
    return [reports[r] for r in sorted(reports)], progress


def _leave_after_rank0(store: Any, rank: int, world_size: int) -> None:
    """Hold the other ranks until rank 0 has recorded the verdict in the run directory:
    a launcher such as torchrun stops every worker as soon as one exits, and rank 0
    alone writes meta.json. Over the client the exchange used: a new one could find
    the store already gone."""
    if store is None:
        return
    try:
        if rank == 0:
            store.set(_RECORDED_KEY, "1")
            # Rank 0 hosts the store under env://: leave once the others have read it.
            _wait_for(store, [f"{_LEFT_KEY}{r}" for r in range(1, world_size)])
        else:
            _wait_for(store, [_RECORDED_KEY])
            store.set(f"{_LEFT_KEY}{rank}", "1")
    except (RuntimeError, OSError, ValueError):
        pass


def _wait_for(store: Any, keys: list[str]) -> None:
    deadline_s = time.monotonic() + EXCHANGE_S
    while time.monotonic() < deadline_s:
        if all(store.check([key]) for key in keys):
            return
        time.sleep(0.05)
