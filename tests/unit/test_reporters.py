"""Reporters fed one stream of rows: CSV, meta.json, progress and the console table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.results.reporters.console import TableSink, format_line
from colbench.results.reporters.stream import (
    ConsoleReporter,
    CsvReporter,
    MetaReporter,
    ProgressReporter,
    Reporter,
    RowStream,
)
from colbench.results.rows import Row, load
from colbench.results.rundir import RunDir
from tests.unit.rows import row as synthetic_row

HEADER = ["# colbench test header", "#"]


def sizes() -> list[list[Row]]:
    """Two sizes of all_gather (both placements), then all_reduce with wrong elements
    and a size that could not be allocated."""

    def make(op: str, size: int, in_place: int, **fields: object) -> Row:
        base = Row(**synthetic_row(op, size, 50.0, in_place=in_place))
        return dataclasses.replace(base, **fields)

    oom = dict.fromkeys(("time_us", "algbw_gbps", "busbw_gbps", "aggbw_gbps", "wrong"))
    return [
        [make("all_gather", 1024, 0), make("all_gather", 1024, 1)],
        [make("all_gather", 2048, 0), make("all_gather", 2048, 1)],
        [make("all_reduce", 1024, 0, wrong=2)],
        [make("all_reduce", 1 << 30, 0, status="oom", **oom)],
    ]


def stream_for(tmp_path: Path) -> tuple[RunDir, RowStream, list[str], list[int]]:
    run = RunDir.create(tmp_path / "run", tmp_path)
    echoed: list[str] = []
    advanced: list[int] = []
    reporters = [
        CsvReporter(run),
        MetaReporter(run),
        ProgressReporter(advanced.append),
        ConsoleReporter(HEADER, echoed.append),
    ]
    return run, RowStream(reporters, echoed.append), echoed, advanced


def test_one_stream_feeds_every_reporter(tmp_path: Path) -> None:
    run, stream, echoed, advanced = stream_for(tmp_path)
    with stream:
        stream.start({"run_id": run.name, "status": "running"})
        assert run.read_meta()["status"] == "running"
        assert run.rows_kept() == 0  # the header is on disk before the first row
        for rows in sizes():
            stream.rows(None, rows)
        stream.end()
    frame = load(run.path)
    assert frame["size_bytes"].tolist() == [1024, 1024, 2048, 2048, 1024, 1 << 30]
    meta = run.read_meta()
    assert (meta["status"], meta["rows"], meta["wrong_total"], meta["rows_oom"]) == (
        "complete",
        6,
        2,
        1,
    )
    assert meta["rows_unsupported"] == 0 and meta["duration_s"] >= 0
    assert advanced == [2, 2, 1, 1]
    # The console reporter prints what the table always printed for these rows.
    alone: list[str] = []
    table = TableSink(echo=alone.append)
    table.header(HEADER)
    for rows in sizes():
        table.rows(ops.get(rows[0].op), rows)
    table.close()
    assert echoed == alone


def test_each_size_is_on_disk_and_counted_before_the_table_prints_it(tmp_path: Path) -> None:
    # The reporters in the order the rank's lead gives them (colbench.commands.sweep.lead): the CSV
    # first, so a row is on disk before anything else shows it.
    run = RunDir.create(tmp_path / "run", tmp_path)
    advanced: list[int] = []
    printed: list[tuple[str, int, int]] = []

    def echo(line: str) -> None:
        printed.append((line, run.rows_kept(), sum(advanced)))

    reporters = [
        CsvReporter(run),
        MetaReporter(run),
        ProgressReporter(advanced.append),
        ConsoleReporter(HEADER, echo),
    ]
    fed = 0
    with RowStream(reporters, echo) as stream:
        stream.start({"run_id": run.name, "status": "running"})
        for rows in sizes():
            before = len(printed)
            stream.rows(None, rows)
            fed += len(rows)
            # The size's line, printed last, came when its rows were kept and counted.
            assert printed[-1] == (format_line(rows), fed, fed)
            assert all(kept == fed for _, kept, _ in printed[before:])
        stream.end()
    assert printed[-1][0] == "# Wrong elements       : 2 FAILED"


def test_a_failed_run_keeps_its_rows_and_no_verdict(tmp_path: Path) -> None:
    run, stream, echoed, _ = stream_for(tmp_path)
    with pytest.raises(RuntimeError), stream:
        stream.start({"run_id": run.name, "status": "running"})
        stream.rows(None, sizes()[0])
        raise RuntimeError("rank 1 died")
    assert run.rows_kept() == 2
    # meta.json stays as it was: the parent records how the run failed.
    assert json.loads(run.meta_path.read_text())["status"] == "running"
    assert not any("Wrong elements" in line for line in echoed)


def test_notes_go_to_the_warning_line(tmp_path: Path) -> None:
    _, stream, echoed, _ = stream_for(tmp_path)
    stream.note("skipped 1G: does not fit")
    assert echoed == ["colbench: note: skipped 1G: does not fit"]


def test_an_end_that_fails_still_ends_the_other_reporters(tmp_path: Path) -> None:
    # Every row is measured when the end comes: one reporter's failure there (the
    # straggler test once overflowed in meta.json's) must not silence the table's summary.
    class Broken(Reporter):
        def on_end(self, duration_s: float) -> None:
            raise OverflowError("int too large to convert to float")

    run = RunDir.create(tmp_path / "run", tmp_path)
    echoed: list[str] = []
    reporters = [CsvReporter(run), Broken(), ConsoleReporter(HEADER, echoed.append)]
    with pytest.raises(OverflowError), RowStream(reporters, echoed.append) as stream:
        stream.start({"run_id": run.name})
        for rows in sizes():
            stream.rows(None, rows)
        stream.end()
    assert run.rows_kept() == 6
    assert "# Wrong elements       : 2 FAILED" in echoed
