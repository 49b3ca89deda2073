"""Reporters: everything rank 0 writes or shows is fed one stream of typed rows.

The bench loop hands its rows to one :class:`RowStream`, which passes them, in order, to
each :class:`Reporter`: the CSV files, meta.json, the progress bar, the console table. The
progress bar is drawn on stderr so that it never garbles the table on stdout.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from colbench.bench import ops
from colbench.hardware.node import CeilingCounter
from colbench.results.reporters.console import TableSink
from colbench.results.reporters.stragglers import PER_RANK, RankRow, RankTimes, SlowestCounter
from colbench.results.rows import RESULTS, STATUS_OK, STATUS_OOM, STATUS_UNSUPPORTED, Row
from colbench.results.rundir import RunDir
from colbench.results.tables import Table, TableWriter


class Reporter:
    """One consumer of the row stream; every hook does nothing unless overridden."""

    def on_start(self, meta: Mapping[str, Any]) -> None:
        """The run begins; ``meta`` is its meta.json before the first row."""

    def on_rows(self, rows: Sequence[Row]) -> None:
        """All placements of one (op, dtype, redop, size), in the order measured."""

    def on_rank_times(self, row: Row, ranks: RankTimes) -> None:
        """Every rank's share of a measured row (only with --per-rank)."""

    def on_end(self, duration_s: float) -> None:
        """Every row has been measured, ``duration_s`` after the start."""

    def close(self) -> None:
        """Release what the reporter holds; runs after on_end, or after a failure."""


class RowStream:
    """The bench's row sink: feeds every row to each reporter, in the order given."""

    def __init__(self, reporters: Iterable[Reporter], warn: Callable[[str], None]) -> None:
        self.reporters = list(reporters)
        self._warn = warn
        self._started = time.monotonic()

    def start(self, meta: Mapping[str, Any]) -> None:
        self._started = time.monotonic()
        for reporter in self.reporters:
            reporter.on_start(meta)

    def rows(self, coll: Any, rows: Sequence[Row]) -> None:
        for reporter in self.reporters:
            reporter.on_rows(rows)

    def note(self, message: str) -> None:
        self._warn(f"colbench: note: {message}")

    def rank_times(self, row: Row, ranks: RankTimes) -> None:
        for reporter in self.reporters:
            reporter.on_rank_times(row, ranks)

    def end(self) -> None:
        """Every reporter's end, each even when one before it failed (the table's summary
        still prints when meta.json could not be finished); then the first failure."""
        duration_s = round(time.monotonic() - self._started, 3)
        failed: BaseException | None = None
        for reporter in self.reporters:
            try:
                reporter.on_end(duration_s)
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()

    def __enter__(self) -> RowStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TableReporter(Reporter):
    """One of the run's tables: each row on disk (flushed) before anyone else sees it."""

    def __init__(self, run_dir: RunDir, table: Table = RESULTS) -> None:
        self.run_dir = run_dir
        self._table = table
        self._writer: TableWriter | None = None
        self._nodes: list[str] = []

    def on_start(self, meta: Mapping[str, Any]) -> None:
        # Opened at the start, so a run that measures nothing still leaves its header.
        self._nodes = list(meta.get("rank_hosts") or [])
        self._writer = self.run_dir.writer(self._table)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class CsvReporter(TableReporter):
    """results.csv."""

    def on_rows(self, rows: Sequence[Row]) -> None:
        assert self._writer is not None, "on_start opens the file"
        for row in rows:
            self._writer.write(row)


class PerRankReporter(TableReporter):
    """per_rank.csv (--per-rank): one line per rank per measured row."""

    def __init__(self, run_dir: RunDir) -> None:
        super().__init__(run_dir, PER_RANK)

    def on_rank_times(self, row: Row, ranks: RankTimes) -> None:
        assert self._writer is not None, "on_start opens the file"
        slowest = ranks.slowest_rank
        starved = ranks.starved_us or (math.nan,) * len(ranks.wait_us)
        every = zip(ranks.batch_us, ranks.wait_us, starved, strict=True)
        for rank, (time_us, wait_us, starved_us) in enumerate(every):
            self._writer.write(
                RankRow(
                    run_id=row.run_id,
                    variant=row.variant,
                    op=row.op,
                    dtype=row.dtype,
                    redop=row.redop,
                    in_place=row.in_place,
                    requested_bytes=row.requested_bytes,
                    size_bytes=row.size_bytes,
                    repeat=row.repeat or 0,
                    rank=rank,
                    node=self._nodes[rank] if rank < len(self._nodes) else "",
                    time_us=time_us,
                    wait_us=wait_us,
                    starved_us=starved_us,
                    slowest=int(rank == slowest),
                )
            )


