"""p2p.csv: written and read back with its schema version; other files refused by name;
the command's help shows an example."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.cli import main
from colbench.commands.p2p import load
from colbench.commands.p2p.report import matrix_text
from colbench.commands.p2p.results import (
    COLUMNS,
    FILE_NAME,
    P2P,
    P2P_SCHEMA_VERSION,
    P2PRow,
    record_verdicts,
)
from colbench.commands.p2p.task import pair_row
from colbench.errors import UsageError
from colbench.results.rundir import RunDir


def _row(src: int, dst: int, time_us: float, version: int = P2P_SCHEMA_VERSION) -> P2PRow:
    return pair_row(
        [time_us, time_us * 3], [10.0, 30.0],
        schema_version=version, run_id="r", backend="gloo", device="cpu", world_size=2,
        nnodes=2, mode="uni", src_rank=src, dst_rank=dst, src_node="nodeA", dst_node="nodeB",
        size_bytes=1000, warmup=1, iters=2, latency_bytes=8, repeat=0,
    )  # fmt: skip


def _write(run: Path, *rows: P2PRow) -> None:
    with RunDir(run).writer(P2P) as writer:
        writer.write_all(rows)


def test_rows_round_trip_with_their_types(tmp_path: Path) -> None:
    _write(tmp_path, _row(0, 1, 5.0), _row(1, 0, 10.0))
    assert (tmp_path / FILE_NAME).is_file()
    frame = load(tmp_path)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["src_rank"].tolist() == [0, 1]
    assert frame["time_us"].tolist() == [10.0, 20.0]
    assert frame["time_p50_us"].tolist() == [10.0, 20.0]
    assert frame["time_min_us"].tolist() == [5.0, 10.0]
    assert frame["time_max_us"].tolist() == [15.0, 30.0]
    # 1000 B in 10 us: 0.1 GB/s.
    assert frame["bw_gbps"].tolist() == [0.1, 0.05]
    # Latency is half the round trip (osu_latency): mean round trip 20 us -> 10 us.
    assert frame["latency_us"].tolist() == [10.0, 10.0]
    assert frame["latency_p99_us"].tolist() == [14.9, 14.9]
    assert str(frame["src_node"].dtype) == "string"


def test_floats_are_written_with_six_significant_digits(tmp_path: Path) -> None:
    _write(tmp_path, _row(0, 1, 1 / 3))
    line = (tmp_path / FILE_NAME).read_text().splitlines()[1].split(",")
    assert line[list(COLUMNS).index("time_us")] == "0.666667"


def test_a_newer_version_and_a_sweep_csv_are_refused(tmp_path: Path) -> None:
    _write(tmp_path, _row(0, 1, 5.0, version=P2P_SCHEMA_VERSION + 1))
    newer, now = P2P_SCHEMA_VERSION + 1, P2P_SCHEMA_VERSION
    with pytest.raises(
        UsageError, match=f"p2p schema version {newer}; this colbench reads 1 to {now}"
    ):
        load(tmp_path)
    sweep = tmp_path / "results.csv"
    sweep.write_text("schema_version,run_id,op\n3,r,all_reduce\n")
    with pytest.raises(UsageError, match="not a colbench p2p CSV"):
        load(sweep)
    with pytest.raises(UsageError, match="no p2p results"):
        load(tmp_path / "nowhere")


def test_a_version_1_file_loads_with_no_verdict(tmp_path: Path) -> None:
    # What colbench wrote before the verdict had columns: version 1's header and cells.
    v1 = [c for c in COLUMNS if P2P.added_in.get(c, 1) == 1]
    row = _row(0, 1, 5.0, version=1)
    (tmp_path / FILE_NAME).write_text(",".join(v1) + "\n" + ",".join(row.cells()[: len(v1)]) + "\n")
    frame = load(tmp_path)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["schema_version"].tolist() == [1] and frame["bw_gbps"].tolist() == [0.1]
    assert frame["link_verdict"].tolist() == [""]
    assert frame["link_p_value"].isna().all()


def test_a_version_2_file_must_have_the_verdict_columns(tmp_path: Path) -> None:
    v1 = [c for c in COLUMNS if P2P.added_in.get(c, 1) == 1]
    row = _row(0, 1, 5.0)
    (tmp_path / FILE_NAME).write_text(",".join(v1) + "\n" + ",".join(row.cells()[: len(v1)]) + "\n")
    with pytest.raises(
        UsageError, match="says p2p schema version 2 but lacks link_verdict, link_p_value"
    ):
        load(tmp_path)


def test_verdicts_are_recorded_on_every_row_of_their_link(tmp_path: Path) -> None:
    _write(tmp_path, _row(0, 1, 5.0), _row(1, 0, 10.0), _row(0, 2, 5.0), _row(2, 0, 5.0))
    measured = load(tmp_path)
    record_verdicts(tmp_path, {(0, 1): ("slow link", 0.00012), (0, 2): ("ok", 1.0)})
    frame = load(tmp_path)
    assert frame["link_verdict"].tolist() == ["slow link", "slow link", "ok", "ok"]
    assert frame["link_p_value"].tolist() == [0.00012, 0.00012, 1.0, 1.0]
    # The measured cells are the same, and no file is left beside.
    same = [c for c in COLUMNS if not c.startswith("link_")]
    assert frame[same].equals(measured[same])
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]


def test_matrix_text_marks_what_was_not_measured() -> None:
    text = matrix_text({(0, 1): 1.5, (1, 0): 0.25}, {0: "nodeA", 1: "nodeB"}, "bw")
    assert text.splitlines() == [
        "# bw (rows: src rank, columns: dst rank)",
        "       src         0         1  node",
        "         0         -       1.5  nodeA",
        "         1      0.25         -  nodeB",
    ]


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["p2p", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "Example" in out and "colbench p2p --nprocs 8" in out


@pytest.mark.parametrize("cell", ["1.5", "1" + "0" * 30, "x"])
def test_a_count_that_is_not_a_whole_int64_is_refused(tmp_path: Path, cell: str) -> None:
    # Once 1.5 read as 1 and a 31-digit count ended in an OverflowError traceback.
    _write(tmp_path, _row(0, 1, 5.0))
    lines = (tmp_path / FILE_NAME).read_text().splitlines()
    cells = lines[1].split(",")
    cells[list(COLUMNS).index("iters")] = cell
    (tmp_path / FILE_NAME).write_text(f"{lines[0]}\n{','.join(cells)}\n")
    with pytest.raises(UsageError, match="column iters holds a value that is not a number"):
        load(tmp_path)
