"""The per-rank loop: layout -> fill -> warm up -> time -> combine -> verify -> rows.

Runs identically in every rank. It treats every collective alike through the op
contract (:mod:`colbench.ops.base`); only rank 0 receives a sink for the rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from colbench import nccl_algo
from colbench.config import SweepConfig, placements_for
from colbench.dtypes import DTYPES, NO_REDOP, redop_supported
from colbench.groups import Groups
from colbench.memory import buffer_bytes, is_out_of_memory
from colbench.ops.base import Buffers, Collective, Context, Layout, Storage
from colbench.results import (
    SCHEMA_VERSION,
    STATUS_OK,
    STATUS_OOM,
    STATUS_UNSUPPORTED,
    host_bound,
)
from colbench.timing import Timer


class RowSink(Protocol):
    """Where rank 0 sends rows; the CSV writer, the table and the progress bar hang off it."""

    def rows(self, coll: Collective, rows: Sequence[dict[str, Any]]) -> None:
        """All placements of one (op, dtype, redop, size), as soon as they are measured."""

    def note(self, message: str) -> None:
        """A one-line remark (skipped sizes and the like)."""


@dataclass(frozen=True)
class RunInfo:
    """Facts about the run that every row repeats."""

    run_id: str
    backend: str
    device_name: str
    world_size: int
    nnodes: int
    variant: str = ""
    #: Groups the world is split into (--group-size); each has world_size // groups ranks.
    groups: int = 1

    @property
    def group_size(self) -> int:
        """Ranks one collective runs on: the n of the bandwidth formulas."""
        return self.world_size // self.groups


@dataclass
class InFlight:
    """What this rank is doing now, so a failure can name it.

    With a store (the parent's TCPStore), every step is published under
    ``progress/<rank>`` so the parent can name the op and size a rank died in, and tell
    which ranks never reached a collective the others are stuck in.
    """

    op: str = ""
    dtype: str = ""
    size_bytes: int | None = None
    phase: str = "setup"
    #: Collective steps begun so far; ranks that agree on the plan agree on this count.
    seq: int = 0
    store: Any = None
    rank: int = 0
    #: When and where the first exception hit this rank (wall clock, for ordering ranks).
    failed_at: float | None = None
    failed_during: str | None = None
    #: When the current step or phase began (time.monotonic), for the hang watchdog.
    since_s: float = field(default_factory=time.monotonic)

    def __setattr__(self, name: str, value: Any) -> None:
        # colbench.run and the bench loop also assign ``phase`` directly: each phase, like
        # each step, starts the watchdog's clock afresh.
        if name == "phase":
            object.__setattr__(self, "since_s", time.monotonic())
        object.__setattr__(self, name, value)

    def failed(self, exc: BaseException) -> None:
        if self.failed_at is None:
            self.failed_at = time.time()
            self.failed_during = self.describe()

    def step(self, phase: str) -> None:
        self.phase = phase
        self.seq += 1
        if self.store is not None:
            self.store.set(f"progress/{self.rank}", self.encode())

    def encode(self) -> str:
        size = "" if self.size_bytes is None else str(self.size_bytes)
        return "|".join((str(self.seq), self.op, self.dtype, size, self.phase))

    @classmethod
    def decode(cls, text: str) -> InFlight:
        seq, op, dtype, size, phase = text.split("|", 4)
        return cls(op, dtype, int(size) if size else None, phase, int(seq))

    def describe(self) -> str:
        if not self.op:
            return self.phase
        size = "" if self.size_bytes is None else f" size {self.size_bytes} B"
        return f"{self.phase} of {self.op} {self.dtype}{size}".strip()


@dataclass(frozen=True)
class Work:
    """One (op, dtype, redop) combination and the sizes it runs."""

    coll: Collective
    dtype: str
    redop: str
    requested: tuple[int, ...]
    layouts: tuple[Layout, ...]
    placements: tuple[str, ...]
    skipped_sizes: tuple[int, ...] = field(default=())
    #: Why the backend refuses this work under the run's settings (rows get status
    #: ``unsupported`` and no collective is called); empty when it runs.
    unsupported: str = ""


def refused_by_backend(
    coll: Collective, world_size: int, backend: str, env: Mapping[str, str]
) -> str:
    """Why NCCL would refuse ``coll`` under this environment ("" if it would run).

    A world of one never communicates, and NCCL ignores NCCL_ALGO there.
    """
    if backend != "nccl" or world_size < 2 or not coll.nccl_algorithms:
        return ""
    reason = nccl_algo.unsupported_reason(
        env.get("NCCL_ALGO"), coll.nccl_name, coll.nccl_algorithms
    )
    return reason or ""


def plan(
    cfg: SweepConfig, world_size: int, backend: str, env: Mapping[str, str] | None = None
) -> list[Work]:
    """Expand the config into the work this world runs, in table order.

    ``env`` (default: this process's environment) is where NCCL's settings are read.
    """
    env = os.environ if env is None else env
    out: list[Work] = []
    for coll in cfg.collectives():
        placements = placements_for(coll, cfg)
        if coll.unsupported(world_size, backend) or not placements:
            continue
        if cfg.cuda_graph and not coll.graph_capturable:
            continue
        refused = refused_by_backend(coll, world_size, backend, env)
        if not coll.sized:
            layout = coll.layout(0, 1, world_size)
            out.append(
                Work(coll, cfg.dtypes[0], NO_REDOP, (0,), (layout,), placements, (), refused)
            )
            continue
        redops = cfg.redops if coll.uses_redop else (NO_REDOP,)
        for dtype_name in cfg.dtypes:
            dtype = DTYPES[dtype_name]
            for redop in redops:
                if redop != NO_REDOP and redop_supported(redop, dtype):
                    continue
                pairs = [(s, coll.layout(s, dtype.elem_bytes, world_size)) for s in cfg.sizes_bytes]
                kept = [(s, lay) for s, lay in pairs if lay.count > 0]
                skipped = tuple(s for s, lay in pairs if lay.count == 0)
                # Kept even with no size left, so the skipped sizes are still reported.
                if kept or skipped:
                    out.append(
                        Work(
                            coll,
                            dtype_name,
                            redop,
                            tuple(s for s, _ in kept),
                            tuple(lay for _, lay in kept),
                            placements,
                            skipped,
                            refused,
                        )
                    )
    return out


def count_units(work: Sequence[Work]) -> int:
    """Measured rows the plan will produce (for the progress bar)."""
    return sum(len(w.layouts) * len(w.placements) for w in work)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending sequence."""
    if not sorted_values:
        raise ValueError("percentile of nothing")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def combine_times(per_rank_iters_us: Sequence[Sequence[float]], average: str) -> dict[str, float]:
    """Combine every rank's per-iteration times into one row's time columns.

    ``time_us`` is nccl-tests' number: each rank's batch mean, combined across ranks by
    ``average`` (avg, min, max or rank0). The per-iteration statistics use, for each
    iteration, the slowest rank's time, since a collective is done only when all are.
    """
    batch_means = [sum(times) / len(times) for times in per_rank_iters_us]
    if average == "avg":
        time_us = sum(batch_means) / len(batch_means)
    elif average == "min":
        time_us = min(batch_means)
    elif average == "max":
        time_us = max(batch_means)
    elif average == "rank0":
        time_us = batch_means[0]
    else:
        raise ValueError(f"unknown average {average!r}")
    slowest = sorted(max(column) for column in zip(*per_rank_iters_us, strict=True))
    return {
        "time_us": time_us,
        "time_min_us": slowest[0],
        "time_p50_us": percentile(slowest, 50),
        "time_p99_us": percentile(slowest, 99),
        "time_max_us": slowest[-1],
    }


def make_row(
    info: RunInfo,
    cfg: SweepConfig,
    work: Work,
    requested_bytes: int,
    layout: Layout,
    in_place: bool,
    times: Mapping[str, float | None],
    wrong: int | None,
    iters: int | None = None,
    repeat: int = 0,
    enqueue_us: float | None = None,
) -> dict[str, Any]:
    """One CSV row; bandwidth is computed only here, from the combined time.

    ``iters`` is the number of timed calls when it differs from ``cfg.iters``
    (``--time-budget`` picks it per size; a CUDA graph is replayed several times).
    ``times`` values are None for a row without a measurement.
    """
    coll = work.coll
    time_us = times["time_us"]
    algbw = None if time_us is None else coll.algbw_gbps(layout.size_bytes, time_us)
    busbw = None if algbw is None else algbw * coll.busbw_factor(info.group_size)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": info.run_id,
        "variant": info.variant,
        "backend": info.backend,
        "device": info.device_name,
        "world_size": info.world_size,
        "nnodes": info.nnodes,
        "group_size": info.group_size,
        "groups": info.groups,
        "op": coll.name,
        "dtype": work.dtype if coll.sized else "none",
        "redop": work.redop,
        "root": cfg.root if coll.rooted else -1,
        "in_place": int(in_place),
        "requested_bytes": requested_bytes,
        "size_bytes": layout.size_bytes,
        "count": layout.count,
        "warmup": cfg.warmup,
        "iters": cfg.iters if iters is None else iters,
        "average": cfg.average,
        **{column: times[column] for column in TIME_COLUMNS},
        "algbw_gbps": algbw,
        "busbw_gbps": busbw,
        # Every group moves its own data at the same time: their bus bandwidths add up.
        "aggbw_gbps": None if busbw is None else busbw * info.groups,
        "wrong": wrong,
        "status": STATUS_OK,
        "repeat": repeat,
        "enqueue_us": enqueue_us,
        "host_bound": host_bound(enqueue_us, time_us),
    }


#: The time columns :func:`combine_times` produces, in schema order.
TIME_COLUMNS = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")


def unmeasured_row(
    info: RunInfo,
    cfg: SweepConfig,
    work: Work,
    requested_bytes: int,
    layout: Layout,
    in_place: bool,
    status: str,
    repeat: int = 0,
) -> dict[str, Any]:
    """A row without numbers: buffers that could not be allocated (``oom``) or a
    collective the backend refuses under the run's settings (``unsupported``)."""
    nothing = dict.fromkeys(TIME_COLUMNS)
    row = make_row(info, cfg, work, requested_bytes, layout, in_place, nothing, None, None, repeat)
    row["status"] = status
    return row


def fit_to_memory(
    work: Sequence[Work], budget_bytes: int, sets: int = 1
) -> tuple[list[Work], list[str]]:
    """Drop the sizes whose buffers would not fit in ``budget_bytes`` per rank.

    Every rank must call this with the same budget (the minimum over ranks) so that
    the plans stay identical.
    """
    kept: list[Work] = []
    notes: list[str] = []
    for item in work:
        if not item.layouts:
            kept.append(item)
            continue
        elem = DTYPES[item.dtype].elem_bytes
        fits = [
            buffer_bytes(item.coll, lay, elem, item.placements, sets) <= budget_bytes
            for lay in item.layouts
        ]
        n_fit = sum(fits)
        if n_fit < len(fits):
            first_bad = item.layouts[n_fit]
            need = buffer_bytes(item.coll, first_bad, elem, item.placements, sets)
            notes.append(
                f"{item.coll.name} {item.dtype}: sizes from {item.requested[n_fit]} B need "
                f"{need / 2**20:.0f} MiB per rank, more than the {budget_bytes / 2**20:.0f} MiB "
                "available"
            )
        if n_fit:
            kept.append(
                dataclasses.replace(
                    item, requested=item.requested[:n_fit], layouts=item.layouts[:n_fit]
                )
            )
    return kept, notes


def plan_digest(cfg: SweepConfig, work: Sequence[Work]) -> str:
    """A hash of everything that decides which collectives a rank will call, in order.

    Ranks that disagree would call different collectives and hang or abort in the
    transport; comparing this first turns that into one clear message.
    """
    items = [
        (w.coll.name, w.dtype, w.redop, w.requested, w.placements, w.unsupported) for w in work
    ]
    # Every option counts unless it provably cannot change which collectives run, in
    # which order: a new option is then covered without anyone remembering to add it.
    fields = {
        name: value for name, value in sorted(cfg.to_dict().items()) if name not in DIGEST_EXEMPT
    }
    return hashlib.sha256(repr((items, fields)).encode()).hexdigest()[:16]


#: SweepConfig fields that never change the sequence of collectives a rank calls:
#: where output goes and how it is shown, limits that ranks agree on by a minimum
#: (memory) or that only bound waiting (timeouts), and what only the parent reads.
DIGEST_EXEMPT = frozenset(
    {
        "out_dir",
        "results_root",
        "progress",
        "table",
        "plot",
        "command_line",
        "debug",
        "timeout_s",
        "init_timeout_s",
        "memory_limit_bytes",
        "nprocs",
        "backend",
        "env_axes",
    }
)


class _Fault:
    """``COLBENCH_FAULT=RANK:WHEN[:raise|exit|hang|device-hang]``: make RANK fail at its
    WHEN-th timed batch, or with WHEN ``init`` as its communicator starts (see
    :meth:`at_init`).

    ``hang`` blocks the rank's main thread for ever, as a rank stuck outside any
    collective would; ``device-hang`` stalls its GPU instead (``hang`` on CPU).
    A testing aid for the failure-handling tests (like torch's own
    debug variables); unset in normal use.
    """

    def __init__(self, rank: int, spec: str | None) -> None:
        self.at_step: int | None = None
        self.at_start = False
        self.action = "raise"
        self.count = 0
        if not spec:
            return
        parts = spec.split(":")
        # RANK:start:... is the spawned rank's own hook (run/spawn.py), read before this exists.
        if int(parts[0]) == rank and parts[1] != "start":
            self.at_start = parts[1] == "init"
            self.at_step = None if self.at_start else int(parts[1])
            self.action = parts[2] if len(parts) > 2 else "raise"

    def tick(self) -> None:
        if self.at_step is None:
            return
        self.count += 1
        if self.count == self.at_step:
            self._fail(f"timed batch {self.count}")

    def at_init(self) -> None:
        """Called as the rank's communicator starts, before ``init_process_group``."""
        if self.at_start:
            self._fail("communicator start-up")

    def _fail(self, where: str) -> None:
        if self.action == "exit":
            os._exit(7)
        if self.action == "device-hang" and torch.cuda.is_initialized():
            # A kernel that spins far past any --timeout: the host then blocks in a CUDA
            # synchronize, as when a collective or a graph replay never completes.
            torch.cuda._sleep(1 << 42)
            return
        if self.action in ("hang", "device-hang"):
            while True:
                time.sleep(3600)
        raise RuntimeError(f"fault injected by COLBENCH_FAULT at {where}")


#: Upper bound on a --time-budget batch, so a sub-microsecond call cannot run for ever.
MAX_BUDGET_ITERS = 100_000


class _Rotation:
    """Calls each buffer set's collective in turn (``--rotate``)."""

    __slots__ = ("_calls", "_next")

    def __init__(self, calls: Sequence[Any]) -> None:
        self._calls = tuple(calls)
        self._next = 0

    def __call__(self) -> None:
        self._calls[self._next % len(self._calls)]()
        self._next += 1


class RankBench:
    """The loop of one rank over the whole plan.

    The measured collective (and its warm-up) runs on the measured group; everything
    else that talks to other ranks (barriers, agreements, gathering times and
    wrong-element counts) goes over ``groups.side``.
    """

    def __init__(
        self,
        cfg: SweepConfig,
        info: RunInfo,
        rank: int,
        device: torch.device,
        timer: Timer,
        sink: RowSink | None,
        groups: Groups,
        in_flight: InFlight | None = None,
    ) -> None:
        self.cfg = cfg
        self.info = info
        self.rank = rank
        self.device = device
        self.timer = timer
        self.sink = sink
        self.groups = groups
        self.side = groups.side
        self.in_flight = in_flight or InFlight()
        self._fault = _Fault(rank, os.environ.get("COLBENCH_FAULT"))

    def run(self, work: Sequence[Work]) -> None:
        # Repeats go around the whole plan rather than back to back per size, so a slow
        # spell of the machine (another job, a frequency drop) lands in one sample of
        # many rows instead of in every sample of one row: the gate needs independent
        # samples per row to judge whether a change is real.
        for repeat in range(self.cfg.repeat):
            for item in work:
                if self.sink is not None and repeat == 0:
                    self._notes(item)
                for rows in self._measure_work(item, repeat):
                    if self.sink is not None:
                        self.sink.rows(item.coll, rows)

    def _notes(self, item: Work) -> None:
        assert self.sink is not None
        if item.skipped_sizes:
            self.sink.note(
                f"{item.coll.name} {item.dtype}: {len(item.skipped_sizes)} size(s) up "
                f"to {max(item.skipped_sizes)} B leave no whole 16-byte chunk per rank; "
                "skipped"
            )
        if item.unsupported:
            self.sink.note(f"{item.coll.name} {item.dtype}: unsupported: {item.unsupported}")

    def _context(self, item: Work) -> Context:
        sub = self.groups.subgroup
        return Context(
            rank=self.rank if sub is None else sub.rank,
            world_size=self.info.world_size if sub is None else sub.size,
            root=self.cfg.root,
            dtype=DTYPES[item.dtype],
            redop=item.redop,
            seed=self.cfg.seed,
            device=self.device,
            group=self.groups.measured,
            global_ranks=() if sub is None else sub.ranks,
        )

    def _allocate(self, item: Work, ctx: Context) -> tuple[int, dict[str, list[Storage]]]:
        """Storage for the largest size every rank could allocate: (sizes usable, storages).

        All ranks agree on the outcome (a failed allocation on one rank must not send
        the others into a collective alone), so a size that fails anywhere fails
        everywhere, and smaller sizes are tried next.
        """
        flight = self.in_flight
        for usable in range(len(item.layouts), 0, -1):
            layout = item.layouts[usable - 1]
            flight.size_bytes = layout.size_bytes
            flight.step("allocation")
            storages: dict[str, list[Storage]] = {}
            try:
                for placement in item.placements:
                    # --rotate: several buffer sets, cycled call by call, so no call finds
                    # its data still in cache from the previous one.
                    storages[placement] = [
                        item.coll.allocate(layout, ctx, placement == "in")
                        for _ in range(self.cfg.rotate)
                    ]
                ok = 1
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                storages.clear()
                ok = 0
            if self.side.min_int(ok) == 1:
                return usable, storages
            storages.clear()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return 0, {}

    def _measure_work(self, item: Work, repeat: int = 0) -> Iterator[list[dict[str, Any]]]:
        coll = item.coll
        ctx = self._context(item)
        flight = self.in_flight
        flight.op, flight.dtype, flight.size_bytes = coll.name, item.dtype, None
        # One allocation per placement for the largest size; every size is a view of it.
        usable, storages = (0, {}) if item.unsupported else self._allocate(item, ctx)
        status = STATUS_UNSUPPORTED if item.unsupported else STATUS_OOM
        for index, (requested, layout) in enumerate(zip(item.requested, item.layouts, strict=True)):
            flight.size_bytes = layout.size_bytes
            rows = []
            for placement in item.placements:
                in_place = placement == "in"
                if index >= usable:
                    rows.append(
                        unmeasured_row(
                            self.info, self.cfg, item, requested, layout, in_place, status, repeat
                        )
                    )
                    continue
                sets = [coll.views(st, layout, ctx, in_place) for st in storages[placement]]
                times, iters, enqueue_us = self._time(coll, sets, ctx)
                wrong = self._verify(coll, sets[0], ctx) if self.cfg.check and coll.sized else None
                rows.append(
                    make_row(
                        self.info,
                        self.cfg,
                        item,
                        requested,
                        layout,
                        in_place,
                        times,
                        wrong,
                        iters=iters,
                        repeat=repeat,
                        enqueue_us=enqueue_us,
                    )
                )
            yield rows
        flight.op, flight.dtype, flight.size_bytes, flight.phase = "", "", None, "between ops"
        del storages

    def _time(
        self, coll: Collective, sets: Sequence[Buffers], ctx: Context
    ) -> tuple[dict[str, float], int, float | None]:
        """Warm up, then time one batch: (combined times, timed calls, enqueue time per call)."""
        flight = self.in_flight
        flight.step("fill")
        for bufs in sets:
            coll.fill(bufs, ctx)
        calls = [coll.bind(bufs, ctx) for bufs in sets]
        call = calls[0] if len(calls) == 1 else _Rotation(calls)
        flight.step("warm-up")
        for _ in range(self.cfg.warmup):
            call()
        self.timer.synchronize()
        iter_us = self._timed_batch(call, self.cfg.iters)
        budget_s = self.cfg.time_budget_s
        if budget_s is not None:
            # pyperf-style calibration: the fixed batch above estimates the cost of one
            # call; if the budget allows more, time a longer batch (all ranks agree on
            # its length) and keep that instead.
            iters = self._budget_iters(iter_us, budget_s)
            if iters > self.cfg.iters:
                iter_us = self._timed_batch(call, iters)
        enqueue_us = self.timer.enqueue_us
        flight.step("combining times")
        # The enqueue time rides along as one more column (NaN where calls block).
        every = self.side.gather_floats([*iter_us, math.nan if enqueue_us is None else enqueue_us])
        times = combine_times([rank[:-1] for rank in every], self.cfg.average)
        enqueues = [rank[-1] for rank in every]
        # The rank that waited longest to hand its calls over decides whether the GPU
        # was starved.
        slowest_enqueue = None if enqueue_us is None else max(enqueues)
        return times, len(iter_us), slowest_enqueue

    def _timed_batch(self, call: Any, iters: int) -> list[float]:
        # Progress is published before the barrier: a store round trip between the
        # barrier and the first timestamp would be timed, and would skew the ranks.
        self.in_flight.step("timed batch")
        self._fault.tick()
        self.side.barrier()
        return self.timer.time_batch(call, iters)

    def _budget_iters(self, calibration_us: list[float], budget_s: float) -> int:
        """Iterations that fill ``budget_s`` at the slowest rank's pace (agreed by all)."""
        per_call_us = self.side.max_float(max(statistics.median(calibration_us), 1e-3))
        return min(MAX_BUDGET_ITERS, int(budget_s * 1e6 / per_call_us))

    def _verify(self, coll: Collective, bufs: Buffers, ctx: Context) -> int:
        self.in_flight.step("verification")
        coll.fill(bufs, ctx)
        # Run the way the timed batch ran: a replayed graph under --cuda-graph.
        self.timer.run_once(coll.bind(bufs, ctx))
        self.timer.synchronize()
        return self.side.sum_int(coll.count_wrong(bufs, ctx))
