"""Row: the typed results row whose fields are results.csv's columns (colbench.results.rows)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.bench.plan import RunInfo, Work
from colbench.bench.rowmaker import make_row, unmeasured_row
from colbench.config.model import SweepConfig
from colbench.results.rows import COLUMNS, SCHEMA_VERSION, Row, load
from colbench.results.rundir import RunDir

SMOKE = Path(__file__).resolve().parents[2] / "results" / "baselines" / "gloo-smoke"


def measured(in_place: bool = False, wrong: int | None = 0, repeat: int = 1) -> Row:
    coll = ops.get("reduce_scatter")
    cfg = SweepConfig.of(ops=("reduce_scatter",), sizes_bytes=(4096,), iters=8, warmup=2)
    lay = coll.layout(4096, 4, 4)
    work = Work(coll, "float32", "sum", (4096,), (lay,), ("out", "in"))
    info = RunInfo("run-7", "gloo", "cpu", 4, 1, groups=2)
    # Times with few digits: %.6g writes them exactly, so the round trip is exact.
    times = {
        "time_us": 12.5,
        "time_min_us": 10.25,
        "time_p50_us": 12.0,
        "time_p99_us": 20.5,
        "time_max_us": 21.0,
    }
    return make_row(
        info, cfg, work, 4096, lay, in_place, times, wrong, repeat=repeat, enqueue_us=3.5
    )


def test_fields_are_the_columns_in_order() -> None:
    assert [f.name for f in dataclasses.fields(Row)] == list(COLUMNS)
    row = measured()
    assert list(row) == list(COLUMNS) and len(row) == len(COLUMNS)
    assert row["busbw_gbps"] == row.busbw_gbps and row.get("nope") is None
    with pytest.raises(KeyError):
        row["size"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.time_us = 1.0


def test_measured_row_carries_the_run_and_the_bandwidth() -> None:
    row = measured()
    assert (row.schema_version, row.status, row.repeat) == (SCHEMA_VERSION, "ok", 1)
    assert (row.world_size, row.group_size, row.groups) == (4, 2, 2)
    assert row.algbw_gbps == pytest.approx(row.size_bytes / 12.5 / 1e3)
    # reduce_scatter's factor is (n-1)/n with n the group size; all groups add up.
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 1 / 2)
    assert row.aggbw_gbps == pytest.approx(row.busbw_gbps * 2)
    assert row.host_bound == 0


def test_unmeasured_row_has_a_status_and_no_numbers() -> None:
    coll = ops.get("all_gather")
    lay = coll.layout(1 << 20, 4, 2)
    work = Work(coll, "float32", "none", (1 << 20,), (lay,), ("out",))
    row = unmeasured_row(
        RunInfo("r", "gloo", "cpu", 2, 1), SweepConfig.of(), work, 1 << 20, lay, False, "oom"
    )
    assert row.status == "oom"
    assert row.time_us is row.busbw_gbps is row.wrong is row.host_bound is None
    assert row.cells()[list(COLUMNS).index("time_us")] == ""


def test_round_trip_through_csv_and_load(tmp_path: Path) -> None:
    # A second sample of the first key is a later repeat (a repeated key is invalid).
    rows = [measured(), measured(in_place=True, wrong=None), measured(wrong=3, repeat=2)]
    run = RunDir.create(tmp_path / "run", tmp_path)
    with run.writer() as writer:
        for row in rows:
            writer.write(row)
    frame = load(run.path)
    assert list(frame.columns) == list(COLUMNS)
    back = [Row.from_record(record) for record in frame.to_dict("records")]
    assert back == rows


def test_the_committed_baseline_rewrites_byte_for_byte(tmp_path: Path) -> None:
    # Row's formatting is the CSV's: rows read from the committed baseline and written
    # again give the same lines (the file in git has \n line ends, csv writes \r\n).
    frame = load(SMOKE)
    run = RunDir.create(tmp_path / "again", tmp_path)
    with run.writer() as writer:
        for record in frame.to_dict("records"):
            writer.write(Row.from_record(record))
    written = run.table_path().read_text().splitlines()
    committed = (SMOKE / "results.csv").read_text().splitlines()
    # The baseline is of an older version: this version's columns after it are written
    # as load() filled them (empty, or what their absence meant: a real fabric, 1 rank
    # per GPU).
    added = [c for c in COLUMNS if c not in committed[0].split(",")]
    assert written[0] == ",".join([committed[0], *added])
    filled = {"fabric": "real", "ranks_per_gpu": "1", "engine": "torch"}
    suffix = "".join("," + filled.get(c, "") for c in added)
    assert all(line.endswith(suffix) for line in written[1:])
    assert [line.removesuffix(suffix) for line in written[1:]] == committed[1:]


def test_a_row_and_its_mapping_write_the_same_line(tmp_path: Path) -> None:
    row = measured()
    for name, value in (("typed", row), ("mapping", dict(row))):
        with RunDir.create(tmp_path / name, tmp_path).writer() as writer:
            writer.write(value)
    assert (tmp_path / "typed" / "results.csv").read_bytes() == (
        tmp_path / "mapping" / "results.csv"
    ).read_bytes()
