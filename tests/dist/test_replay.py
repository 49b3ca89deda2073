"""colbench replay on a trace this test records itself: a 2-rank gloo job under the torch
profiler (tests/replay_job.py) making a known set of collectives for two steps."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench.config import suite
from colbench.host.launchers.rendezvous import free_port
from tests.conftest import REPO, call_colbench

#: (op, size_bytes, dtype, group_size, calls) of the job's two steps, in colbench's sizes:
#: all_gather's is its output, reduce_scatter's its input (replay_job.py's step()).
EXPECTED = {
    ("all_reduce", 4096, "float32", 2, 6),
    ("all_reduce", 128, "bfloat16", 2, 4),
    ("all_gather", 4096, "float32", 2, 2),
    ("all_gather", 2048, "float64", 2, 2),
    ("reduce_scatter", 8192, "float32", 2, 4),
    ("broadcast", 800, "int64", 2, 2),
    ("all_to_all", 4096, "float32", 2, 2),
    ("reduce", 512, "float16", 2, 2),
    ("barrier", 0, "float32", 2, 2),
    # The busiest rank's bytes: rank 1 receives 12 + 20 float32.
    ("all_to_allv", 128, "float32", 2, 2),
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("job")
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = {
            **os.environ, "PYTHONPATH": str(REPO), "RANK": str(rank), "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
        }  # fmt: skip
        cmd = [sys.executable, "-W", "ignore", str(REPO / "tests" / "replay_job.py")]
        procs.append(subprocess.Popen([*cmd, str(out / f"rank{rank}.json")], env=env, text=True))
    try:
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [str(out / f"rank{rank}.json") for rank in range(2)]


def test_dry_run_reproduces_the_jobs_calls(traces: list[str]) -> None:
    proc = call_colbench("replay", *traces, "--dry-run", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    measurable = [e for e in plan if "reason" not in e]
    got = [(e["op"], e["size_bytes"], e["dtype"], e["group_size"], e["calls"]) for e in measurable]
    assert sorted(got) == sorted(EXPECTED)
    assert all(e["calls_per_step"] == e["calls"] / 2 for e in plan)
    (uneven,) = (e for e in plan if e["op"] == "all_to_allv")
    assert uneven["matrix_bytes"] == [[16, 48], [32, 80]]
    # Rows = senders; the mean rank sends (64 + 112) / 2 bytes.
    assert uneven["requested_bytes"] == 88
    # gloo's work events time every call the job made.
    assert all(e["recorded_us"] > 0 for e in measurable)
    left = {e["op"]: e["reason"] for e in plan if "reason" in e}
    assert set(left) == {"c10d::send", "c10d::recv_"}
    assert all("point-to-point" in reason for reason in left.values())


def test_one_ranks_trace_of_an_uneven_all_to_allv_is_refused(traces: list[str]) -> None:
    proc = call_colbench("replay", traces[0], "--dry-run", timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("colbench: error: ")
    assert "found rank 0, missing rank 1" in line


def test_replay_measures_the_plan_and_writes_suites(traces: list[str], tmp_path: Path) -> None:
    out = tmp_path / "replay"
    proc = call_colbench("replay", *traces, "--iters", "2", "--warmup", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "top contributors: " in proc.stdout
    (per_op,) = (line for line in proc.stdout.splitlines() if line.startswith("per op, "))
    assert {op for op, *_ in EXPECTED} == {
        part.split()[0] for part in per_op.split(": ")[1].split("; ")
    }
    plan = json.loads((out / "plan.json").read_text())
    with (out / "replay.csv").open() as f:
        rows = list(csv.DictReader(f))
    measured = {(r["op"], int(r["size_bytes"]), r["dtype"]): r for r in rows if not r["reason"]}
    assert {(op, size, dtype) for op, size, dtype, _, _ in EXPECTED} == set(measured)
    assert all(float(r["measured_us"]) > 0 for r in measured.values())
    suites = sorted((out / "suites").glob("*.yaml"))
    assert len(suites) == len({(e["op"], e["dtype"]) for e in plan if "reason" not in e})
    covered = set()
    for path in suites:
        values = suite.load(path)
        for entry in plan:
            same = (entry["op"], entry["dtype"]) == (values["op"], values["dtype"])
            if same and "reason" not in entry:
                asked = entry.get("requested_bytes", entry["size_bytes"])
                assert str(asked) in values["sizes"].split(",")
                assert values["nprocs"] == entry["group_size"]
                covered.add((entry["op"], entry["size_bytes"], entry["dtype"]))
    assert covered == set(measured)
