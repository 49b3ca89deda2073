"""The per-rank loop: layout -> fill -> warm up -> barrier -> time -> combine -> verify -> rows.

One size of one op is :meth:`RankBench.bench_time`, read top to bottom like nccl-tests'
BenchTime; the rest is the plan around it. Runs identically in every rank. It treats every
collective alike through the op contract (:mod:`colbench.bench.ops.base`); only rank 0
receives a sink for the rows.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from colbench.bench.groups import Engine, Groups, SideGroup, TorchEngine
from colbench.bench.load import NO_LOAD_CELLS, NOTHING_BESIDE, Beside, row_cells, running
from colbench.bench.memory import is_out_of_memory
from colbench.bench.ops.base import Buffers, Collective, Context, Layout, Storage
from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import RunInfo, Work, plan_notes, warmup_calls
from colbench.bench.rowmaker import combine_times, make_row, unmeasured_row
from colbench.bench.timing import Batch, HostTimer, Timer, rotation, timed_batch
from colbench.config.model import SweepConfig
from colbench.host.job import Fault, InFlight
from colbench.results.reporters.stragglers import RankTimes
from colbench.results.rows import STATUS_OOM, STATUS_UNSUPPORTED, Row


class RowSink(Protocol):
    """Where rank 0 sends rows; the CSV writer, the table and the progress bar hang off it."""

    def rows(self, coll: Collective, rows: Sequence[Row]) -> None:
        """All placements of one (op, dtype, redop, size), as soon as they are measured."""

    def note(self, message: str) -> None:
        """A one-line remark (skipped sizes and the like)."""

    def rank_times(self, row: Row, ranks: RankTimes) -> None:
        """Every rank's share of a measured row (asked for only with --per-rank)."""


#: Upper bound on a --time-budget batch, so a sub-microsecond call cannot run for ever.
MAX_BUDGET_ITERS = 100_000


@dataclass(frozen=True)
class BenchContext:
    """What one rank measures with, built once per rank: the config, the run's facts, the
    device and its timer, the groups, what the rank is doing now, and its turns."""

    cfg: SweepConfig
    info: RunInfo
    rank: int
    device: torch.device
    timer: Timer
    groups: Groups
    in_flight: InFlight = field(default_factory=InFlight)
    #: An interleaved variant run's turns (colbench.host.turns.Turns); None measures freely.
    turns: Any = None
    #: The --contend load (colbench.bench.load.Load) run beside every timed batch; None: none.
    load: Any = None
    #: What allocates the buffers and makes the timed call (--engine, colbench.direct).
    engine: Engine = field(default_factory=TorchEngine)

    @classmethod
    def on_cpu(
        cls, cfg: SweepConfig, info: RunInfo, rank: int, groups: Groups | None = None
    ) -> BenchContext:
        """A CPU rank timed by the host clock: the in-process harnesses of the tests and
        benchmarks, which start the default process group themselves (``groups``: else a
        side group over the whole world is made here)."""
        if groups is None:
            # A minute (colbench's own ranks take the side group's timeout from --timeout).
            groups = Groups(SideGroup.create(info.world_size, timeout_s=60.0))
        return cls(cfg, info, rank, torch.device("cpu"), HostTimer(), groups)


