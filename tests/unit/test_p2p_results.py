"""p2p.csv: written and read back with its schema version; other files refused by name;
the command's help shows an example."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.cli import main
from colbench.errors import UsageError
from colbench.p2p import load
from colbench.p2p.report import matrix_text
from colbench.p2p.results import COLUMNS, FILE_NAME, P2P, P2P_SCHEMA_VERSION, P2PRow
from colbench.p2p.task import pair_row
from colbench.rundir import RunDir


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
    with pytest.raises(UsageError, match="p2p schema version 2; this colbench reads 1 to 1"):
        load(tmp_path)
    sweep = tmp_path / "results.csv"
    sweep.write_text("schema_version,run_id,op\n3,r,all_reduce\n")
    with pytest.raises(UsageError, match="not a colbench p2p CSV"):
        load(sweep)
    with pytest.raises(UsageError, match="no p2p results"):
        load(tmp_path / "nowhere")


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
