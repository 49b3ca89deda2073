"""The hang watchdog's thread, deadlines and exchange of reports, in this process.

The thread, the rank's InFlight, the report files and the TCPStore are real; only the
process exit is replaced by a recorder, so the test process survives the verdict.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
from torch.distributed.elastic.utils.store import get_all

from colbench.errors import ExitCode
from colbench.host import protocol, watchdog
from colbench.host.job import InFlight
from colbench.host.launchers.rendezvous import free_port
from colbench.host.watchdog import COMM_STARTUP, Watchdog, deadline, main_thread_place


class Exits:
    """Records the codes the watchdog ends the process with."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.done = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.done.set()


def test_deadlines() -> None:
    assert deadline("rendezvous", 0, 30, 10) is None
    assert deadline(COMM_STARTUP, 1, 30, 10) == (10, "--init-timeout")
    assert deadline("timed batch", 7, 30, 10) == (30, "--timeout")
    assert deadline("shutdown", 9, 30, 10) == (30, "--timeout")


def test_torch_gets_a_later_timeout_than_the_watchdog() -> None:
    for timeout_s in (1, 5, 300, 3600):
        assert watchdog.process_group_timeout_s(timeout_s) >= timeout_s + 30


def test_phase_changes_restart_the_clock() -> None:
    flight = InFlight()
    first = flight.since_s
    time.sleep(0.01)
    flight.phase = "between ops"
    second = flight.since_s
    time.sleep(0.01)
    flight.step("fill")
    assert first < second < flight.since_s


def test_main_thread_place() -> None:
    waiting_globals = {"__name__": "torch.distributed.distributed_c10d", "sys": sys}
    exec("def all_reduce():\n    return sys._getframe()", waiting_globals)
    frame = waiting_globals["all_reduce"]()
    assert main_thread_place(frame) == (True, "<string>:2 in all_reduce")
    busy, where = main_thread_place(sys._getframe())
    assert not busy and where.startswith("test_watchdog.py:") and "test_main_thread_place" in where
    assert main_thread_place(None) == (False, "")


def make(flight: InFlight, exits: Exits, run_dir: Path | None, **kw: Any) -> Watchdog:
    return Watchdog(
        flight,
        world_size=kw.pop("world_size", 2),
        timeout_s=kw.pop("timeout_s", 0.4),
        init_timeout_s=kw.pop("init_timeout_s", 0.2),
        run_dir=run_dir,
        exit_process=exits,
        **kw,
    )


@pytest.mark.serial  # wall-clock bounds of a fraction of a second
def test_a_stalled_step_writes_a_timeout_report_and_exits_4(tmp_path: Path) -> None:
    flight = InFlight("all_reduce", "float32", 4096, "setup", 0, rank=1)
    flight.step("timed batch")
    exits = Exits()
    started = time.monotonic()
    make(flight, exits, tmp_path).start()
    # This (main) thread now waits in threading, not in torch: it is the stuck one.
    assert exits.done.wait(10)
    assert 0.4 <= time.monotonic() - started < 3
    assert exits.codes == [ExitCode.TIMEOUT]
    report = json.loads((tmp_path / "rank1.error.json").read_text())
    assert report["kind"] == protocol.KIND_TIMEOUT
    assert report["doing"] == "timed batch of all_reduce float32 size 4096 B"
    assert report["waiting"] is False and report["stuck_at"].startswith("threading.py:")
    assert (report["timeout_s"], report["deadline"]) == (0.4, "--timeout")
    assert report["error"] == (
        "no progress for 0.4 s (--timeout) during timed batch of all_reduce float32 size 4096 B"
    )


def test_communicator_start_up_gets_the_init_timeout(tmp_path: Path) -> None:
    flight = InFlight(rank=0)
    flight.step(COMM_STARTUP)
    exits = Exits()
    make(flight, exits, tmp_path, timeout_s=30).start()
    assert exits.done.wait(10)
    report = json.loads((tmp_path / "rank0.error.json").read_text())
    assert (report["doing"], report["deadline"]) == (COMM_STARTUP, "--init-timeout")


def test_progress_keeps_it_quiet_and_a_stop_ends_it(tmp_path: Path) -> None:
    flight = InFlight(rank=0)
    exits = Exits()
    dog = make(flight, exits, tmp_path, timeout_s=0.3).start()
    for _ in range(12):  # 1.2 s of steps, each shorter than the deadline
        flight.step("timed batch")
        time.sleep(0.1)
    flight.phase = "rendezvous"
    flight.seq = 0  # nothing is watched before the first step
    time.sleep(0.6)
    dog.stop()
    assert not exits.done.is_set()
    assert list(tmp_path.iterdir()) == []


def test_a_rank_already_failing_is_left_to_report_itself(tmp_path: Path) -> None:
    flight = InFlight(rank=0)
    flight.step("timed batch")
    flight.failed(RuntimeError("Connection closed by peer"))
    exits = Exits()
    make(flight, exits, tmp_path, timeout_s=0.2).start()
    assert not exits.done.wait(1.0)


@pytest.fixture
def store() -> Any:
    master = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True, wait_for_workers=False)
    yield master


def client(master: Any) -> Any:
    return dist.TCPStore("127.0.0.1", master.port, is_master=False, wait_for_workers=False)


