"""sweep --init-only's rows (init.csv): their aggregation over ranks, the file's reader,
and the options it refuses (tests/dist/test_init_only.py runs it for real)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from colbench.commands.sweep.setup import SetupSample, setup_rows, table_lines
from colbench.results.init_rows import INIT, INIT_VERSION, load_init
from colbench.results.rundir import RunDir
from tests.conftest import run_main

INFO = SimpleNamespace(
    run_id="r", variant="", backend="nccl", engine="torch", device_name="H100",
    world_size=3, nnodes=1, ranks_per_gpu=1,
)  # fmt: skip


def test_a_row_is_the_slowest_rank_beside_the_average() -> None:
    per_rank = [
        SetupSample(100.0, 900.0, 1 << 20),
        SetupSample(400.0, 800.0, 3 << 20),  # the slowest: 1200 us in all
        SetupSample(50.0, 50.0, 2 << 20),
    ]
    (row,) = setup_rows([per_rank], INFO)
    assert row.init_us == 1200.0 and row.slowest_rank == 1
    assert row.init_ranks_avg_us == pytest.approx((1000 + 1200 + 100) / 3)
    assert row.create_us == 400.0 and row.first_call_us == 900.0
    assert row.device_mem_bytes == 3 << 20 and row.world_size == 3
    eager = setup_rows([[SetupSample(70.0, None, None)] * 3], INFO)[0]
    assert eager.first_call_us is None and eager.device_mem_bytes is None and eager.init_us == 70


def test_init_csv_reads_back_and_says_what_it_cannot_read(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    rows = setup_rows([[SetupSample(10.0, 5.0, None)] * 3, [SetupSample(20.0, None, 0)] * 3], INFO)
    with run.writer(INIT) as writer:
        writer.write_all(rows)
    frame = load_init(tmp_path)
    assert list(frame["init_us"]) == [15.0, 20.0] and list(frame["repeat"]) == [0, 1]
    assert math.isnan(frame["device_mem_bytes"][0]) and frame["device_mem_bytes"][1] == 0
    lines = table_lines(frame)
    assert lines[0].split()[1:4] == ["engine", "backend", "ranks"]
    assert lines[1].split()[-2:] == ["5.0", "-"] and lines[2].split()[-2:] == ["-", "0.0"]
    text = (tmp_path / "init.csv").read_text()
    (tmp_path / "init.csv").write_text(text.replace(f"\n{INIT_VERSION},", "\n99,"))
    with pytest.raises(Exception, match="version 99 is newer"):
        load_init(tmp_path)
    with pytest.raises(Exception, match="sweep --init-only writes it"):
        load_init(tmp_path / "elsewhere")


@pytest.mark.parametrize(
    "extra",
    [("--group-size", "1"), ("--contend", "gemm:64"), ("-J", "x.json"), ("--split", "mod:1")],
)
def test_init_only_refuses_what_acts_on_collectives(
    extra: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(capsys, "sweep", "--backend", "gloo", "--init-only", *extra)
    assert code == 2 and err.count("\n") == 1
    assert "--init-only times the set-up of one communicator of every rank" in err