class MetaReporter(Reporter):
    """meta.json: written at the start, completed with the counts at the end."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self.meta: dict[str, Any] = {}
        self.wrong_total = 0
        self.status_counts: Counter[str] = Counter()
        self.slowest = SlowestCounter()
        self.ceiling = CeilingCounter()
        self.busbw_gbps: list[float] = []

    def on_start(self, meta: Mapping[str, Any]) -> None:
        self.meta = dict(meta)
        self.run_dir.write_meta(self.meta)

    def on_rows(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self.wrong_total += int(row.wrong or 0)
            self.status_counts[row.status] += 1
            self.ceiling.add(row)
            self.slowest.add_row(row)
            if row.status == STATUS_OK and row.busbw_gbps is not None:
                self.busbw_gbps.append(row.busbw_gbps)

    def on_end(self, duration_s: float) -> None:
        self.meta.update(
            status="complete",
            rows=self.status_counts.total(),
            rows_oom=self.status_counts[STATUS_OOM],
            # Expected under a variant such as NCCL_ALGO=Tree: counted, not an error.
            rows_unsupported=self.status_counts[STATUS_UNSUPPORTED],
            wrong_total=self.wrong_total,
            # nccl-tests' "Avg bus bandwidth": the mean over every measured row (what
            # NCCL_TESTS_MIN_BW is checked against); None when no row was measured.
            busbw_avg_gbps=sum(self.busbw_gbps) / len(self.busbw_gbps) if self.busbw_gbps else None,
            duration_s=duration_s,
            slowest_rank_rows=self.slowest.counts,
            straggler=_straggler_meta(self.slowest, self.meta.get("rank_hosts") or []),
        )
        if self.ceiling.best:
            self.meta["ceiling"] = {
                **(self.meta.get("ceiling") or {}),
                "best": self.ceiling.best_meta(),
                "verdicts": self.ceiling.verdicts(),
            }
        self.run_dir.write_meta(self.meta)


def _straggler_meta(counter: SlowestCounter, nodes: Sequence[str]) -> dict[str, Any] | None:
    found = counter.verdict()
    if found is None:
        return None
    shown = dataclasses.asdict(found)
    return {
        "rank": shown.pop("rank"),
        "node": nodes[found.rank] if found.rank < len(nodes) else "",
        **shown,
    }


class ProgressReporter(Reporter):
    """The progress bar: one step per row."""

    def __init__(self, advance: Callable[[int], None]) -> None:
        self._advance = advance

    def on_rows(self, rows: Sequence[Row]) -> None:
        self._advance(len(rows))


class ConsoleReporter(Reporter):
    """The nccl-tests style table on stdout (colbench.results.reporters.console), header first."""

    def __init__(
        self, header: Sequence[str], echo: Callable[[str], None], repeats: int = 1
    ) -> None:
        self._header = list(header)
        self._echo = echo
        self._table = TableSink(echo=echo, repeats=repeats)
        self._ceiling = CeilingCounter()
        self._ceiling_source = ""

    def on_start(self, meta: Mapping[str, Any]) -> None:
        self._table.nodes = list(meta.get("rank_hosts") or [])
        self._ceiling_source = (meta.get("ceiling") or {}).get("source") or ""
        self._table.header(self._header)

    def on_rows(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self._ceiling.add(row)
        self._table.rows(ops.get(rows[0].op), rows)

    def on_end(self, duration_s: float) -> None:
        self._table.close()
        if self._ceiling.best:
            self._echo(
                f"# Of the ceiling       : {', '.join(self._ceiling.lines())} (best; ceiling "
                f"{self._ceiling.ceiling_gbps:.4g} GB/s: {self._ceiling_source})"
            )


@dataclass
class ProgressHooks:
    advance: Callable[[int], None]
    warn: Callable[[str], None]
    echo: Callable[[str], None]


def _plain_warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _plain_echo(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


@contextmanager
def progress_bar(total: int, enabled: bool | None, label: str = "sweep") -> Iterator[ProgressHooks]:
    """Yield hooks to advance the bar and to print warnings above it.

    ``enabled=None`` means: only when stderr is a terminal. When stdout is the same
    terminal, rich redraws table lines above the bar instead of through it. ``echo``
    prints a table line: as it is, however narrow the terminal.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 0:
        yield ProgressHooks(lambda n: None, _plain_warn, _plain_echo)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    # Same terminal: table lines go through the bar's console, which clears the bar,
    # prints the line and draws the bar again below it.
    same_terminal = sys.stdout.isatty()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=same_terminal,
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(label, total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)

        def warn(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False)

        def echo(line: str) -> None:
            # soft_wrap: rich would otherwise break a line wider than the terminal with
            # a newline of its own, splitting one table row into two (the terminal's own
            # wrap keeps it one line, as without the bar).
            progress.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)

        yield ProgressHooks(advance, warn, echo if same_terminal else _plain_echo)
