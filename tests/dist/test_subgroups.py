"""--group-size: the world split into real process groups running every collective at once."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from colbench.bench import ops
from colbench.results.rows import COLUMNS, load
from tests.conftest import call_colbench

WORLD, GROUP = 4, 2


def test_every_op_in_groups_of_two_is_correct(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all", "--sizes", "1K,16K", "--nprocs", str(WORLD),
        "--group-size", str(GROUP), "--root", "1", "-n", "2", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert list(frame.columns) == list(COLUMNS)
    # Verification ran in every group; wrong counts are summed over all four ranks.
    assert (frame["wrong"].dropna() == 0).all()
    assert set(frame["world_size"]) == {WORLD}
    assert set(frame["group_size"]) == {GROUP} and set(frame["groups"]) == {WORLD // GROUP}
    for op in ops.REGISTRY:
        rows = frame[frame["op"] == op.name]
        assert len(rows) > 0, op.name
        if not op.sized:
            continue
        # nccl-tests' per-group formulas: n is the group size, not the world size.
        f32 = rows[rows["dtype"] == "float32"]
        expected = {op.layout(s, 4, GROUP).size_bytes for s in (1024, 16384)}
        assert set(f32["size_bytes"]) == expected, op.name
        factor = op.busbw_factor(GROUP)
        assert (rows["busbw_gbps"] - rows["algbw_gbps"] * factor).abs().max() < 1e-6, op.name
        aggregate = rows["busbw_gbps"] * (WORLD // GROUP)
        assert (rows["aggbw_gbps"] - aggregate).abs().max() < 1e-6, op.name
    assert set(frame[frame["op"] == "broadcast"]["root"]) == {1}
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["group_size"], meta["groups"], meta["config"]["group_size"]) == (2, 2, 2)
    assert f"{WORLD} rank(s) in {WORLD // GROUP} groups of {GROUP}" in proc.stdout


def _close(a: pd.Series, b: pd.Series) -> bool:
    return bool(((a - b).abs() <= 1e-5 * b.abs() + 1e-9).all())
