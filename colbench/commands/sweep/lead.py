"""Rank 0's share: the sink of the loop every rank runs, its rows fed to the reporters (CSV,
meta.json, progress, table)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from colbench.bench.loop import BenchContext
from colbench.bench.plan import Work, count_units, row_weight, weight_total
from colbench.config.model import SweepConfig
from colbench.hardware import node
from colbench.host.job import Fault, Peer, RankJob
from colbench.host.launchers import gpus
from colbench.host.pace import Pace
from colbench.nccl.names import to_code, torch_version
from colbench.results.reporters.console import run_header
from colbench.results.reporters.stream import (
    ConsoleReporter,
    CsvReporter,
    MetaReporter,
    PerRankReporter,
    ProgressReporter,
    Reporter,
    RowStream,
    progress_bar,
)
from colbench.results.rows import Row
from colbench.results.rundir import RunDir


@dataclass(frozen=True)
class Met:
    """Who the ranks are, as they introduced themselves: one :class:`Peer` per rank and its
    node label."""

    peers: list[Peer]
    hosts: list[str]
    #: Each node's hardware facts by label (colbench.hardware): meta.json's ``hardware``
    #: and one header line per node.
    hardware: dict[str, Any] = field(default_factory=dict)


@contextmanager
def lead_sink(
    job: RankJob,
    context: BenchContext,
    met: Met,
    work: list[Work],
    notes: tuple[list[str], list[str]],
) -> Iterator[RowStream]:
    """Rank 0's share: the sink its loop feeds, the reporters on it (CSV, meta.json,
    progress, table); the run's end is written when the loop is done.

    ``notes``: warnings about the measurement (also in the table's header), and notes
    on sizes skipped for memory.
    """
    cfg, (warnings, memory_notes) = context.cfg, notes
    run_dir = RunDir(job.run_dir or ".")
    meta = _first_meta(job, context, met, warnings + memory_notes)
    if met.hardware:
        meta["hardware"] = met.hardware
    meta["ceiling"] = {"gbps": context.info.ceiling_gbps, "source": context.info.ceiling_source}
    rows_planned = count_units(work) * cfg.measure.repeat
    # What a failure's verdict and a reader of results.csv check the rows kept against.
    meta["rows_planned"] = rows_planned
    # Interleaved worlds share the terminal: one progress bar (world 0's), each world's
    # table printed whole by the parent at the end; into a file or a pipe, each table line
    # as it is measured, tagged (docs/comparing.md).
    interleaved = job.turns is not None
    streamed = interleaved and not sys.stdout.isatty()
    progress = cfg.output.progress and (job.turns is None or job.turns.world == 0)
    with (
        progress_bar(rows_planned, progress) as hooks,
        open(run_dir.path / TABLE_FILE, "w", encoding="utf-8")
        if interleaved and not streamed
        else nullcontext() as table_file,
    ):
        for line in warnings:
            hooks.warn(f"colbench: warning: {line}")
        for line in memory_notes:
            hooks.warn(f"colbench: note: {line}")
        if streamed:
            echo = _writer(sys.stdout, f"[{job.variant}] ")
        else:
            echo = hooks.echo if table_file is None else _writer(table_file)
        reporters = _reporters(job, context, met, (work, rows_planned), hooks, echo, warnings)
        with RowStream(reporters, hooks.warn) as stream:
            stream.start(meta)
            yield stream
            # A failure from here on names this phase: every row is already on disk.
            context.in_flight.phase = "the end-of-run summary, after the last row"
            Fault(0, os.environ.get("COLBENCH_FAULT")).at_end()
            stream.end()


def _reporters(
    job: RankJob,
    context: BenchContext,
    met: Met,
    planned: tuple[list[Work], int],
    hooks: Any,
    echo: Callable[[str], None],
    warnings: list[str],
) -> list[Reporter]:
    """The sinks of rank 0's rows, ``planned``: (the work, the rows it makes)."""
    cfg = context.cfg
    # An interleaved world keeps its own meta.json and logs, and writes its rows into
    # the run's one results.csv (in its turns: never two writers at once).
    results_dir = RunDir(job.results_dir or job.run_dir or ".")
    run_dir = RunDir(job.run_dir or ".")
    # The CSV first, so a row is on disk before anything else shows it.
    reporters: list[Reporter] = [
        CsvReporter(results_dir),
        MetaReporter(run_dir),
        ProgressReporter(hooks.advance),
        *_forecast(context, *planned),
    ]
    if cfg.output.per_rank:
        reporters.append(PerRankReporter(run_dir))
    if cfg.output.output_file is not None:
        reporters.append(_json_report(job, context, met, hooks.warn))
    if cfg.output.table:
        header = _table_header(job, context, met, warnings)
        header += [node.header_line(label, facts) for label, facts in met.hardware.items()]
        reporters.append(ConsoleReporter(header, echo, cfg.measure.repeat))
    return reporters


def measurement_warnings(cfg: SweepConfig, backend: str) -> list[str]:
    warnings = []
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        warnings.append(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL is set: it checks every collective and slows them "
            "several-fold; unset it for real measurements"
        )
    if cfg.launch.debug and backend == "nccl":
        warnings.append(
            "--debug: torch's NCCL flight recorder records every collective, which adds host "
            "time to each call; measure without --debug for numbers to compare"
        )
    return warnings


def _json_report(
    job: RankJob, context: BenchContext, met: Met, say: Callable[[str], None]
) -> Reporter:
    """-J: nccl-tests' JSON report (colbench.results.reporters.nccl_tests_json), a device a rank."""
    from colbench.config import min_bw
    from colbench.results.reporters import nccl_tests_json as report

    cfg = context.cfg
    assert cfg.output.output_file is not None
    k, mod = cfg.measure.group_size, cfg.measure.group_mod
    devices = [
        report.Device(
            rank=p.rank,
            # nccl-tests' "group" is the rank's NCCL_TESTS_SPLIT colour.
            group=p.rank % mod if mod else (p.rank // k if k else 0),
            pid=p.pid,
            hostname=p.host,
            device=int(p.gpu.get("index", -1)),
            device_hex=report.device_hex(str(p.gpu.get("bus_id", ""))),
            device_info=p.device_name,
        )
        for p in met.peers
    ]
    header = report.Header(
        args=cfg.output.command_line or tuple(sys.argv),
        env=report.environment(),
        nccl_version=_nccl_version_code(job.backend),
        sizes_bytes=cfg.measure.sizes_bytes,
        warmup_iters=cfg.measure.warmup,
        iterations=cfg.measure.iters,
        validation=cfg.measure.check,
        graph=cfg.measure.cuda_graph,
        per_iter_timing=cfg.output.per_iter_timing,
        devices=devices,
    )
    floor = min_bw.from_environment()
    return report.NcclTestsJsonReporter(Path(cfg.output.output_file), header, floor, say)


def _nccl_version_code(backend: str) -> int:
    """NCCL's version as nccl-tests records it (2.29.3 -> 22903); 0 on gloo (no NCCL)."""
    version = torch_version() if backend == "nccl" else None
    return 0 if version is None else to_code(version)


def _forecast(context: BenchContext, work: list[Work], rows_planned: int) -> list[Reporter]:
    """The run's forecast (colbench.host.pace) planned, and the reporter that keeps it."""
    pace: Pace | None = context.in_flight.pace
    if pace is None:
        return []
    measure = context.cfg.measure
    budgeted = measure.time_budget_s is not None
    pace.plan(rows_planned, weight_total(work, budgeted) * measure.repeat, "rows")
    return [PaceReporter(pace, budgeted)]


class PaceReporter(Reporter):
    """Rows done, for the run's forecast (colbench.host.pace), each weighed as planned."""

    def __init__(self, pace: Pace, budgeted: bool) -> None:
        self._pace = pace
        self._budgeted = budgeted

    def on_rows(self, rows: Sequence[Row]) -> None:
        weight = sum(row_weight(row.size_bytes, self._budgeted) for row in rows)
        self._pace.done(weight, len(rows))


#: An interleaved world's console table, printed by the parent after the run.
TABLE_FILE = "table.txt"


def _writer(file: TextIO, tag: str = "") -> Callable[[str], None]:
    """Echo a table line to ``file`` as it is measured. Streamed to stdout, each line is
    tagged with its variant: the worlds take turns, so their lines alternate."""

    def echo(line: str) -> None:
        # One write per line: the worlds' ranks share stdout, and a line written in two
        # pieces could be split by another world's.
        file.write(f"{tag}{line}\n")
        file.flush()

    return echo


def _first_meta(
    job: RankJob, context: BenchContext, met: Met, warnings: list[str]
) -> dict[str, Any]:
    """meta.json as it stands before the first row: the run, its ranks, its warnings."""
    info, peers = context.info, met.peers
    meta = job.first_meta(context.cfg.to_dict(), met.hosts, peers, group_size=info.group_size)
    meta.update(
        warnings=warnings,
        plan_digest=peers[0].digest[0],
        fabric=gpus.describe(info.ranks_per_gpu, job.single_host),
    )
    if any(p.gpu for p in peers):
        meta.update(rank_gpus=[p.gpu for p in peers])
    if job.variant_keys:
        meta.update(variant=job.variant, env_seen_by_rank=[p.env_seen for p in peers])
    if job.variant:
        # Which interpreter the ranks ran in (--python variants differ by it).
        meta.update(variant=job.variant, python_executable=sys.executable)
    return meta


def _table_header(job: RankJob, context: BenchContext, met: Met, warnings: list[str]) -> list[str]:
    """The ``#`` lines above the table: variant, warnings, the run and its ranks."""
    cfg, info, peers, hosts = context.cfg, context.info, met.peers, met.hosts
    fabric = gpus.header_line(info.ranks_per_gpu)
    # --init-only runs none of the ops: what it times is named instead.
    ops = ("communicator set-up (--init-only)",) if cfg.measure.init_only else cfg.measure.ops
    return (
        ([f"# variant {job.variant}"] if job.variant else [])
        + ([fabric] if fabric else [])
        + [f"# warning: {line}" for line in warnings]
        + run_header(
            ops=ops,
            backend=job.backend,
            world_size=job.world_size,
            nnodes=info.nnodes,
            device=info.device_name,
            warmup=cfg.measure.warmup,
            iters=cfg.measure.iters,
            average=cfg.measure.average,
            check=cfg.measure.check,
            seed=cfg.measure.seed,
            ranks=[(p.rank, h, p.pid, p.device_name) for p, h in zip(peers, hosts, strict=True)],
            groups=info.groups,
            split_by=info.split,
        )
    )
