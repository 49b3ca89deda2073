"""The measuring side of p2p, in every rank: one message size, pair by pair, step by step.

Bandwidth (osu_bw's definition): the sender times a window of ``window`` back-to-back
messages of ``size_bytes`` plus a one-byte acknowledgement back from the receiver;
bandwidth is the window's bytes over that time. The acknowledgement is what makes it
one-way time: a send returns once the data is in the sender's socket buffers or on the
wire, not when it has arrived. On gloo the window is one message: each message is a
blocking host call anyway, and at the sizes a bandwidth is read at one message is far
longer than the link's bandwidth-delay product. On NCCL each exchange is a kernel launch
and the acknowledgement a second one, a fixed cost of tens of microseconds against a
64 MiB message's 160 us on NVLink: a window of messages in one group (osu_bw's window
of 64, here 8 by default, ``--window``) pays it once per window. With ``bidirectional``,
both ranks send a window and receive the other's at once (osu_bibw); each direction's
bandwidth is its own bytes over the exchange time.

Latency (osu_latency's definition): half the round trip of a ``latency_bytes``
ping-pong, timed by the rank that starts it.

Messages go over the measured group: gloo's send/recv (torch's isend/irecv, waited
on), or on NCCL one ``batch_isend_irecv`` per exchange. Barriers, and gathering the
times, go over the side group (colbench.bench.groups), as for sweeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.bench.timing import BatchSide, Timer, timed_batch
from colbench.commands.p2p.schedule import Step, role

#: (src, dst) -> the sender's per-iteration times in microseconds.
Times = dict[tuple[int, int], list[float]]
#: One pass's times in one rank: bandwidth's, then latency's.
Pass = tuple[Times, Times]


class Transport:
    """Runs one exchange of point-to-point messages with peers and waits for it."""

    def __init__(self, backend: str, group: Any = None, dist: Any = None, window: int = 1) -> None:
        if dist is None:
            import torch.distributed as dist
        self._dist = dist
        self._batched = backend == "nccl"
        self._group = group
        #: Bandwidth messages per timed iteration (see the module's docstring).
        self.window = window

    def exchange(
        self, sends: Sequence[tuple[Any, int]] = (), recvs: Sequence[tuple[Any, int]] = ()
    ) -> None:
        dist = self._dist
        if self._batched:
            ops = [dist.P2POp(dist.isend, t, peer, self._group) for t, peer in sends]
            ops += [dist.P2POp(dist.irecv, t, peer, self._group) for t, peer in recvs]
            works = dist.batch_isend_irecv(ops)
        else:
            works = [dist.isend(t, peer, group=self._group) for t, peer in sends]
            works += [dist.irecv(t, peer, group=self._group) for t, peer in recvs]
        # On NCCL, wait() makes the current stream wait, not the host: CUDA events
        # recorded after the call then time the messages themselves.
        for work in works:
            work.wait()


@dataclass(frozen=True)
class Buffers:
    """What one rank sends and receives; filled once, outside any timed region."""

    send: Any
    recv: Any
    ack: Any
    ping: Any
    pong: Any

    @classmethod
    def allocate(cls, size_bytes: int, latency_bytes: int, device: Any) -> Buffers:
        import torch

        sizes = (size_bytes, size_bytes, 1, latency_bytes, latency_bytes)
        return cls(*(torch.zeros(n, dtype=torch.uint8, device=device) for n in sizes))


def bandwidth_call(
    link: Transport, me: str, peer: int, bufs: Buffers, bidirectional: bool, window: int = 1
) -> Callable[[], None]:
    """One timed bandwidth iteration for this rank (``window`` messages): ``me`` is
    ``src`` or ``dst``. The messages of a window share one buffer, as osu_bw's do."""
    if bidirectional:
        sends, recvs = [(bufs.send, peer)] * window, [(bufs.recv, peer)] * window
        return lambda: link.exchange(sends=sends, recvs=recvs)
    # The window, then the one-byte acknowledgement back.
    return round_trip(link, me, peer, (bufs.send, bufs.recv), (bufs.ack, bufs.ack), window)