@dataclass
class RankBench:
    """The loop of one rank over the whole plan: the measured collective (and its warm-up)
    on the measured group, everything else that talks to other ranks over ``groups.side``."""

    context: BenchContext
    #: Rank 0's; None in the other ranks, which measure but report nothing.
    sink: RowSink | None = None
    #: The clock of ops that block the host (``Collective.blocks_host``) on any device.
    host_timer: Timer = field(default_factory=HostTimer)
    _fault: Fault = field(init=False)

    def __post_init__(self) -> None:
        self._fault = Fault(self.context.rank, os.environ.get("COLBENCH_FAULT"))

    @property
    def side(self) -> SideGroup:
        return self.context.groups.side

    def run(self, work: Sequence[Work]) -> None:
        # Repeats go around the whole plan rather than back to back per size, so a slow
        # spell of the machine (another job, a frequency drop) lands in one sample of
        # many rows instead of in every sample of one row: the gate needs independent
        # samples per row to judge whether a change is real.
        for repeat in range(self.context.cfg.measure.repeat):
            for item in work:
                if self.sink is not None and repeat == 0:
                    for note in plan_notes(item, self.context.engine):
                        self.sink.note(note)
                if self.context.turns is None:
                    for rows in self._measure_work(item, repeat):
                        self._emit(item, rows)
                elif not self._take_turns(item, repeat):
                    return

    def _emit(self, item: Work, rows: list[Row]) -> None:
        if self.sink is not None:
            self.sink.rows(item.coll, rows)

    def _take_turns(self, item: Work, repeat: int) -> bool:
        """Measure ``item`` one size per turn of an interleaved run; False: stopped. The
        size's rows are on disk before the turn passes, so the other world never measures
        while this one writes, and a failure loses no row already measured."""
        measured = self._measure_work(item, repeat)
        try:
            for _ in item.layouts:
                with self.context.turns.turn(self.context.in_flight) as go:
                    if not go:
                        return False
                    self._emit(item, next(measured))
        finally:
            measured.close()
        return True

    def _context(self, item: Work) -> Context:
        sub = self.context.groups.subgroup
        return Context(
            rank=self.context.rank if sub is None else sub.rank,
            world_size=self.context.info.world_size if sub is None else sub.size,
            root=max(item.root, 0),
            dtype=DTYPES[item.dtype],
            redop=item.redop,
            seed=self.context.cfg.measure.seed,
            device=self.context.device,
            group=self.context.groups.measured,
            global_ranks=() if sub is None else sub.ranks,
        )

    def _allocate(self, item: Work, ctx: Context) -> tuple[int, dict[str, list[Storage]]]:
        """Storage for the largest size every rank could allocate: (sizes usable, storages).
        A size that fails anywhere fails everywhere (a rank must not send the others into a
        collective alone), and smaller sizes are tried next."""
        flight = self.context.in_flight
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
                        self.context.engine.allocate(item.coll, layout, ctx, placement == "in")
                        for _ in range(self.context.cfg.measure.rotate)
                    ]
                ok = 1
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                ok = 0
            if self.side.min_int(ok) == 1:
                return usable, storages
            storages.clear()
            if self.context.device.type == "cuda":
                torch.cuda.empty_cache()
        return 0, {}

    def _measure_work(self, item: Work, repeat: int = 0) -> Generator[list[Row], None, None]:
        """One line of the plan (op, dtype, redop): buffers for the largest size every rank
        could allocate, then each size's rows, one per placement (:meth:`bench_time`)."""
        coll = item.coll
        ctx = self._context(item)
        flight = self.context.in_flight
        flight.op, flight.dtype, flight.size_bytes = coll.name, item.dtype, None
        # One allocation per placement for the largest size; every size is a view of it.
        unsupported = item.unsupported or self.context.engine.unsupported(coll)
        usable, storages = (0, {}) if unsupported else self._allocate(item, ctx)
        status = STATUS_UNSUPPORTED if unsupported else STATUS_OOM
        info, cfg = self.context.info, self.context.cfg
        for index, size in enumerate(zip(item.requested, item.layouts, strict=True)):
            requested, layout = size
            flight.size_bytes = layout.size_bytes
            if index >= usable:
                yield [
                    unmeasured_row(info, cfg, item, requested, layout, p == "in", status, repeat)
                    for p in item.placements
                    if self.sink is not None
                ]
                continue
            alone = self._load_alone()
            rows = [
                self.bench_time(item, size, ctx, storages[p], p == "in", repeat, alone)
                for p in item.placements
            ]
            yield [row for row in rows if row is not None]
        flight.op, flight.dtype, flight.size_bytes = "", "", None
        flight.phase = f"the pause after {coll.name}"

    def bench_time(
        self,
        item: Work,
        size: tuple[int, Layout],
        ctx: Context,
        storages: Sequence[Storage],
        in_place: bool,
        repeat: int,
        alone: float | None,
    ) -> Row | None:
        """One size (requested bytes, layout) and placement, as nccl-tests' BenchTime: fill,
        then :func:`colbench.bench.timing.timed_batch` (warm up, wait for the others at the
        barrier, time the batch, gather every rank's), combine the times, verify, make the
        row (rank 0's; None elsewhere). Every op is timed here, alike; beside the call only
        --rotate, --time-budget, --contend and COLBENCH_FAULT are helpers."""
        coll, measure, flight = item.coll, self.context.cfg.measure, self.context.in_flight
        requested, layout = size
        sets = [coll.views(storage, layout, ctx, in_place) for storage in storages]
        with self._load_beside() as beside:
            flight.step("fill")
            for bufs in sets:
                coll.fill(bufs, ctx)
            calls = [self.context.engine.bind(coll, bufs, ctx) for bufs in sets]
            call = calls[0] if len(calls) == 1 else rotation(calls)
            # The enqueue time and the barrier's wait and starvation are gathered with
            # the times, as three more columns.
            every = timed_batch(
                self.side, self.host_timer if coll.blocks_host else self.context.timer,
                call, measure.iters, warmup=warmup_calls(self.context.info, self.context.cfg),
                longer=self._budget_iters,
                synchronize=self.context.timer.synchronize, say=flight.step,
                tick=self._fault.tick,
            )  # fmt: skip
        wrong = self._check(coll, sets[0], ctx) if coll.sized else None
        load_cells = self._load_cells(alone, beside.rate)
        if self.sink is None:
            return None  # the other ranks measure alike; rank 0 makes and reports the rows
        times, slowest_enqueue_us, ranks = _combined(every, measure.average)
        row = make_row(
            self.context.info, self.context.cfg, item, requested, layout, in_place, times, wrong,
            iters=len(every[0].times_us), repeat=repeat, enqueue_us=slowest_enqueue_us,
            ranks=ranks, load_cells=load_cells,
        )  # fmt: skip
        output = self.context.cfg.output
        if output.per_rank or output.per_iter_timing:
            self.sink.rank_times(row, ranks)
        return row

    def _load_alone(self) -> float | None:
        """The --contend load's rate with no collective beside it, before each size."""
        if self.context.load is None:
            return None
        self.context.in_flight.step("the load alone")
        return self.context.load.alone()

    def _load_beside(self) -> AbstractContextManager[Beside]:
        """The --contend load running through the block, its rate kept in what the block
        gets; without a load nothing runs (nothing of colbench.bench.load is entered)."""
        if self.context.load is None:
            return nullcontext(NOTHING_BESIDE)
        return running(self.context.load, self.context.in_flight)

    def _load_cells(self, alone: float | None, beside: float | None) -> dict[str, Any]:
        """The rows' load columns: every rank's rates gathered over the side group."""
        load = self.context.load
        if load is None:
            return dict(NO_LOAD_CELLS)
        assert alone is not None and beside is not None  # both measured where a load runs
        return row_cells(load.spec, self.side.gather_floats([alone, beside]))

    def _budget_iters(self, calibration_us: list[float]) -> int:
        """With --time-budget, iterations that fill it at the slowest rank's pace (agreed by
        all): pyperf-style calibration, the fixed batch estimating the cost of one call; a
        longer batch is timed instead where the budget allows one. 0 without a budget."""
        budget_s = self.context.cfg.measure.time_budget_s
        if budget_s is None:
            return 0
        per_call_us = self.side.max_float(max(statistics.median(calibration_us), 1e-3))
        return min(MAX_BUDGET_ITERS, int(budget_s * 1e6 / per_call_us))

    def _check(self, coll: Collective, bufs: Buffers, ctx: Context) -> int | None:
        """nccl-tests' -c N: N passes of fill, run, verify, ending at the first pass that
        finds wrong elements (their count is the row's); None when --check is 0."""
        wrong = None
        for _ in range(self.context.cfg.measure.check):
            wrong = self._verify(coll, bufs, ctx)
            if wrong:
                break
        return wrong

    def _verify(self, coll: Collective, bufs: Buffers, ctx: Context) -> int:
        self.context.in_flight.step("verification")
        coll.fill(bufs, ctx)
        # Run the way the timed batch ran: a replayed graph under --cuda-graph.
        self.context.timer.run_once(self.context.engine.bind(coll, bufs, ctx))
        self.context.timer.synchronize()
        return self.side.sum_int(coll.count_wrong(bufs, ctx))


def _combined(every: list[Batch], average: str) -> tuple[dict[str, float], float | None, RankTimes]:
    """Every rank's gathered batch: (the row's time columns, the slowest rank's enqueue
    time per call, every rank's batch mean and barrier wait)."""
    per_rank_iters = [batch.times_us for batch in every]
    times = combine_times(per_rank_iters, average)
    # The rank that waited longest to hand its calls over decides whether the GPU
    # was starved.
    enqueues = [batch.enqueue_us for batch in every if batch.enqueue_us is not None]
    ranks = RankTimes(
        batch_us=tuple(sum(t) / len(t) for t in per_rank_iters),
        wait_us=tuple(batch.wait_us for batch in every),
        starved_us=tuple(batch.starved_us for batch in every),
        iters_us=tuple(tuple(times) for times in per_rank_iters),
    )
    return times, max(enqueues) if enqueues else None, ranks
