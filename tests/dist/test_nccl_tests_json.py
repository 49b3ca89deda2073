"""sweep -J -I 1 on real gloo ranks: nccl-tests' JSON report of the run, read back.

One run (2 ranks, all_gather: torch has both placements of it) with NCCL_TESTS_MIN_BW
far above any CPU's busbw: the report is whole, its per-iteration blocks hold each
rank's times and the slowest per iteration, the run fails as nccl-tests fails it (exit 1,
``okay`` "false"), and ``colbench import`` reads the report back as the run's samples.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.results import load
from tests.conftest import call_colbench, run_colbench

PER_PROCESS = "per_process_max_times_us"


def test_report_of_a_real_run(tmp_path: Path) -> None:
    path = tmp_path / "ag.json"
    # A real process: the report's args are the command line (sys.argv) that ran.
    done = run_colbench(
        *("sweep", "--backend", "gloo", "--nprocs", "2", "--op", "all_gather", "--no-table"),
        *("-b", "1K", "-e", "4K", "-f", "4", "-n", "6", "-w", "1", "--out", str(tmp_path / "run")),
        *("-I", "1", "-J", str(path)),
        env={"NCCL_TESTS_MIN_BW": "1000000"},
        timeout=240,
    )
    assert done.returncode == 1, done.stderr
    assert "NCCL_TESTS_MIN_BW=1e+06" in done.stderr and "FAILED" in done.stderr
    report = json.loads(path.read_text())
    assert report["errors"] == [""]
    assert report["average_bus_bandwidth"]["okay"] == "false"
    assert [d["rank"] for d in report["config"]["devices"]] == [0, 1]
    rows = load(tmp_path / "run")
    assert [r["size"] for r in report["results"]] == sorted(set(rows["size_bytes"]))
    for entry in report["results"]:
        for name, in_place in (("out_of_place", 0), ("in_place", 1)):
            block = entry[f"{name}_per_iter"]
            ranks = block[PER_PROCESS]
            assert len(ranks) == 2 and all(len(times) == 6 for times in ranks)
            assert block["times_us"] == [max(pair) for pair in zip(*ranks, strict=True)]
            ordered = sorted(block["times_us"])
            assert block["p50_us"] == ordered[3] and block["max_us"] == ordered[-1]
            mine = rows[(rows["size_bytes"] == entry["size"]) & (rows["in_place"] == in_place)]
            # results.csv holds 6 significant digits.
            assert entry[name]["time"] == pytest.approx(mine["time_us"].iloc[0], rel=1e-5)
    average = sum(rows["busbw_gbps"]) / len(rows)
    # The report has six decimals, results.csv six significant digits.
    expected = pytest.approx(average, rel=1e-5, abs=1e-6)
    assert report["average_bus_bandwidth"]["bandwidth"] == expected

    back = call_colbench("import", "nccl-tests", str(path), "--out", str(tmp_path / "back"))
    assert back.returncode == 0, back.stderr
    samples = load(tmp_path / "back")
    assert len(samples) == len(rows) * 6
    assert set(samples["op"]) == {"all_gather"} and set(samples["world_size"]) == {2}


def test_report_that_cannot_be_written_is_exit_6(tmp_path: Path) -> None:
    """The write-failure rules (colbench.results.tables): one line naming the file, exit 6."""
    done = run_colbench(
        *("sweep", "--backend", "gloo", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "2"),
        *("--no-table", "--out", str(tmp_path / "run"), "-J", "/proc/colbench-report.json"),
        timeout=240,
    )
    assert done.returncode == 6, done.stderr
    assert "cannot write /proc/colbench-report.json" in done.stderr


def test_a_hang_keeps_every_size_measured_before_it(tmp_path: Path) -> None:
    """Rank 1 hangs in its 5th timed batch (size 3 of all_gather's two placements a size):
    the run times out (exit 4) and the report holds the two sizes before, whole, with
    errors saying the run stopped early."""
    path = tmp_path / "r.json"
    done = run_colbench(
        *("sweep", "--backend", "gloo", "--nprocs", "2", "--op", "all_gather", "--no-table"),
        *("-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1", "--timeout", "4"),
        *("--out", str(tmp_path / "run"), "-I", "1", "-J", str(path)),
        env={"COLBENCH_FAULT": "1:5:hang"},
        timeout=240,
    )
    assert done.returncode == 4, done.stderr
    report = json.loads(path.read_text())
    assert [r["size"] for r in report["results"]] == [1024, 4096]
    assert report["errors"] != [""] and "stopped" in report["errors"][0]
    assert all(len(r["in_place_per_iter"]["times_us"]) == 3 for r in report["results"])
