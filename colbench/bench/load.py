"""The ``--contend`` load in a rank: a GEMM loop or a second collective in a thread of its
own, running beside the measured collective, and its rate alone and beside it, per size:
how and why is docs/contend.md's "How it is measured". On a GPU the load queues its work
on a CUDA stream of its own (:class:`SideStream`), as a training step's compute overlaps
its communication; on the CPU its thread competes for the cores gloo's threads need.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.bench.ops.base import Collective, Context
from colbench.bench.ops.data import DTYPES
from colbench.config.contend import LoadSpec, load_collective
from colbench.config.model import SweepConfig
from colbench.host.job import InFlight

#: Seconds the load runs alone, without the collective, in every size's turn: long
#: enough for several products or calls, short beside a turn's timed batches.
LOAD_ALONE_S = 0.05
#: A GPU's products queued per synchronisation: the stream is never left empty while the
#: host counts, yet the count trails the device by at most this many.
GPU_PRODUCTS_PER_SYNC = 4
#: The rows' columns a load fills: (alone, beside) for each kind of rate.
GEMM_COLUMNS = ("load_alone_tflops", "load_beside_tflops")
COLLECTIVE_COLUMNS = ("load_alone_busbw_gbps", "load_beside_busbw_gbps")
#: The rows' load columns without a load: all empty.
NO_LOAD_CELLS: dict[str, Any] = dict.fromkeys(GEMM_COLUMNS + COLLECTIVE_COLUMNS)


class SideStream:
    """Where a load queues its work: a CUDA stream of its own on a GPU (the measured
    collective runs on the current stream), the load's thread itself on the CPU."""

    def __init__(self, device: Any) -> None:
        import torch

        self.stream = torch.cuda.Stream(device=device) if device.type == "cuda" else None

    def active(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        return torch.cuda.stream(self.stream)  # a stream of None: nothing to switch to

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()


class Load:
    """A loop in a thread: :meth:`start`, :meth:`stop`, and its rate while it ran."""

    def __init__(self, spec: LoadSpec, stream: Any) -> None:
        self.spec = spec
        self.stream = stream
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._running = threading.Event()
        self._error: BaseException | None = None
        self._steps = 0
        self._elapsed_s = 0.0

    def start(self) -> None:
        """Start the loop; returns once its first step is under way."""
        self._stopping.clear()
        self._running.clear()
        self._steps, self._elapsed_s, self._error = 0, 0.0, None
        self._thread = threading.Thread(target=self._loop, name="colbench-load", daemon=True)
        self._thread.start()
        self._running.wait()

    def stop(self) -> float:
        """End the loop after the step under way (at least one is done); its rate in this
        rank over the steps done (:meth:`rate`'s unit)."""
        assert self._thread is not None, "stop() without start()"
        self._stopping.set()
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise self._error
        return self.rate(self._steps, self._elapsed_s)

    def alone(self, window_s: float = LOAD_ALONE_S) -> float:
        """The load's rate without the measured collective, over ``window_s``."""
        self.start()
        time.sleep(window_s)
        return self.stop()

    def _loop(self) -> None:
        try:
            with self.stream.active():
                started = time.perf_counter()
                self._running.set()
                while True:
                    self._step()
                    self.stream.synchronize()
                    self._steps += 1
                    self._elapsed_s = time.perf_counter() - started
                    if self._finished():
                        return
        except BaseException as exc:  # raised again in the rank's own thread, by stop()
            self._error = exc
        finally:
            self._running.set()

    def _finished(self) -> bool:
        return self._stopping.is_set()

    def _step(self) -> None:
        raise NotImplementedError

    def rate(self, steps: int, elapsed_s: float) -> float:
        raise NotImplementedError


class GemmLoad(Load):
    """``gemm:N``: C = A @ B of N x N matrices, again and again; TFLOP/s."""

    def __init__(self, spec: LoadSpec, device: Any, stream: Any = None) -> None:
        import torch

        super().__init__(spec, SideStream(device) if stream is None else stream)
        # Values in [0, 1): a product's entries stay below N, within every float type.
        seeded, n, dtype = torch.Generator().manual_seed(0), spec.n, DTYPES[spec.dtype].torch
        self._a = torch.rand(n, n, generator=seeded).to(device=device, dtype=dtype)
        self._b = torch.rand(n, n, generator=seeded).to(device=device, dtype=dtype)
        self._out = torch.empty_like(self._a)
        self.products_per_step = GPU_PRODUCTS_PER_SYNC if device.type == "cuda" else 1

    def _step(self) -> None:
        import torch

        for _ in range(self.products_per_step):
            torch.matmul(self._a, self._b, out=self._out)

    def rate(self, steps: int, elapsed_s: float) -> float:
        flops = 2 * self.spec.n**3 * self.products_per_step * steps
        return flops / elapsed_s / 1e12 if elapsed_s > 0 else 0.0


class CollectiveLoad(Load):
    """``OP:SIZE``: the collective on a process group of its own, again and again; busbw.

    Every rank must make as many calls, so ranks agree when to stop: after each call a
    one-element all_reduce (MAX) of "asked to stop" on a gloo group of the load's own,
    and the loop ends where any rank asked. That agreement is part of every step, alone
    and beside, so the two rates compare.
    """

    def __init__(self, spec: LoadSpec, coll: Collective, ctx: Context, control: Any) -> None:
        import torch

        super().__init__(spec, SideStream(ctx.device))
        self.coll, self.ctx, self._control = coll, ctx, control
        self.layout = coll.layout(spec.size_bytes, ctx.dtype.elem_bytes, ctx.world_size)
        bufs = coll.views(coll.allocate(self.layout, ctx, False), self.layout, ctx, False)
        coll.fill(bufs, ctx)
        self._call = coll.bind(bufs, ctx)
        self._flag = torch.zeros(1, dtype=torch.int32)

    def _step(self) -> None:
        self._call()

    def _finished(self) -> bool:
        import torch.distributed as dist

        self._flag.fill_(int(self._stopping.is_set()))
        dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self._control)
        return bool(self._flag.item())

    def rate(self, steps: int, elapsed_s: float) -> float:
        if steps == 0 or elapsed_s <= 0:
            return 0.0
        time_us = elapsed_s / steps * 1e6
        algbw = self.coll.algbw_gbps(self.layout.size_bytes, time_us)
        return algbw * self.coll.busbw_factor(self.ctx.world_size)


