"""sweep --repeat and the gate on real gloo runs on loopback (no shaping, so no speed claims)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.results.rows import load
from tests.conftest import call_colbench

SWEEP = ["sweep", "--op", "all_reduce,all_gather", "--sizes", "1K-4K", "-n", "2", "-w", "1"]


@pytest.fixture(scope="module")
def repeated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("gate") / "repeated"
    proc = call_colbench(*SWEEP, "--repeat", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_repeat_interleaves_over_the_whole_plan_and_keeps_every_sample(
    repeated: tuple[Path, str],
) -> None:
    out, table = repeated
    frame = load(out)
    keys = ["op", "in_place", "size_bytes"]
    # all_reduce: 3 sizes in place; all_gather: 3 sizes in both placements.
    assert len(frame) == 9 * 3
    assert (frame.groupby(keys)["repeat"].apply(sorted) == [[0, 1, 2]] * 9).all()
    # Interleaved: the whole plan once, then again, not three samples of a size in a row.
    assert frame["repeat"].tolist() == [0] * 9 + [1] * 9 + [2] * 9
    assert (frame["wrong"] == 0).all()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["repeat"] == 3 and meta["rows"] == 27
    # The table shows every repeat, each in its own sections.
    assert table.count("# all_reduce  (repeat 2 of 3)") == 1
    assert table.count("# all_gather  (repeat 0 of 3)\n") == 1
    # Each op's average over the repeats closes the table, each repeat's named.
    assert table.count("(all_gather: median of 3 repeats; each ") == 1


def test_gate_on_real_runs_checks_correctness_and_presence(
    repeated: tuple[Path, str], tmp_path: Path
) -> None:
    baseline, _ = repeated
    second = tmp_path / "second"
    proc = call_colbench(*SWEEP, "--no-table", "--out", str(second))
    assert proc.returncode == 0, proc.stderr
    proc = call_colbench("gate", str(baseline), str(second))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "colbench gate: PASS: 9 rows: 9 same"
    # Fewer ops at another world size: the rows it has are not comparable (and say why),
    # the ones it lacks are missing; both fail the gate.
    other = tmp_path / "other"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K-4K", "-n", "2", "-w", "1",
        "--nprocs", "3", "--no-table", "--out", str(other),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = call_colbench("gate", str(baseline), str(other))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == (
        "colbench gate: FAIL (9 failure(s)): 9 rows: 3 not comparable, 6 missing"
    )
    assert proc.stdout.count("world_size 2 vs 3") == 3
