"""An nccl-tests command line, its -e capped for gloo, run by ``colbench sweep`` on real ranks:
each flag's nccl-tests meaning reaches the rows."""

from __future__ import annotations

from pathlib import Path

from colbench.results.rows import load
from tests.conftest import call_colbench


def test_an_nccl_tests_line_measures_what_nccl_tests_would(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # broadcast_perf -b 1K -e 3M -r -1 -c 2 -N 2 -w 1 -n 2 -g 1 -t 1 -p 1 -T 0: no -f, so
    # sizes step by -i (1M), every rank is the root in turn, two passes of the size loop.
    proc = call_colbench(
        "sweep", "--op", "broadcast", "-b", "1K", "-e", "3M", "-r", "-1", "-c", "2", "-N", "2",
        "-w", "1", "-n", "2", "-g", "1", "-t", "1", "-p", "1", "-T", "0",
        "--backend", "gloo", "--nprocs", "2", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "-p/--parallel_init changes nothing here" in proc.stderr
    assert "check 2 passes" in proc.stdout
    rows = load(out)
    sizes = [1024, 1024 + 2**20, 1024 + 2 * 2**20]
    assert sorted(set(rows["requested_bytes"])) == sizes
    assert sorted(set(rows["root"])) == [0, 1]
    assert sorted(set(rows["repeat"])) == [0, 1]
    # Every (size, root, repeat) once, in the placement broadcast has (in-place).
    assert len(rows) == len(sizes) * 2 * 2
    assert (rows["warmup"] == 1).all() and (rows["iters"] == 2).all()
    assert (rows["wrong"] == 0).all()
