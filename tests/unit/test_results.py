"""The results CSV: writer, schema checks and reader (colbench.results.rows)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from colbench.bench import ops
from colbench.bench.plan import RunInfo, Work
from colbench.bench.rowmaker import combine_times, make_row
from colbench.config.model import SweepConfig
from colbench.errors import UsageError
from colbench.results.rows import COLUMNS, RESULTS, SCHEMA_VERSION, csv_path, load
from colbench.results.tables import TableWriter

TIME_COLUMNS = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")


def a_row(**overrides: Any) -> dict[str, Any]:
    """A plausible row with every schema column, whatever the schema holds today."""
    coll = ops.get("all_gather")
    cfg = SweepConfig.of(ops=("all_gather",), sizes_bytes=(1024,), iters=3, warmup=1)
    lay = coll.layout(1024, 4, 3)
    work = Work(coll, "float32", "none", (1024,), (lay,), ("out", "in"))
    info = RunInfo("run-1", "gloo", "cpu", 3, 1)
    times = combine_times([[10.0, 12.0, 11.0], [9.0, 13.0, 10.0], [10.5, 11.0, 12.5]], "avg")
    row = dict(make_row(info, cfg, work, 1024, lay, False, times, 0))
    for column in COLUMNS:
        row.setdefault(column, "")
    row.update(overrides)
    return row


def read_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def test_make_row_stays_inside_the_schema() -> None:
    coll = ops.get("all_gather")
    lay = coll.layout(1024, 4, 3)
    row = make_row(
        RunInfo("r", "gloo", "cpu", 3, 1),
        SweepConfig.of(ops=("all_gather",), sizes_bytes=(1024,)),
        Work(coll, "float32", "none", (1024,), (lay,), ("out",)),
        1024,
        lay,
        True,
        {c: 5.0 for c in TIME_COLUMNS},
        None,
    )
    assert set(row) <= set(COLUMNS)
    assert row["schema_version"] == SCHEMA_VERSION
    assert (row["size_bytes"], row["count"]) == (1008, 84)
    assert row["algbw_gbps"] == pytest.approx(1008 / 5.0 / 1e3)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 / 3)
    assert row["in_place"] == 1 and row["root"] == -1


def test_writer_writes_the_header_once_then_rows(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    writer = TableWriter(path, RESULTS)
    writer.write(a_row())
    writer.write(a_row(in_place=1, wrong=None))
    writer.close()
    rows = read_rows(path)
    assert rows[0] == list(COLUMNS)
    assert len(rows) == 3
    assert all(len(r) == len(COLUMNS) for r in rows)
    # Appending to the same file (a resumed writer) adds no second header.
    again = TableWriter(path, RESULTS)
    again.write(a_row())
    again.close()
    rows = read_rows(path)
    assert len(rows) == 4
    assert rows.count(list(COLUMNS)) == 1


def test_each_row_is_on_disk_while_the_writer_is_open(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    writer = TableWriter(path, RESULTS)
    try:
        assert read_rows(path) == [list(COLUMNS)]
        writer.write(a_row())
        assert len(read_rows(path)) == 2
        frame = load(path)
        assert len(frame) == 1
        writer.write(a_row(in_place=1))
        assert len(load(tmp_path)) == 2
    finally:
        writer.close()


def test_rows_with_unknown_columns_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    writer = TableWriter(path, RESULTS)
    try:
        with pytest.raises(ValueError, match="outside the schema"):
            writer.write({**a_row(), "size": 1024})
    finally:
        writer.close()
    assert len(read_rows(path)) == 1


def test_load_round_trips_and_types(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    writer = TableWriter(path, RESULTS)
    writer.write(a_row(wrong=0, variant=""))
    writer.write(a_row(in_place=1, wrong=None, variant="NCCL_ALGO=Ring"))
    writer.write(a_row(wrong=3, variant="NCCL_PROTO=LL"))
    writer.close()
    frame = load(path)
    assert list(frame.columns) == list(COLUMNS)
    assert str(frame["wrong"].dtype) == "Int64"
    assert frame["wrong"].iloc[0] == 0
    assert frame["wrong"].iloc[1] is pd.NA
    assert frame["wrong"].iloc[2] == 3
    # An empty variant is an empty string, not a missing value.
    assert frame["variant"].tolist() == ["", "NCCL_ALGO=Ring", "NCCL_PROTO=LL"]
    # Whole-number floats are written without a decimal point, so read back as numbers
    # of either kind.
    for column in (*TIME_COLUMNS, "algbw_gbps", "busbw_gbps"):
        assert pd.api.types.is_numeric_dtype(frame[column]), column
    for column in ("size_bytes", "count", "world_size", "requested_bytes", "in_place", "root"):
        assert pd.api.types.is_integer_dtype(frame[column]), column
    expected = a_row()
    assert frame["time_us"].iloc[0] == pytest.approx(expected["time_us"], rel=1e-5)
    assert frame["size_bytes"].iloc[0] == 1008


def test_load_keeps_numeric_columns_numeric_when_a_row_has_no_measurement(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.csv"
    writer = TableWriter(path, RESULTS)
    writer.write(a_row())
    empty = dict.fromkeys((*TIME_COLUMNS, "algbw_gbps", "busbw_gbps"))
    writer.write(a_row(in_place=1, wrong=None, **empty))
    writer.close()
    frame = load(path)
    for column in (*TIME_COLUMNS, "algbw_gbps", "busbw_gbps"):
        assert pd.api.types.is_numeric_dtype(frame[column]), column
    assert pd.isna(frame["time_us"].iloc[1])


def test_load_of_a_header_only_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    TableWriter(path, RESULTS).close()
    frame = load(path)
    assert frame.empty
    assert list(frame.columns) == list(COLUMNS)


def write_text(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "results.csv"
    path.write_text(text)
    return path


def row_line(**overrides: Any) -> str:
    row = a_row(**overrides)
    return ",".join("" if row[c] is None else str(row[c]) for c in COLUMNS)


def test_load_refuses_another_schema_version(tmp_path: Path) -> None:
    path = write_text(
        tmp_path, ",".join(COLUMNS) + "\n" + row_line(schema_version=SCHEMA_VERSION + 1) + "\n"
    )
    with pytest.raises(UsageError, match="schema version") as info:
        load(path)
    assert str(SCHEMA_VERSION + 1) in str(info.value)


def test_load_refuses_a_mix_of_versions(tmp_path: Path) -> None:
    lines = [",".join(COLUMNS), row_line(), row_line(schema_version=SCHEMA_VERSION + 7)]
    with pytest.raises(UsageError, match="schema version"):
        load(write_text(tmp_path, "\n".join(lines) + "\n"))


def test_load_refuses_missing_columns(tmp_path: Path) -> None:
    kept = [c for c in COLUMNS if c != "busbw_gbps"]
    row = a_row()
    text = ",".join(kept) + "\n" + ",".join(str(row[c]) for c in kept) + "\n"
    with pytest.raises(UsageError, match="busbw_gbps"):
        load(write_text(tmp_path, text))


def test_load_refuses_a_csv_without_schema_version(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="schema_version"):
        load(write_text(tmp_path, "size,time\n1024,3.5\n"))


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\xff\xfe\x89PNG\r\n\x1a\n\xc3\x28\xa0\xa1",
        b'hello, this is\nnot "a csv at all\n',
        b"<html><body>404</body></html>",
    ],
)
def test_load_refuses_garbage(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "results.csv"
    path.write_bytes(content)
    with pytest.raises(UsageError):
        load(path)


def test_load_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no results file"):
        load(tmp_path / "nope.csv")
    with pytest.raises(UsageError, match="no results file"):
        load(tmp_path)  # a directory without results.csv


def test_csv_path_accepts_a_run_directory(tmp_path: Path) -> None:
    assert csv_path(tmp_path) == tmp_path / "results.csv"
    assert csv_path(tmp_path / "x.csv") == tmp_path / "x.csv"


def test_every_column_is_documented() -> None:
    assert all(isinstance(doc, str) and doc for doc in COLUMNS.values())
    assert next(iter(COLUMNS)) == "schema_version"
    # Units in names: sizes in bytes, times in us, bandwidth in GB/s; no bare 'size'.
    assert "size" not in COLUMNS and "time" not in COLUMNS
    assert {"size_bytes", "time_us", "busbw_gbps", "algbw_gbps"} <= set(COLUMNS)
