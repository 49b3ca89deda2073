"""A hang is exit 4 naming the stuck ranks, also when torch's NCCL watchdog killed a rank.

The texts are torch's own, as ProcessGroupNCCL.cpp writes them (WorkNCCL::checkTimeout,
the heartbeat monitor, NCCL_CHECK_TIMEOUT of a non-blocking communicator start-up), in
the form they take in a rank's log: glog prefix, then the message.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from colbench.errors import ExitCode
from colbench.host import protocol
from colbench.host.job import InFlight

NCCL_WATCHDOG_LOG = """\
[rank1]:[E1123 10:20:01.482326987 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught \
collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=2048, \
NumelOut=2048, Timeout(ms)=35000) ran for 35012 milliseconds before timing out.
[rank1]:[E1123 10:20:01.483402482 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) \
Rank 1]  failure detected by watchdog at work sequence id: 41 PG status: last enqueued \
work: 41, last completed work: 40
[rank1]:[E1123 10:20:02.081662161 ProcessGroupNCCL.cpp:684] [Rank 1] Some NCCL operations \
have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU \
operations might run on corrupted/incomplete data.
[rank1]:[E1123 10:20:02.081690629 ProcessGroupNCCL.cpp:698] [Rank 1] To avoid data \
inconsistency, we are taking the entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
"""
HEARTBEAT_LOG = """\
[rank0]:[E1123 10:31:44.122 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0(default_pg) \
Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. \
workMetaList_.size()=1
[rank0]:[F1123 10:31:54.133 ProcessGroupNCCL.cpp:1480] [PG ID 0 PG GUID 0(default_pg) Rank \
0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in \
monitoring enqueued collectives.
"""


def step(seq: int, phase: str = "timed batch", op: str = "all_reduce") -> InFlight:
    return InFlight(op, "float32", 8192, phase, seq)


def test_torch_watchdog_texts_classify_as_timeouts() -> None:
    texts = [
        NCCL_WATCHDOG_LOG.splitlines()[0].split("] ", 2)[2],
        "[Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping",
        "NCCL timeout when waiting for nonblocking call to become successful.",
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Timed out waiting 5000ms",
    ]
    for text in texts:
        assert protocol.classify(RuntimeError(text)) == protocol.KIND_TIMEOUT, text
    assert protocol.classify(RuntimeError("Connection closed by peer")) == protocol.KIND_ERROR


def test_watchdog_line_is_found_in_a_rank_log() -> None:
    line = protocol.torch_watchdog_line("NCCL INFO bootstrap\n" + NCCL_WATCHDOG_LOG)
    assert line is not None
    assert line.startswith("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(")
    assert line.endswith("ran for 35012 milliseconds before timing out.")
    heartbeat = protocol.torch_watchdog_line(HEARTBEAT_LOG)
    assert heartbeat is not None and "Heartbeat monitor timed out!" in heartbeat
    assert protocol.torch_watchdog_line("Some NCCL operations have failed\nSIGSEGV") is None


def test_rank_aborted_by_torchs_nccl_watchdog_is_a_timeout(tmp_path: Path) -> None:
    """Rank 1 SIGABRTed by torch's watchdog, rank 0 never entered the collective."""
    (tmp_path / "rank1.log").write_text("NCCL INFO comm 0x55 rank 1 nranks 2\n" + NCCL_WATCHDOG_LOG)
    (tmp_path / "rank0.log").write_text("")
    reports = protocol.read_reports(tmp_path)
    assert [(r["rank"], r["kind"], r["source"]) for r in reports] == [(1, "timeout", "rank1.log")]
    failure = protocol.diagnose(
        {0: None, 1: -signal.SIGABRT},
        reports,
        {0: step(6, "fill"), 1: step(7)},
        "node7",
        {0: 100, 1: 101},
        30,
    )
    assert failure.exit_code == ExitCode.TIMEOUT
    assert failure.message == (
        "timed out after 30 s during timed batch of all_reduce float32 size 8192 B: rank(s) "
        "0 (never reached it; last seen in fill of all_reduce float32 size 8192 B) did not "
        "complete the collective"
    )
    assert (failure.rank, failure.op, failure.size_bytes) == (0, "all_reduce", 8192)


def test_a_sigabrt_without_the_watchdog_text_is_still_a_crash(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_text("terminate called without an active exception\n")
    failure = protocol.diagnose(
        {0: None, 1: -signal.SIGABRT},
        protocol.read_reports(tmp_path),
        {0: step(7), 1: step(7)},
        "node7",
        {0: 100, 1: 101},
        30,
    )
    assert failure.exit_code == ExitCode.RANK_FAILURE
    assert "rank 1 on node7 (pid 101) was killed by SIGABRT" in failure.message


def test_written_reports_win_over_logs(tmp_path: Path) -> None:
    report = protocol.make_report(1, "fill", protocol.KIND_ERROR, "ValueError: x", 1.0)
    protocol.write_report(tmp_path, report)
    (tmp_path / "rank1.log").write_text(NCCL_WATCHDOG_LOG)
    assert protocol.read_reports(tmp_path) == [json.loads(json.dumps(report))]


def hang_report(rank: int, waiting: bool, doing: str, at: str = "") -> dict[str, object]:
    return protocol.make_report(
        rank, doing, protocol.KIND_TIMEOUT, "no progress", 1.0,
        waiting=waiting, stuck_at=at, timeout_s=5.0, deadline="--timeout",
    )  # fmt: skip


def test_the_rank_busy_outside_communication_is_named() -> None:
    """Both watchdogs fired; rank 2 was not waiting on anyone (the hang fault's case)."""
    doing = "timed batch of all_reduce float32 size 8192 B"
    reports = [
        hang_report(0, True, doing),
        hang_report(2, False, doing, "bench.py:367 in _fail"),
        # Rank 1 lost its peer when rank 2 left: an error, not a stuck rank.
        protocol.make_report(1, doing, protocol.KIND_ERROR, "Connection closed by peer", 2.0),
    ]
    failure = protocol.diagnose(
        {0: 4, 1: 3, 2: 4}, reports, {r: step(9) for r in range(3)}, "h", {}, 99
    )
    assert failure.exit_code == ExitCode.TIMEOUT
    assert failure.message == (
        f"timed out after 5 s (--timeout) during {doing}: rank(s) 2 (busy outside "
        "communication at bench.py:367 in _fail) did not complete the collective"
    )
    assert failure.rank == 2


def test_every_rank_waiting_blames_the_network() -> None:
    doing = "communicator start-up"
    reports = [hang_report(r, True, doing) for r in range(2)]
    failure = protocol.diagnose_timeout(reports, [], {r: step(1, doing, "") for r in range(2)}, 9)
    assert failure.message == (
        "timed out after 5 s (--timeout) during communicator start-up: every rank timed "
        "out: a peer or the network is unreachable"
    )
    assert failure.rank is None and failure.exit_code == ExitCode.TIMEOUT


def test_silent_ranks_are_stuck_and_unstarted_ones_said_so() -> None:
    reports = [hang_report(0, True, "communicator start-up")]
    progress = {0: step(1, "communicator start-up", ""), 1: step(1, "communicator start-up", "")}
    failure = protocol.diagnose_timeout(reports, [1, 2], progress, 9)
    assert failure.message.endswith(
        "rank(s) 1 (stuck inside it), 2 (never started) did not complete it"
    )
    assert failure.rank == 1


def test_a_rank_that_vanished_is_named_over_the_ranks_that_lost_it() -> None:
    """Rank 1 exited (code 7) without a report; rank 0 reported gloo's "Connection closed
    by peer" (the text of a real run): rank 1 is the culprit, not the earliest report."""
    lost = protocol.make_report(
        0, "intra-node all_reduce", protocol.KIND_ERROR,
        "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:25793. This is typically caused by a remote worker crashing.", 1.0,
    )  # fmt: skip
    failure = protocol.diagnose({0: 3, 1: 7}, [lost], {1: step(2)}, "vm", {1: 42}, 60.0)
    assert failure.rank == 1 and failure.exit_code == ExitCode.RANK_FAILURE
    assert failure.message.startswith("rank 1 on vm (pid 42) exited with code 7 during")
    # A report of a failure of its own still wins: the earliest exception.
    own = {**lost, "error": "RuntimeError: fault injected by COLBENCH_FAULT"}
    failure = protocol.diagnose({0: 3, 1: 7}, [own], {}, "vm", {}, 60.0)
    assert failure.rank == 0


def test_an_nccl_survivor_aborted_after_its_peer_died_is_no_culprit(tmp_path: Path) -> None:
    """torch aborts (SIGABRT) an NCCL rank whose peer died before Python reports anything;
    its log says it lost the peer. The rank that exited without a word is named."""
    (tmp_path / "rank0.log").write_text(
        "[rank0]: torch.distributed.DistBackendError: NCCL error: remote process exited or "
        "there was a network error, NCCL version 2.28.9\nncclRemoteError\n"
    )
    failure = protocol.diagnose(
        {0: -signal.SIGABRT, 1: 7},
        protocol.read_reports(tmp_path),
        {1: step(4)},
        "node7",
        {0: 100, 1: 101},
        30,
    )
    assert failure.rank == 1, failure.message
    assert failure.message.startswith("rank 1 on node7 (pid 101) exited with code 7")
    # Without that log, the aborted rank is the one named, as before.
    (tmp_path / "rank0.log").write_text("terminate called without an active exception\n")
    failure = protocol.diagnose(
        {0: -signal.SIGABRT, 1: 7}, protocol.read_reports(tmp_path), {}, "node7", {}, 30
    )
    assert failure.rank == 0