def make_load(
    spec: LoadSpec,
    cfg: SweepConfig,
    device: Any,
    rank: int,
    world_size: int,
    backend: str,
    timeout_s: float,
) -> Load:
    """The load of one rank, run once (the first product, the first connections) so no
    measured window pays for its start. Every rank of the world calls it at the same
    point: a collective load makes two process groups."""
    load: Load
    if spec.is_gemm:
        load = GemmLoad(spec, device)
    else:
        import torch.distributed as dist

        timeout = _dt.timedelta(seconds=timeout_s)
        group = dist.new_group(backend=backend, timeout=timeout)
        control = dist.new_group(backend="gloo", timeout=timeout)
        ctx = Context(
            rank=rank,
            world_size=world_size,
            root=0,
            dtype=DTYPES[spec.dtype],
            redop="sum",
            seed=cfg.measure.seed,
            device=device,
            group=group,
        )
        load = CollectiveLoad(spec, load_collective(spec, cfg.measure), ctx, control)
    load.alone(0.0)
    return load


@dataclass
class Beside:
    """The load's rate in this rank while the collective ran (None: no load)."""

    rate: float | None = None


#: What runs beside a collective without a load: nothing, at no rate (never written).
NOTHING_BESIDE = Beside()


@contextlib.contextmanager
def running(load: Load | None, flight: InFlight) -> Iterator[Beside]:
    """The load running through the block (nothing without a load)."""
    beside = Beside()
    if load is None:
        yield beside
        return
    flight.step("starting the load")
    load.start()
    yield beside
    flight.step("stopping the load")
    beside.rate = load.stop()


def row_cells(spec: LoadSpec | None, every: Sequence[Sequence[float]] | None) -> dict[str, Any]:
    """The rows' load columns from every rank's (alone, beside) rates: the mean rank's.
    Empty without a load (the ``contend=none`` world) or without a measurement."""
    cells = dict(NO_LOAD_CELLS)
    if spec is None or not every:
        return cells
    columns = GEMM_COLUMNS if spec.is_gemm else COLLECTIVE_COLUMNS
    for column, rates in zip(columns, zip(*every, strict=True), strict=True):
        cells[column] = statistics.fmean(rates)
    return cells
