"""colbench replay's readers on hand-made files of the formats this machine cannot record
(NCCL's record_param_comms, PARAM's basic trace, flight-recorder dumps), and its refusals.

Where each format comes from: record_param_comms' keys are torch's own
(torch/csrc/profiler/util.h: "Collective name", "dtype", "In msg nelems", "Out msg nelems",
"Group size", "In split size", "Process Group Name", "Seq"; ParamCommsUtils.hpp fills them
on NCCL; since torch 2.4 the collective's kernel event carries them too). The dtype is the
ScalarType's name ("Float", "BFloat16"). PARAM's basic trace is the list of
{"comms", "in_msg_size", "out_msg_size", "dtype", "world_size", "in_split", "out_split"}
that facebookresearch/param's commsTraceParser._parseBasicTrace reads. The flight
recorder's layout (version, pg_config, entries with profiling_name, input_sizes,
output_sizes, input_dtypes, process_group) is what torch 2.13's _dump_fr_trace wrote here
for a gloo job.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_main
from tests.unit.replay_traces import CUT_SPLITS, kernel
from tests.unit.replay_traces import rpc_event as _rpc


def _write(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def _plan(capsys: pytest.CaptureFixture[str], *files: str) -> list[dict[str, Any]]:
    code, out, err = run_main(capsys, "replay", *files, "--dry-run", "--json")
    assert code == 0, err
    return json.loads(out)


def _tuples(plan: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {(e["op"], e["size_bytes"], e["dtype"], e["group_size"], e["calls"]) for e in plan}


def test_nccl_record_param_comms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        _rpc("allreduce", 1024, 1024, "Float", 1), kernel(1, 40.0),
        _rpc("allreduce", 1024, 1024, "Float", 2), kernel(2, 60.0),
        _rpc("_allgather_base", 256, 1024, "BFloat16", 3),
        _rpc("_reduce_scatter_base", 4096, 1024, "Float", 4),
        _rpc("allreduce_coalesced", 10, 10, "Float", 5),
        # torch keeps 30 split sizes of a larger group's all_to_allv (kTruncatLength).
        _rpc("all_to_allv", 40, 40, "Float", 6, **{"In split size": CUT_SPLITS}),
        {"ph": "X", "name": "ProfilerStep#7", "ts": 0, "dur": 9},
        {"ph": "X", "name": "ProfilerStep#8", "ts": 9, "dur": 9},
    ]  # fmt: skip
    trace = {"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4},
             "traceEvents": events}  # fmt: skip
    plan = _plan(capsys, _write(tmp_path / "rank0.json", trace))
    assert _tuples([e for e in plan if "reason" not in e]) == {
        ("all_reduce", 4096, "float32", 4, 2),
        ("all_gather", 2048, "bfloat16", 4, 1),
        ("reduce_scatter", 16384, "float32", 4, 1),
    }
    (reduced,) = (e for e in plan if e["op"] == "all_reduce")
    assert reduced["recorded_us"] == 50.0 and reduced["calls_per_step"] == 1.0
    left = {e["op"]: e["reason"] for e in plan if "reason" in e}
    assert "coalesced" in left["allreduce_coalesced"]
    assert "first 30 peers" in left["all_to_allv"]


def test_param_basic_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = [
        {"comms": "init", "pg_id": 0, "global_ranks": [0, 1, 2, 3], "world_size": 4},
        {"comms": "all_reduce", "in_msg_size": 2048, "out_msg_size": 2048, "dtype": "float",
         "world_size": 4},
        {"comms": "all_gather_base", "in_msg_size": 64, "out_msg_size": 256, "dtype": "half",
         "world_size": 4},
        {"comms": "all_to_allv", "in_msg_size": 16, "out_msg_size": 16, "dtype": "float",
         "world_size": 4, "in_split": [4, 4, 4, 4], "out_split": [4, 4, 4, 4]},
        {"compute": "gemm", "mm_dim": 64, "dtype": "float"},
        # 12 bytes per rank: colbench splits by rank in whole 16-byte chunks.
        {"comms": "all_gather", "in_msg_size": 3, "out_msg_size": 12, "dtype": "float",
         "world_size": 4},
        {"comms": "all_reduce", "in_msg_size": 2048, "out_msg_size": 2048, "dtype": "float",
         "world_size": 4},
    ]  # fmt: skip
    plan = _plan(capsys, _write(tmp_path / "param.json", trace))
    (odd,) = (e for e in plan if "reason" in e)
    assert (odd["op"], odd["size_bytes"]) == ("all_gather", 48) and "16-byte" in odd["reason"]
    # Equal splits are an all_to_all in colbench's terms.
    assert _tuples([e for e in plan if "reason" not in e]) == {
        ("all_reduce", 8192, "float32", 4, 2),
        ("all_gather", 512, "float16", 4, 1),
        ("all_to_all", 64, "float32", 4, 1),
    }


FR_DUMP = {
    "version": "2.10",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
    "entries": [
        {"profiling_name": "gloo:all_reduce", "input_sizes": [[16]], "output_sizes": [[16]],
         "input_dtypes": ["Half"], "process_group": ["0", "default_pg"]},
        {"profiling_name": "gloo:all_gather", "input_sizes": [[32]], "output_sizes": [[2, 32]],
         "input_dtypes": ["Float"], "process_group": ["0", "default_pg"], "duration_ms": 0.5},
        {"profiling_name": "gloo:barrier", "input_sizes": [], "output_sizes": [],
         "input_dtypes": [], "process_group": ["0", "default_pg"]},
    ],
}  # fmt: skip


def test_flight_recorder_pickle_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fr_0").write_bytes(pickle.dumps(FR_DUMP))
    plan = _plan(capsys, str(tmp_path / "fr_0"), _write(tmp_path / "fr_1.json", FR_DUMP))
    assert _tuples(plan) == {
        ("all_reduce", 32, "float16", 2, 1),
        ("all_gather", 256, "float32", 2, 1),
        ("barrier", 0, "float32", 2, 1),
    }
    (gathered,) = (e for e in plan if e["op"] == "all_gather")
    assert gathered["recorded_us"] == 500.0


class _Runs:
    """Unpickling this would call os.system: the reader must refuse it unrun."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_with_code_is_refused_unrun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    dump = {**FR_DUMP, "entries": [_Runs(marker)]}
    (tmp_path / "fr_0").write_bytes(pickle.dumps(dump))
    code, _, err = run_main(capsys, "replay", str(tmp_path / "fr_0"), "--dry-run")
    assert code == 2 and not marker.exists()
    assert "posix.system" in err and "plain data" in err


