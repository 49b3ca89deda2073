"""Real sweeps: spawned gloo ranks, real files, through the CLI a user runs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.results.rows import COLUMNS, load
from tests.conftest import call_colbench, run_colbench

ALL_SIZED = [op for op in ops.REGISTRY if op.sized]


@pytest.mark.parametrize("nprocs", [2, 3])
def test_every_op_every_placement_is_correct(tmp_path: Path, nprocs: int) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all", "--sizes", "1K,64K", "--dtype", "float32,bfloat16",
        "--nprocs", str(nprocs), "-n", "3", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    frame = load(out)
    assert list(frame.columns) == list(COLUMNS)
    assert (frame["wrong"] == 0).all()
    assert set(frame["world_size"]) == {nprocs}
    # Every sized op ran both dtypes at both sizes in every placement torch offers it.
    for op in ALL_SIZED:
        rows = frame[frame["op"] == op.name]
        assert set(rows["dtype"]) == {"float32", "bfloat16"}, op.name
        assert set(rows["requested_bytes"]) == {1024, 65536}, op.name
        assert set(rows["in_place"]) == {int(p == "in") for p in op.placements}, op.name
        expected = {op.layout(1024, 4, nprocs).size_bytes, op.layout(65536, 4, nprocs).size_bytes}
        assert set(rows[rows["dtype"] == "float32"]["size_bytes"]) == expected
        assert (rows["time_us"] > 0).all()
        factor = op.busbw_factor(nprocs)
        assert (rows["busbw_gbps"] - rows["algbw_gbps"] * factor).abs().max() < 1e-6
    barrier = frame[frame["op"] == "barrier"]
    assert len(barrier) == 1 and int(barrier["size_bytes"].iloc[0]) == 0
    assert barrier["wrong"].isna().all()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert meta["world_size"] == nprocs and meta["rows"] == len(frame)
    # The console shows the nccl-tests table, units row included.
    assert "#wrong" in proc.stdout and "(GB/s)" in proc.stdout
    assert "Avg bus bandwidth" in proc.stdout


def test_every_dtype_and_redop_is_exact_at_three_ranks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce,reduce_scatter,reduce", "--sizes", "4K",
        "--dtype", "all", "--redop", "all", "--nprocs", "3", "-n", "2", "-w", "1",
        "--root", "2", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert (frame["wrong"] == 0).all()
    combos = set(zip(frame["dtype"], frame["redop"], strict=True))
    assert ("int8", "prod") in combos and ("bfloat16", "avg") in combos
    assert ("int32", "avg") not in combos  # avg needs floats: skipped with a note
    assert "avg needs a floating-point dtype" in proc.stderr
    assert set(frame[frame["op"] == "reduce"]["root"]) == {2}


def test_nccl_tests_flags_and_unaligned_sizes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_gather", "-b", "8", "-e", "4K", "-f", "4", "-n", "2", "-w", "1",
        "-c", "1", "--nprocs", "3", "-a", "max", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    # 8 B and 32 B leave no 16-byte chunk per rank at n=3: skipped with a note.
    assert sorted(set(frame["requested_bytes"])) == [128, 512, 2048]
    assert "skipped" in proc.stderr
    assert set(frame["average"]) == {"max"}
    assert (frame["size_bytes"] % 48 == 0).all()


def test_no_check_leaves_wrong_empty(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "broadcast", "--sizes", "1K", "-c", "0", "-n", "2", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert frame["wrong"].isna().all()
    assert "n/a" in proc.stdout and "N/A" not in proc.stdout


def test_two_runs_at_once_both_work(tmp_path: Path) -> None:
    def one(i: int):
        return run_colbench(
            "sweep", "--op", "all_reduce", "--sizes", "1K-8K", "-n", "2", "-w", "1",
            "--results-dir", str(tmp_path),
        )  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(one, range(2)))
    assert [p.returncode for p in procs] == [0, 0], [p.stderr for p in procs]
    runs = sorted(tmp_path.iterdir())
    assert len(runs) == 2
    for run in runs:
        assert len(load(run)) == 4


def test_existing_run_directory_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.csv").write_text("precious\n")
    proc = call_colbench("sweep", "--sizes", "1K", "--out", str(out))
    assert proc.returncode == 2
    assert (out / "results.csv").read_text() == "precious\n"
    assert proc.stderr.strip().count("\n") == 0 and "already exists" in proc.stderr


def test_a_gloo_runs_hardware_comes_from_this_machines_sysfs_and_has_no_ceiling(
    tmp_path: Path,
) -> None:
    """Spawned ranks on one node talk over loopback: no rate, so no ceiling, and why."""
    from colbench.hardware import links

    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K,4K", "-n", "2", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    ((label, facts),) = meta["hardware"].items()
    here = links.nics()
    assert [n["name"] for n in facts["nics"]] == [n["name"] for n in here]
    assert [(n["kind"], n["rate_gbit_s"]) for n in facts["nics"]] == [
        (n["kind"], n["rate_gbit_s"]) for n in here
    ]
    assert facts["interface"] == "lo" and facts["numa_nodes"] == links.numa_nodes()
    assert f"# node {label}: " in proc.stdout and "| CPU " in proc.stdout
    assert meta["ceiling"] == {
        "gbps": None,
        "source": "all ranks on one node talk over loopback, which has no rate",
    }
    frame = load(out)
    assert frame["ceiling_gbps"].isna().all() and frame["pct_of_ceiling"].isna().all()
    assert meta["verdicts"] == [] and "verdict" not in proc.stderr
    # The user's ceiling fills both columns: busbw as a share of it.
    again = tmp_path / "again"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "4K", "-n", "2", "--ceiling-gbps", "0.25",
        "--out", str(again),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(again)
    assert (frame["ceiling_gbps"] == 0.25).all()
    assert (
        abs(frame["pct_of_ceiling"] - 400 * frame["busbw_gbps"]) < 1e-3 * frame["pct_of_ceiling"]
    ).all()
    assert "# Of the ceiling       : all_reduce " in proc.stdout


def test_a_cpu_sweep_says_no_published_result_applies(tmp_path: Path) -> None:
    """Issue 38: every sweep is placed against the published results; a CPU run has none."""
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K", "-n", "2", "--nprocs", "2", "--out",
        str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "reference: no published result for this hardware (cpu" in proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["references"]["facts"]["gpu"] is None
    assert meta["references"]["none"].startswith("no published result for this hardware")
