"""What ``colbench replay`` reads and prints: a plan cut short by its reader is exit 141
however stdout is buffered; digits in a file's name that are no rank of the job's world
are not its rank; a dtype colbench does not measure is named, with the call's size; the
total compares the job's time with the same kinds' prediction; an NCCL job replayed on
gloo is warned of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.replay import command as report
from colbench.commands.replay import plan as planning
from colbench.commands.replay import traces
from colbench.commands.replay.plan import Entry, Key, Plan
from tests.conftest import REPO, run_main
from tests.unit.replay_traces import VALID, fr_dump, param_trace


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_reader_that_closes_midway_through_a_long_plan_is_exit_141(
    tmp_path: Path, unbuffered: str
) -> None:
    # 3,000 kinds: some 180 KB of table, more than a pipe holds, so colbench is still
    # writing when the reader goes (python -u once took the partial write as all of it).
    trace = [param_trace(in_msg_size=4 * k, out_msg_size=4 * k)[0] for k in range(1, 3001)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(trace))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    proc = subprocess.Popen(
        [sys.executable, "-m", "colbench", "replay", str(path), "--dry-run"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"replay: 3000 kinds of call to measure")
    proc.stdout.close()  # `| head -1`: the reader leaves with most of the plan unread
    try:
        code = proc.wait(timeout=120)
    finally:
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert (code, err) == (141, "")


def _plan(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, Any, str]:
    code, out, err = run_main(capsys, "replay", *map(str, paths), "--dry-run", "--json")
    return code, json.loads(out) if code == 0 else None, err


def test_digits_in_a_name_that_are_no_rank_of_the_world_are_not_a_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A PARAM trace of a 4-rank job named by its step, a dump of a 2-rank job numbered 9:
    # the number is something else (docs/replay.md), so the trace's rank is unknown.
    step = tmp_path / "param_step10.json"
    step.write_text(json.dumps(param_trace(world_size=4)))
    nine, zero, one = (tmp_path / f"fr_{r}.json" for r in (9, 0, 1))
    for path in (nine, zero, one):
        path.write_text(json.dumps(fr_dump()))
    for path in (step, nine):
        code, out, err = run_main(capsys, "replay", str(path), "--dry-run")
        assert code == 0, err
        assert out.splitlines()[0].endswith("of rank ?; 1 step")
    code, out, _ = run_main(capsys, "replay", str(zero), str(one), "--dry-run")
    assert code == 0 and "flight recorder of rank 0, 1;" in out.splitlines()[0]
    # Where ranks matter (several traces), the one that names none is refused, and why.
    code, _, err = run_main(capsys, "replay", str(zero), str(nine), "--dry-run")
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.endswith(
        "fr_9.json: several traces given but this one does not say its rank (the 9 in its "
        "name is not a rank of the job's world of 2)"
    )


def test_a_dtype_colbench_does_not_measure_is_named_with_its_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "param.json"
    path.write_text(json.dumps(param_trace(comms="broadcast", dtype="complex64", world_size=4)))
    code, plan, err = _plan(capsys, path)
    assert code == 0, err
    (entry,) = plan
    assert (entry["dtype"], entry["size_bytes"], entry["reason"]) == (
        "complex64", 32, "a dtype colbench does not measure (complex64)"
    )  # fmt: skip
    code, out, _ = run_main(capsys, "replay", str(path), "--dry-run")
    assert "  broadcast 32 complex64 x4 ranks: 1 call: a dtype colbench does not" in out
    assert "not measured (1 call):" in out


def test_a_size_below_one_chunk_per_rank_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "param.json"
    path.write_text(json.dumps(param_trace(comms="reduce_scatter", in_msg_size=3, out_msg_size=1)))
    code, plan, err = _plan(capsys, path)
    assert code == 0, err
    assert plan[0]["reason"] == (
        "12 B over 2 ranks is less than one 16-byte chunk per rank, the least colbench "
        "(like nccl-tests) lays reduce_scatter out"
    )


def _entry(op: str, measured_us: float, recorded_us: float | None) -> Entry:
    key = Key(op, 4096, "float32", 2)
    return Entry(key, 2, 1, recorded_us=recorded_us, measured_us=measured_us)


def test_the_total_compares_the_job_with_the_kinds_it_timed() -> None:
    timed, untimed = _entry("all_reduce", 100.0, 50.0), _entry("all_gather", 300.0, None)
    lines = report.result_text(Plan([timed, untimed], 1))
    total = next(line for line in lines if line.split()[0] == "total")
    assert total.split() == ["total", "800.0"]  # the job's 100 us is no total of both
    (only,) = [line for line in lines if "the job timed" in line]
    assert only.split()[-3:] == ["200.0", "100.0", "0.50"]
    assert "total of the 1 kind the job timed" in only
    lines = report.result_text(Plan([timed, _entry("all_gather", 300.0, 600.0)], 1))
    total = next(line for line in lines if line.split()[0] == "total")
    assert total.split() == ["total", "800.0", "1,300.0", "1.62"]
    assert not [line for line in lines if "the job timed" in line]


def test_an_nccl_job_replayed_on_gloo_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for name, data in VALID["nccl-record-param-comms"]:
        (tmp_path / name).write_bytes(data)
        files.append(str(tmp_path / name))
    plan = planning.build(traces.read(files))
    assert plan.backends == ("nccl",)
    sweep = report.sweeps(plan, tmp_path, {"backend": "gloo"})[0]
    report._warn_backend(plan, sweep.config(tmp_path / "run"))
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "traces are of an NCCL job (GPUs) and this replay runs gloo" in line
    gloo = planning.build(traces.read([str(tmp_path / "rank0.json")]))
    report._warn_backend(Plan(gloo.entries, 1), sweep.config(tmp_path / "run"))
    assert capsys.readouterr().err == ""