BAD = {
    "cut.json": ('{"traceEvents": [{"ph": "X", "name": "c10d::', "ends early"),
    "other.json": ('{"hello": 1}', "an object with keys hello, not a torch profiler trace"),
    "empty.json": ("[]", "a list (empty)"),
    "noshapes.json": (
        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_",
                                     "ts": 1, "dur": 2, "args": {}}]}),
        "record_shapes=True",
    ),
    "nocomms.json": (json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm"}]}),
                     "1 events, no collective"),
    "rpc.json": (json.dumps({"traceEvents": [{"ph": "X", "name": "record_param_comms",
                                              "args": {"Collective name": "allreduce"}}]}),
                 "call 1 (allreduce): In msg nelems is missing"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_traces_are_refused_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, says = BAD[name]
    (tmp_path / name).write_text(text)
    code, out, err = run_main(capsys, "replay", str(tmp_path / name), "--dry-run")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"colbench: error: trace {tmp_path / name}") and says in line


def _kineto(rank: int, world: int) -> dict[str, Any]:
    return {"distributedInfo": {"rank": rank, "world_size": world},
            "traceEvents": [_rpc("allreduce", 4, 4, "Float", 1)]}  # fmt: skip


def test_traces_of_one_job_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _write(tmp_path / "a.json", _kineto(0, 4)), _write(tmp_path / "b.json", _kineto(0, 4))
    code, _, err = run_main(capsys, "replay", a, b, "--dry-run")
    assert code == 2 and "both rank 0's trace" in err
    c = _write(tmp_path / "c.json", _kineto(1, 8))
    code, _, err = run_main(capsys, "replay", a, c, "--dry-run")
    assert code == 2 and "different jobs" in err
    code, _, err = run_main(capsys, "replay", str(tmp_path), "--dry-run")
    assert code == 2 and "is a directory" in err
    code, _, err = run_main(capsys, "replay", a, "--json")
    assert code == 2 and "--dry-run" in err
