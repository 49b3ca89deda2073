"""A world of one rank, what auto measures on a one-GPU machine (as nccl-tests -g 1 does).

NCCL is not here, but the rows of a world of one come from the same formulas on every
backend: a real one-rank gloo sweep of every collective shows they stay sane.
"""

from __future__ import annotations

import math
from pathlib import Path

from colbench.results.rows import load
from tests.conftest import call_colbench


def test_every_collective_gives_sane_rows_at_world_size_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--backend", "gloo", "--nprocs", "1", "--op", "all", "--sizes", "1K-4K",
        "-n", "2", "-w", "1", "--no-table", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = load(out)
    assert set(rows["world_size"]) == {1} and set(rows["status"]) == {"ok"}
    sized = rows[rows["op"] != "barrier"]
    assert (sized["wrong"] == 0).all()
    for column in ("time_us", "algbw_gbps", "busbw_gbps"):
        assert all(math.isfinite(v) and v >= 0 for v in rows[column]), column
    assert (rows["time_us"] > 0).all()
    # Nothing crosses between ranks in a world of one: nccl-tests' factors give 0 ...
    moving = sized[sized["op"].isin(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])]
    assert len(moving) and (moving["busbw_gbps"] == 0).all()
    # ... except where the factor does not depend on n.
    rooted = sized[sized["op"].isin(["broadcast", "reduce"])]
    assert len(rooted) and (rooted["busbw_gbps"] == rooted["algbw_gbps"]).all()
    assert (rooted["busbw_gbps"] > 0).all()