def test_exchange_collects_peers_reports_and_progress(store: Any) -> None:
    peer = {"rank": 1, "kind": "timeout", "waiting": False, "stuck_at": "x.py:1 in f"}
    store.set("colbench/hang/1", json.dumps(peer))
    store.set("colbench/hang-done/1", "1")
    for rank, seq in ((0, 5), (1, 5)):
        store.set(
            f"progress/{rank}", InFlight("all_gather", "float32", 64, "timed batch", seq).encode()
        )
    mine = {"rank": 0, "kind": "timeout", "waiting": True}
    reports, progress = watchdog.exchange(lambda: client(store), mine, 2)
    assert reports == [mine, peer]
    assert {r: (p.seq, p.op, p.size_bytes) for r, p in progress.items()} == {
        0: (5, "all_gather", 64),
        1: (5, "all_gather", 64),
    }
    assert store.get("colbench/hang/0") == json.dumps(mine).encode()


@pytest.mark.serial  # wall-clock bounds of a fraction of a second
def test_exchange_gives_up_on_silent_peers_in_time(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchdog, "EXCHANGE_S", 0.3)
    started = time.monotonic()
    reports, _ = watchdog.exchange(lambda: client(store), {"rank": 2}, 4)
    assert reports == [{"rank": 2}]
    assert time.monotonic() - started < 2


def test_exchange_survives_a_store_that_is_gone() -> None:
    def refused() -> Any:
        raise RuntimeError("connect() failed: Connection refused")

    assert watchdog.exchange(refused, {"rank": 1}, 2) == ([{"rank": 1}], {})


def test_launched_rank_prints_one_verdict_line(
    store: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 0 of a launched pair: rank 1 reported itself busy outside communication."""
    store.set("colbench/hang/1", json.dumps(
        {"rank": 1, "kind": "timeout", "waiting": False, "stuck_at": "bench.py:367 in _fail",
         "doing": "timed batch of broadcast float32 size 1024 B"}
    ))  # fmt: skip
    store.set("colbench/hang-done/1", "1")
    flight = InFlight("broadcast", "float32", 1024, "setup", 0, rank=0)
    flight.step("timed batch")
    store.set("progress/1", flight.encode())
    verdicts: list[protocol.Failure] = []
    exits = Exits()
    dog = make(
        flight, exits, None, launched=True, connect=lambda: client(store),
        on_verdict=verdicts.append, timeout_s=0.3,
    )  # fmt: skip

    def fire_then_release() -> None:
        time.sleep(0.3)  # the main thread is blocked by then
        dog.fire(0.3, "--timeout")
        store.set("released/0", "1")

    helper = threading.Thread(target=fire_then_release)
    helper.start()
    # The main thread waits inside torch.distributed, as a rank in a collective does.
    get_all(client(store), 1, "released/", 1)
    helper.join(10)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("colbench: error: rank 0 on ")
    assert lines[0].endswith(
        "timed out after 0.3 s (--timeout) during timed batch of broadcast float32 size 1024 B: "
        "rank(s) 1 (busy outside communication at bench.py:367 in _fail) did not complete "
        "the collective"
    )
    assert [(v.exit_code, v.rank, v.op, v.size_bytes) for v in verdicts] == [
        (4, 1, "broadcast", 1024)
    ]
    assert exits.codes == [4]


def test_debug_flight_recorder_is_dumped_where_torch_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--debug asks torch to dump its NCCL flight recorder on a timeout; the watchdog ends
    the rank first, so it dumps it itself (NCCL's recorder is a fake: no NCCL here)."""
    import torch._C._distributed_c10d as c10d

    calls: list[str] = []

    def fake_dump() -> bytes:
        calls.append("dump")
        return b"pickled entries"

    monkeypatch.setattr(c10d, "_dump_nccl_trace", fake_dump, raising=False)
    monkeypatch.setenv("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    monkeypatch.setenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(tmp_path / "nccl_trace_rank_"))
    flight = InFlight(rank=3)
    flight.step("timed batch")
    exits = Exits()
    make(flight, exits, tmp_path, timeout_s=0.2).start()
    assert exits.done.wait(10)
    assert calls == ["dump"]
    assert (tmp_path / "nccl_trace_rank_3").read_bytes() == b"pickled entries"
    assert (tmp_path / "rank3.error.json").exists()


def test_no_dump_without_debug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", raising=False)
    assert watchdog.dump_flight_recorder(0) is None
    monkeypatch.setenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(tmp_path / "t_"))
    monkeypatch.setenv("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    # A build without NCCL has no recorder: nothing to dump, nothing written.
    import torch._C._distributed_c10d as c10d

    monkeypatch.delattr(c10d, "_dump_nccl_trace", raising=False)
    assert watchdog.dump_flight_recorder(0) is None
    assert list(tmp_path.iterdir()) == []


def test_the_side_group_start_up_is_held_to_init_timeout_too() -> None:
    from colbench.host.watchdog import SIDE_GROUP_STARTUP

    assert deadline(SIDE_GROUP_STARTUP, 2, 30, 10) == (10, "--init-timeout")
    assert deadline("setup", 2, 30, 10) == (30, "--timeout")
