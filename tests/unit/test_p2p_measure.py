"""The p2p measuring side with recording fakes: what goes over the measured group (and
how: batched on NCCL, plain send/recv on gloo), what over the side group, and who times."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from colbench.commands.p2p.measure import Buffers, Stepper, Transport, bandwidth_call, latency_call
from colbench.commands.p2p.schedule import directed_steps, pair_steps, select


class Log(list[str]):
    pass


@dataclass
class FakeWork:
    log: Log
    what: str

    def wait(self) -> None:
        self.log.append(f"wait {self.what}")


@dataclass
class FakeP2POp:
    op: Any
    tensor: Any
    peer: int
    group: Any


class FakeDist:
    """torch.distributed's point-to-point calls, recorded."""

    P2POp = FakeP2POp

    def __init__(self, log: Log) -> None:
        self.log = log

    def isend(self, tensor: Any, peer: int, group: Any = None) -> FakeWork:
        self.log.append(f"isend {tensor} -> {peer} on {group}")
        return FakeWork(self.log, f"send {tensor}")

    def irecv(self, tensor: Any, peer: int, group: Any = None) -> FakeWork:
        self.log.append(f"irecv {tensor} <- {peer} on {group}")
        return FakeWork(self.log, f"recv {tensor}")

    def batch_isend_irecv(self, ops: list[FakeP2POp]) -> list[FakeWork]:
        names = [f"{'send' if op.op == self.isend else 'recv'} {op.tensor} {op.peer}" for op in ops]
        self.log.append(f"batch [{', '.join(names)}] on {ops[0].group}")
        return [FakeWork(self.log, "batch")]


BUFS = Buffers(send="S", recv="R", ack="A", ping="P", pong="Q")


def test_nccl_sends_each_exchange_as_one_batch_on_the_measured_group() -> None:
    log = Log()
    link = Transport("nccl", group="measured", dist=FakeDist(log))
    bandwidth_call(link, "src", 3, BUFS, bidirectional=False)()
    assert log == [
        "batch [send S 3] on measured",
        "wait batch",
        "batch [recv A 3] on measured",
        "wait batch",
    ]
    log.clear()
    bandwidth_call(link, "dst", 0, BUFS, bidirectional=True)()
    assert log == ["batch [send S 0, recv R 0] on measured", "wait batch"]


def test_nccl_times_a_window_of_messages_then_one_acknowledgement() -> None:
    """One message and an acknowledgement as two launches understate NVLink bandwidth
    (main timed exactly that): a window of messages goes in one batch, acknowledged once."""
    from colbench.commands.p2p.config import NCCL_WINDOW, P2PConfig

    assert P2PConfig().window_for("nccl") == NCCL_WINDOW > 1
    assert P2PConfig().window_for("gloo") == 1
    assert P2PConfig(window=3).window_for("nccl") == 3
    log = Log()
    link = Transport("nccl", group="measured", dist=FakeDist(log), window=3)
    bandwidth_call(link, "src", 3, BUFS, False, link.window)()
    assert log == [
        "batch [send S 3, send S 3, send S 3] on measured",
        "wait batch",
        "batch [recv A 3] on measured",
        "wait batch",
    ]
    log.clear()
    bandwidth_call(link, "dst", 0, BUFS, False, link.window)()
    assert log[0] == "batch [recv R 0, recv R 0, recv R 0] on measured"
    assert log[2] == "batch [send A 0] on measured"


def test_a_window_is_refused_outside_its_range() -> None:
    from colbench.commands.p2p.config import P2PConfig
    from colbench.errors import UsageError

    with pytest.raises(UsageError, match="--window takes 1 to 1024 messages, got 0"):
        P2PConfig(window=0)


def test_gloo_uses_send_and_recv_and_waits_for_each() -> None:
    log = Log()
    link = Transport("gloo", group=None, dist=FakeDist(log))
    bandwidth_call(link, "dst", 1, BUFS, bidirectional=False)()
    assert log == ["irecv R <- 1 on None", "wait recv R", "isend A -> 1 on None", "wait send A"]


