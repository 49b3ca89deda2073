"""colbench crosscheck end to end: a stand-in nccl-tests program beside a real gloo sweep.

The stand-in (tests/nccl_tests_standin.py) records the arguments it was given and prints a
real nccl-tests log from tests/data cut to what it was asked for. The tests check the
flags it got, and that the joined table pairs each size's real nccl-tests time with the
time colbench measured for that size.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from colbench.bench import ops
from colbench.results.rows import load
from tests import nccl_tests_standin
from tests.conftest import call_colbench, run_colbench
from tests.datadir import NCCL_TESTS_LOGS

CASES = {
    # op: (real log, crosscheck flags, nccl-tests flags it must get, placement kept)
    "all_reduce": (
        "all_reduce__a3mega-ztan-h100-2node.log",
        ["--sizes", "1K-8K", "-n", "3", "-w", "1", "--redop", "sum"],
        "-b 1024 -e 8192 -f 2 -g 2 -d float -o sum -n 3 -w 1 -c 1 -a 1",
        1,
    ),
    "broadcast": (
        "broadcast__nccl-ebpf-rtx5090-socket.log",
        ["-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-w", "0", "-r", "1", "-a", "max"],
        "-b 1024 -e 65536 -f 4 -g 2 -d float -r 1 -n 2 -w 0 -c 1 -a 3",
        1,
    ),
    "sendrecv": (
        "sendrecv__xxrjun-cluster01-h100-10node.log",
        ["-b", "32M", "-e", "64M", "-f", "2", "-d", "double", "-n", "2", "-w", "1", "-c", "0"],
        "-b 33554432 -e 67108864 -f 2 -g 2 -d double -n 2 -w 1 -c 0 -a 1",
        0,
    ),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_crosscheck_maps_flags_and_joins_size_by_size(tmp_path: Path, op: str) -> None:
    real_log, flags, expected_argv, in_place = CASES[op]
    bin_dir = tmp_path / "nccl-tests" / "build"
    bin_dir.mkdir(parents=True)
    record = tmp_path / "argv.json"
    nccl_tests_standin.write(bin_dir, op, real_log, record)
    out = tmp_path / "cross"
    proc = call_colbench(
        "crosscheck", "--op", op, *flags, "--backend", "gloo", "--nprocs", "2",
        "--nccl-tests", str(tmp_path / "nccl-tests"), "--out", str(out), timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # The flag mapping, exactly.
    assert json.loads(record.read_text()) == expected_argv.split()

    nccl_rows = load(out / "nccl-tests")
    colbench_rows = load(out / "colbench")
    assert set(colbench_rows["world_size"]) == {2} and set(colbench_rows["backend"]) == {"gloo"}
    joined = pd.read_csv(out / "crosscheck.csv").sort_values("size_bytes")
    real = nccl_tests_standin.real_rows(real_log)
    sizes = sorted(set(colbench_rows["size_bytes"]))
    # One row per size, in the one placement colbench has for this op.
    assert joined["size_bytes"].tolist() == sizes
    assert set(joined["in_place"]) == {in_place} and joined["comparable"].all()
    coll = ops.get(op)
    time_at = [i for i, c in enumerate(_columns(real_log)) if c == "time"][in_place]
    for row in joined.itertuples():
        # nccl-tests' side is the real log's time at this very size.
        assert row.nccl_tests_time_us == pytest.approx(float(real[row.size_bytes][time_at]))
        ours = colbench_rows[
            (colbench_rows["size_bytes"] == row.size_bytes)
            & (colbench_rows["in_place"] == in_place)
        ]
        assert len(ours) == 1
        assert row.colbench_time_us == pytest.approx(float(ours["time_us"].iloc[0]), rel=1e-5)
        assert row.time_ratio == pytest.approx(row.colbench_time_us / row.nccl_tests_time_us)
        busbw = row.size_bytes / row.nccl_tests_time_us / 1e3 * coll.busbw_factor(2)
        assert row.nccl_tests_busbw_gbps == pytest.approx(busbw, rel=1e-5)
        assert row.colbench_busbw_gbps == pytest.approx(float(ours["busbw_gbps"].iloc[0]), rel=1e-5)
        printed = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
        assert any(f"{row.time_ratio:.3f}" in line for line in printed)
    # Both runs' files and the raw log stay; the figure is a PNG.
    assert len(nccl_rows) >= len(sizes)
    log = (out / "nccl-tests.log").read_text()
    assert all(real[s][time_at] in log for s in sizes)
    assert (out / "crosscheck.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "crosscheck.txt").read_text().strip() == proc.stdout.strip()
    assert "colbench ran on gloo" in proc.stdout and "mpirun" in proc.stdout


def _columns(real_log: str) -> list[str]:
    for line in (NCCL_TESTS_LOGS / real_log).read_text().splitlines():
        tokens = line.lstrip("#").split()
        if line.startswith("#") and tokens[:3] == ["size", "count", "type"]:
            return tokens
    raise AssertionError(f"no header in {real_log}")


def test_crosscheck_finds_the_program_on_path_and_keeps_a_failing_log(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    # An MPI build's name (NAME_SUFFIX=_mpi) on PATH; the stand-in has no 1M row, so it
    # fails the way a broken nccl-tests run does: a message and a non-zero status.
    nccl_tests_standin.write(
        bin_dir, "all_reduce", "all_reduce__a3mega-ztan-h100-2node.log", record,
        name="all_reduce_perf_mpi",
    )  # fmt: skip
    out = tmp_path / "cross"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = call_colbench(
        "crosscheck", "--sizes", "1000", "--backend", "gloo", "--out", str(out), env=env
    )
    assert proc.returncode == 3, proc.stderr
    assert json.loads(record.read_text())[:4] == ["-b", "1000", "-e", "1000"]
    error = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(error) == 1
    assert "all_reduce_perf_mpi exited with status 1" in error[0]
    assert str(out / "nccl-tests.log") in error[0] and "has no rows for [1000]" in error[0]
    assert "has no rows" in (out / "nccl-tests.log").read_text()
    assert not (out / "colbench").exists()


def test_a_hung_nccl_tests_is_stopped_and_its_log_kept(tmp_path: Path) -> None:
    program = tmp_path / "all_reduce_perf"
    program.write_text(
        f"#!{sys.executable}\nimport time\nprint('# nThread 1 nGpus 2', flush=True)\n"
        "time.sleep(120)\n"
    )
    program.chmod(0o755)
    out = tmp_path / "cross"
    started = time.monotonic()
    proc = run_colbench(
        "crosscheck", "--sizes", "1K", "--backend", "gloo", "--nccl-tests", str(tmp_path),
        "--nccl-tests-timeout", "1", "--out", str(out), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    assert time.monotonic() - started < 30
    error = [line for line in proc.stderr.splitlines() if "error" in line]
    assert error == [
        "colbench: error: all_reduce_perf did not finish within --nccl-tests-timeout 1 s and "
        f"was stopped; its output is in {out / 'nccl-tests.log'}"
    ]
    assert (out / "nccl-tests.log").read_text() == "# nThread 1 nGpus 2\n"
