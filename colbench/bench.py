"""The per-rank loop: layout -> fill -> warm up -> time -> combine -> verify -> rows.

Runs identically in every rank. It treats every collective alike through the op
contract (:mod:`colbench.ops.base`); only rank 0 receives a sink for the rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.distributed as dist

from colbench.config import SweepConfig, placements_for
from colbench.dtypes import DTYPES, NO_REDOP, redop_supported
from colbench.groups import Subgroup
from colbench.memory import buffer_bytes, is_out_of_memory
from colbench.ops.base import Buffers, Collective, Context, Layout, Storage
from colbench.results import SCHEMA_VERSION, STATUS_OK, STATUS_OOM
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
        # The runner and the bench loop also assign ``phase`` directly: each phase, like
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


def plan(cfg: SweepConfig, world_size: int, backend: str) -> list[Work]:
    """Expand the config into the work this world runs, in table order."""
    out: list[Work] = []
    for coll in cfg.collectives():
        placements = placements_for(coll, cfg)
        if coll.unsupported(world_size, backend) or not placements:
            continue
        if not coll.sized:
            layout = coll.layout(0, 1, world_size)
            out.append(Work(coll, cfg.dtypes[0], NO_REDOP, (0,), (layout,), placements))
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
    times: dict[str, float],
    wrong: int | None,
    iters: int | None = None,
    repeat: int = 0,
) -> dict[str, Any]:
    """One CSV row; bandwidth is computed only here, from the combined time.

    ``iters`` is the timed batch's length when it differs from ``cfg.iters``
    (``--time-budget`` picks it per size).
    """
    coll = work.coll
    algbw = coll.algbw_gbps(layout.size_bytes, times["time_us"])
    busbw = algbw * coll.busbw_factor(info.group_size)
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
        **times,
        "algbw_gbps": algbw,
        "busbw_gbps": busbw,
        # Every group moves its own data at the same time: their bus bandwidths add up.
        "aggbw_gbps": busbw * info.groups,
        "wrong": wrong,
        "status": STATUS_OK,
        "repeat": repeat,
    }


def oom_row(
    info: RunInfo,
    cfg: SweepConfig,
    work: Work,
    requested_bytes: int,
    layout: Layout,
    in_place: bool,
    repeat: int = 0,
) -> dict[str, Any]:
    """A row for a size whose buffers could not be allocated on some rank: no numbers."""
    columns = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")
    zeros = dict.fromkeys(columns, 0.0)
    row = make_row(info, cfg, work, requested_bytes, layout, in_place, zeros, None, repeat)
    row.update(dict.fromkeys((*columns, "algbw_gbps", "busbw_gbps")), status=STATUS_OOM)
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
    items = [(w.coll.name, w.dtype, w.redop, w.requested, w.placements) for w in work]
    fields = (
        cfg.iters, cfg.warmup, cfg.check, cfg.root, cfg.seed, cfg.average, cfg.group_size,
        cfg.repeat,
    )  # fmt: skip
    return hashlib.sha256(repr((items, fields)).encode()).hexdigest()[:16]


class _Fault:
    """``COLBENCH_FAULT=RANK:WHEN[:raise|exit|hang]``: make RANK fail at its WHEN-th timed
    batch, or with WHEN ``init`` as its communicator starts (see :meth:`at_init`).

    ``hang`` blocks the rank's main thread for ever, as a rank stuck outside any
    collective would. A testing aid for the failure-handling tests (like torch's own
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
        if int(parts[0]) == rank:
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
        if self.action == "hang":
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
    """The loop of one rank over the whole plan."""

    def __init__(
        self,
        cfg: SweepConfig,
        info: RunInfo,
        rank: int,
        device: torch.device,
        timer: Timer,
        sink: RowSink | None,
        in_flight: InFlight | None = None,
        subgroup: Subgroup | None = None,
    ) -> None:
        self.cfg = cfg
        self.info = info
        self.rank = rank
        self.device = device
        self.timer = timer
        self.sink = sink
        self.in_flight = in_flight or InFlight()
        self._fault = _Fault(rank, os.environ.get("COLBENCH_FAULT"))
        self.subgroup = subgroup

    def run(self, work: Sequence[Work]) -> None:
        # Repeats go around the whole plan rather than back to back per size, so a slow
        # spell of the machine (another job, a frequency drop) lands in one sample of
        # many rows instead of in every sample of one row: the gate needs independent
        # samples per row to judge whether a change is real.
        for repeat in range(self.cfg.repeat):
            for item in work:
                if self.sink is not None and item.skipped_sizes and repeat == 0:
                    self.sink.note(
                        f"{item.coll.name} {item.dtype}: {len(item.skipped_sizes)} size(s) up "
                        f"to {max(item.skipped_sizes)} B leave no whole 16-byte chunk per rank; "
                        "skipped"
                    )
                for rows in self._measure_work(item, repeat):
                    if self.sink is not None:
                        self.sink.rows(item.coll, rows)

    def _context(self, item: Work) -> Context:
        sub = self.subgroup
        return Context(
            rank=self.rank if sub is None else sub.rank,
            world_size=self.info.world_size if sub is None else sub.size,
            root=self.cfg.root,
            dtype=DTYPES[item.dtype],
            redop=item.redop,
            seed=self.cfg.seed,
            device=self.device,
            group=None if sub is None else sub.group,
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
            agreed = torch.tensor([ok], dtype=torch.int64, device=self.device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
            if int(agreed.item()) == 1:
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
        usable, storages = self._allocate(item, ctx)
        for index, (requested, layout) in enumerate(zip(item.requested, item.layouts, strict=True)):
            flight.size_bytes = layout.size_bytes
            rows = []
            for placement in item.placements:
                in_place = placement == "in"
                if index >= usable:
                    rows.append(
                        oom_row(self.info, self.cfg, item, requested, layout, in_place, repeat)
                    )
                    continue
                sets = [coll.views(st, layout, ctx, in_place) for st in storages[placement]]
                bufs = sets[0]
                times, iters = self._time(coll, sets, ctx)
                wrong = self._verify(coll, bufs, ctx) if self.cfg.check and coll.sized else None
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
                    )
                )
            yield rows
        flight.op, flight.dtype, flight.size_bytes, flight.phase = "", "", None, "between ops"
        del storages

    def _time(
        self, coll: Collective, sets: Sequence[Buffers], ctx: Context
    ) -> tuple[dict[str, float], int]:
        """Warm up, then time one batch; returns the combined times and the batch length."""
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
        flight.step("barrier")
        dist.barrier()
        flight.step("timed batch")
        self._fault.tick()
        iters = self.cfg.iters
        iter_us = self.timer.time_batch(call, iters)
        budget_s = self.cfg.time_budget_s
        if budget_s is not None:
            # pyperf-style calibration: the fixed batch above estimates the cost of one
            # call; if the budget allows more, time a longer batch (all ranks agree on
            # its length) and keep that instead.
            iters = self._budget_iters(iter_us, budget_s)
            if iters > self.cfg.iters:
                dist.barrier()
                iter_us = self.timer.time_batch(call, iters)
            else:
                iters = self.cfg.iters
        flight.step("combining times")
        return combine_times(self._gather_times(iter_us), self.cfg.average), iters

    def _budget_iters(self, calibration_us: list[float], budget_s: float) -> int:
        """Iterations that fill ``budget_s`` at the slowest rank's pace (agreed by all)."""
        per_call_us = torch.tensor(
            [max(statistics.median(calibration_us), 1e-3)], dtype=torch.float64, device=self.device
        )
        dist.all_reduce(per_call_us, op=dist.ReduceOp.MAX)
        return min(MAX_BUDGET_ITERS, int(budget_s * 1e6 / float(per_call_us.item())))

    def _gather_times(self, iter_us: list[float]) -> list[list[float]]:
        n = self.info.world_size
        mine = torch.tensor(iter_us, dtype=torch.float64, device=self.device)
        every = torch.empty(n * len(iter_us), dtype=torch.float64, device=self.device)
        _all_gather(every, mine)
        return every.view(n, len(iter_us)).tolist()

    def _verify(self, coll: Collective, bufs: Buffers, ctx: Context) -> int:
        self.in_flight.step("verification")
        coll.fill(bufs, ctx)
        coll.run(bufs, ctx)
        self.timer.synchronize()
        wrong = torch.tensor([coll.count_wrong(bufs, ctx)], dtype=torch.int64, device=self.device)
        dist.all_reduce(wrong)
        return int(wrong.item())


_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