def test_latency_is_a_ping_pong_started_by_the_source() -> None:
    log = Log()
    link = Transport("gloo", dist=FakeDist(log))
    latency_call(link, "src", 2, BUFS)()
    latency_call(link, "dst", 0, BUFS)()
    sends_and_recvs = [e.split(" on ")[0] for e in log if not e.startswith("wait")]
    assert sends_and_recvs == ["isend P -> 2", "irecv Q <- 2", "irecv Q <- 0", "isend P -> 0"]


class FakeSide:
    def __init__(self, log: Log) -> None:
        self.log = log

    def barrier(self) -> None:
        self.log.append("side.barrier")


class FakeTimer:
    enqueue_us: float | None = None

    def __init__(self, log: Log) -> None:
        self.log = log

    def time_batch(self, call: Callable[[], object], iters: int) -> list[float]:
        self.log.append(f"time_batch({iters})")
        for _ in range(iters):
            call()
        return [float(i + 1) for i in range(iters)]

    def run_once(self, call: Callable[[], object]) -> None:
        self.log.append("warmup")
        call()

    def synchronize(self) -> None:
        self.log.append("sync")


def _stepper(rank: int, log: Log, warmup: int = 2) -> Stepper:
    return Stepper(rank, FakeSide(log), FakeTimer(log), iters=3, warmup=warmup, on_step=log.append)


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_every_rank_passes_every_step_barrier_and_only_sources_report(rank: int) -> None:
    log = Log()
    steps = directed_steps(select(["a", "b", "c", "d"]))
    calls = Log()

    def make_call(me: str, peer: int) -> Callable[[], None]:
        def call() -> None:
            calls.append(f"{me} {peer}")
            log.append("call")

        return call

    times = _stepper(rank, log).run("bandwidth", steps, make_call)
    # 6 steps, one barrier in each and one at the end, whatever this rank's part.
    assert log.count("side.barrier") == len(steps) + 1 == 7
    assert [e for e in log if e.startswith("bandwidth step")] == [
        f"bandwidth step {i}/6" for i in range(1, 7)
    ]
    # This rank sends to each of the 3 others once, and receives from each once.
    assert sorted(times) == sorted((rank, peer) for peer in range(4) if peer != rank)
    assert all(t == [1.0, 2.0, 3.0] for t in times.values())
    assert len(calls) == 6 * (2 + 3)  # 6 pairs it is in, each 2 warm-ups + 3 timed
    # The barrier first (no pair warms up while another step's pairs still time), then
    # the warm-up, then the timed batch, in each step this rank takes part in.
    first = log.index("bandwidth step 1/6")
    assert log[first : log.index("bandwidth step 2/6")] == [
        "bandwidth step 1/6", "side.barrier", "call", "call", "sync", "time_batch(3)",
        "call", "call", "call",
    ]  # fmt: skip


def test_the_first_message_is_never_timed_even_with_no_warmup() -> None:
    log = Log()
    steps = directed_steps(select(["a", "b"]))
    _stepper(0, log, warmup=0).run("latency", steps, lambda me, peer: lambda: log.append("call"))
    assert log[: log.index("time_batch(3)")].count("call") == 1


def test_idle_ranks_only_wait_at_the_barriers() -> None:
    log = Log()
    selection = select(["A", "A", "B", "B", "C", "C", "D", "D"], per_node=True)
    steps = directed_steps(selection)
    times = _stepper(1, log).run("bandwidth", steps, lambda me, peer: pytest.fail)
    assert times == {}
    assert set(log) == {"side.barrier"} | {f"bandwidth step {i}/6" for i in range(1, 7)}


def test_bidirectional_both_ranks_report_their_own_direction() -> None:
    steps = pair_steps(select(["a", "b", "c", "d"]))
    every = {}
    for rank in range(4):
        every.update(
            _stepper(rank, Log()).run("bw", steps, lambda me, p: lambda: None, both_report=True)
        )
    assert len(every) == 12
