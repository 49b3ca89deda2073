"""``colbench predict`` on real gloo sweeps: spawned ranks, real run directories, the CLI
a user runs. Loopback on a shared machine is no shaped fabric, so this proves the path
(rows -> fit -> prediction -> check -> files), not the error bound: the shaped-fabric
validation is tests/dist/test_predict_fabric.py (docs/predict-validation.md)."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import run_colbench


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("predict")

    def sweep(n: int) -> Path:
        out = root / f"r{n}"
        proc = run_colbench(
            "sweep", "--backend", "gloo", "--op", "all_reduce,all_gather",
            "--sizes", "4K-64K", "--nprocs", str(n), "-n", "5", "-w", "2", "--out", str(out),
            "--no-table",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((2, 3, 4), pool.map(sweep, (2, 3, 4)), strict=True))


def test_predict_from_real_runs_checks_against_a_real_run(
    sweeps: dict[int, Path], tmp_path: Path
) -> None:
    out = tmp_path / "predicted"
    proc = run_colbench(
        "predict", str(sweeps[2]), str(sweeps[3]), "--ranks", "8,64", "--sizes", "4K-64K",
        "--against", str(sweeps[4]), "--out", str(out), "--plot",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for op in ("all_reduce", "all_gather"):
        assert f"{op} ring:" in proc.stdout
        assert "largest |error| from 4K: " in proc.stdout and f"({op}, " in proc.stdout
    # Ring runs on one node: targets on one node too, trees from the ring's parameters.
    assert "each target on one node" in proc.stdout
    assert "ring runs' link parameters" in proc.stdout
    with open(out / "predict.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # 2 targets x 5 sizes (4K..64K) x (3 all_reduce algorithms + all_gather's ring)
    assert len(rows) == 2 * 5 * 4
    assert all(
        float(r["time_low_us"]) <= float(r["time_us"]) <= float(r["time_high_us"]) for r in rows
    )
    with open(out / "against.csv", newline="") as f:
        against = list(csv.DictReader(f))
    assert {r["world_size"] for r in against} == {"4"} and len(against) == 2 * 5
    meta = json.loads((out / "meta.json").read_text())
    assert {(f["op"], f["algo"]) for f in meta["fits"]} == {
        ("all_reduce", "ring"),
        ("all_gather", "ring"),
    }
    assert (out / "predict.png").is_file()


def test_one_real_world_size_is_refused(sweeps: dict[int, Path]) -> None:
    proc = run_colbench("predict", str(sweeps[3]), "--ranks", "64")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "one world size only" in proc.stderr