def latency_call(link: Transport, me: str, peer: int, bufs: Buffers) -> Callable[[], None]:
    """One ping-pong: the source sends first, the destination answers."""
    return round_trip(link, me, peer, (bufs.ping, bufs.pong), (bufs.ping, bufs.pong))


def round_trip(
    link: Transport, me: str, peer: int, there: tuple[Any, Any], back: tuple[Any, Any],
    count: int = 1,
) -> Callable[[], None]:  # fmt: skip
    """The source sends ``there[0]`` (``count`` times, back to back) into the
    destination's ``there[1]``; the destination answers with ``back[0]`` into the
    source's ``back[1]``."""
    if me == "src":
        first, then = {"sends": [(there[0], peer)] * count}, {"recvs": [(back[1], peer)]}
    else:
        first, then = {"recvs": [(there[1], peer)] * count}, {"sends": [(back[0], peer)]}

    def trip() -> None:
        link.exchange(**first)
        link.exchange(**then)

    return trip


@dataclass
class Stepper:
    """Walks every rank through the same steps; ranks not in a step wait at its barrier."""

    rank: int
    side: BatchSide
    timer: Timer
    iters: int
    warmup: int
    #: Called with a description before each step (progress for the hang watchdog).
    on_step: Callable[[str], None] = lambda _: None
    #: Called with the step's weight before each step (the run's forecast, colbench.host.pace).
    on_weight: Callable[[float], None] = lambda _: None

    def run(
        self,
        what: str,
        steps: Sequence[Step],
        make_call: Callable[[str, int], Callable[[], None]],
        both_report: bool = False,
        weight: float = 1.0,
    ) -> Times:
        """Time each step's pairs; returns this rank's times as sender.

        ``both_report``: both ranks of a pair send (bidirectional), each reports its
        own direction; otherwise only the step's source does. ``weight``: each step's,
        for the forecast.
        """
        mine: Times = {}
        for index, step in enumerate(steps):
            self.on_weight(weight)
            self.on_step(f"{what} step {index + 1}/{len(steps)}")
            where = role(step, self.rank)
            call = None if where is None else make_call(*where)
            times = self.timed(call, self.iters)
            if where is not None and (where[0] == "src" or both_report):
                mine[(self.rank, where[1])] = times
        self.side.barrier()
        return mine

    def timed(
        self, call: Callable[[], None] | None, iters: int, warmup: int | None = None
    ) -> list[float]:
        """This rank's batch of a step (the sweep's, colbench.bench.timing.timed_batch);
        ``call`` None: not in the step. The barrier comes first, so no pair sends while
        the previous step's still time, and a step's pairs start together; the warm-up is
        never empty, as a pair's first message sets up its connection."""
        warmup = max(1, self.warmup if warmup is None else warmup)
        (batch,) = timed_batch(
            self.side, self.timer, call, iters, warmup=warmup, gather=False, barrier_first=True
        )
        return batch.times_us


def _timed_barrier(side: BatchSide) -> float:
    begun = time.perf_counter()
    side.barrier()
    return time.perf_counter() - begun


def time_probe(
    stepper: Stepper,
    step: Step,
    bandwidth: Callable[[str, int], Callable[[], None]],
    latency: Callable[[str, int], Callable[[], None]],
    trips: int,
) -> list[float]:
    """This rank's (one bandwidth iteration, one round trip, one barrier) in seconds on
    ``step``'s pairs, after a message that sets each pair's connection up
    (colbench.commands.p2p.budget prices the plan from the slowest rank's)."""
    stepper.on_step("probe: one message per pair of the first step")
    stepper.side.barrier()
    # The fastest of a few, as for round trips: one barrier may meet a busy host, and a
    # pass has a barrier per step, so one slow sample priced every step (3x a pass's time).
    barrier_s = min(_timed_barrier(stepper.side) for _ in range(max(1, trips)))
    where = role(step, stepper.rank)
    message = None if where is None else bandwidth(*where)
    ping = None if where is None else latency(*where)
    # One untimed message each, which sets the pair's connection up.
    message_s = sum(stepper.timed(message, 1, warmup=1)) / 1e6
    trip_s = min(stepper.timed(ping, trips, warmup=1), default=0.0) / 1e6
    return [message_s, trip_s, barrier_s]
