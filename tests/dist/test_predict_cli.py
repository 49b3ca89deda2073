"""``colbench predict`` on real gloo sweeps: real run directories, the CLI a user runs.

The fit needs times that physics sets: on an unshaped loopback of a shared 2-core
machine, 2 to 4 ranks at 4K-64K measure the scheduler, and the robust fit dropped so
many points in 1 of 10 runs that it refused the runs ("cannot identify the model
(points)"). So the path (rows -> fit -> prediction -> check -> files) runs on a shaped
namespace fabric, one rank per node, set up as tests/dist/test_predict_fabric.py's (whose
docstring says why each setting is there) on fewer nodes and sizes; this test checks
the path, that one the error bound. Skipped, with the reason, where namespaces cannot be
made. Refusing runs of one world size needs no timing: it runs on loopback.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import netns
from tests.conftest import call_colbench, run_colbench

SWEEP = ["sweep", "--backend", "gloo", "--op", "all_reduce,all_gather", "--sizes", "4K-64K"]
SWEEP += ["-n", "5", "-w", "2", "--no-table"]
RATE_MBIT = 100.0
#: 1 ms of link time per data packet: the fabric's latency per message (no netem here).
PACKET_COST_BYTES = 12_500

_reason = netns.unavailable()


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Path]]:
    if _reason is not None:
        pytest.skip(f"no network namespaces: {_reason}")
    root = tmp_path_factory.mktemp("predict")
    with netns.fabric(4, "pc") as fabric:
        fabric.shape(RATE_MBIT, small_first=True, packet_cost_bytes=PACKET_COST_BYTES)
        fabric.sysctl("net.ipv4.tcp_slow_start_after_idle", 0)
        runs = {}
        for n in (2, 3, 4):
            out = root / f"r{n}"
            results = fabric.colbench(
                [*SWEEP, "--out", str(out)], nodes=n, wrapper=("chrt", "--fifo", "1")
            )
            codes = [proc.returncode for proc in results]
            assert codes == [0] * n, f"{n} ranks: {codes}\n{results[0].stderr[-2000:]}"
            runs[n] = out
        yield runs


@pytest.mark.fabric  # namespaces and shaped links
def test_predict_from_real_runs_checks_against_a_real_run(
    sweeps: dict[int, Path], tmp_path: Path
) -> None:
    out = tmp_path / "predicted"
    proc = run_colbench(
        "predict", str(sweeps[2]), str(sweeps[3]), "--ranks", "8,64", "--sizes", "4K-64K",
        "--against", str(sweeps[4]), "--out", str(out), "--plot",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for op in ("all_reduce", "all_gather"):
        assert f"{op} ring:" in proc.stdout
        assert "largest |error| from 4K: " in proc.stdout and f"({op}, " in proc.stdout
    # Ring runs of one rank per node: targets the same, trees from the ring's parameters.
    assert "(1 ranks per node)" in proc.stdout
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


def test_one_real_world_size_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "r3"
    proc = call_colbench(*SWEEP, "--sizes", "4K,64K", "--nprocs", "3", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    proc = call_colbench("predict", str(run), "--ranks", "64")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "one world size only" in proc.stderr
