"""Trace files for colbench replay's unit tests, in each format it reads, made by hand in
the shapes torch 2.13 writes (tests/unit/test_replay_traces.py says where each format
comes from; the gloo profiler events copy tests/replay_job.py's real trace).

``VALID``: name -> the files of one job (file name, bytes), each a trace replay plans;
``rpc_trace``, ``fr_dump`` and ``param_trace``: one call's trace, its fields overridden
(None drops a field: JSON null is an absent field), for the malformed cases.
"""

from __future__ import annotations

import gzip
import json
import pickle
from typing import Any


def rpc_event(
    name: str, nin: int, nout: int, dtype: str, seq: int, /, **args: Any
) -> dict[str, Any]:
    """NCCL's record_param_comms event of one call, in a group of 4 (torch's keys)."""
    given = {
        "Collective name": name, "dtype": dtype, "In msg nelems": nin, "Out msg nelems": nout,
        "Group size": 4, "In split size": "[]", "Out split size": "[]",
        "Process Group Name": "0", "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1, 2, 3]", "Rank": 0, "Seq": seq, **args,
    }  # fmt: skip
    return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": seq, "dur": 3,
            "args": given}  # fmt: skip


def kernel(seq: int, dur: float) -> dict[str, Any]:
    args = {"Collective name": "allreduce", "Process Group Name": "0", "Seq": seq}
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    return {"ph": "X", "cat": "kernel", "name": name, "ts": seq + 0.5, "dur": dur, "args": args}


def rpc_trace(**args: Any) -> dict[str, Any]:
    """Rank 0 of a 2-rank NCCL job making one all_reduce of 4 float32."""
    event = rpc_event("allreduce", 4, 4, "Float", 1, **{"Group size": 2, **args})
    info = {"backend": "nccl", "rank": 0, "world_size": 2}
    return {"distributedInfo": info, "traceEvents": [event]}


def fr_dump(**entry: Any) -> dict[str, Any]:
    """A flight-recorder dump of one all_reduce of 4 float32 on a group of 2."""
    one = {
        "profiling_name": "nccl:all_reduce", "input_sizes": [[4]], "output_sizes": [[4]],
        "input_dtypes": ["Float"], "process_group": ["0", "default_pg"], **entry,
    }  # fmt: skip
    pg_config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    return {"version": "2.10", "pg_config": pg_config, "entries": [one]}


def param_trace(**item: Any) -> list[dict[str, Any]]:
    """PARAM's basic trace of one all_reduce of 4 float elements on 2 ranks."""
    one = {"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "float",
           "world_size": 2, **item}  # fmt: skip
    return [one]


CUT_SPLITS = "[" + ", ".join(["1"] * 30) + ", ...]"
NCCL = {
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4},
    "traceEvents": [
        rpc_event("allreduce", 1024, 1024, "Float", 1), kernel(1, 40.0),
        rpc_event("allreduce", 1024, 1024, "Float", 2), kernel(2, 60.0),
        rpc_event("_allgather_base", 256, 1024, "BFloat16", 3),
        rpc_event("_reduce_scatter_base", 4096, 1024, "Float", 4),
        rpc_event("allreduce_coalesced", 10, 10, "Float", 5),
        rpc_event("all_to_allv", 40, 40, "Float", 6, **{"In split size": CUT_SPLITS}),
        rpc_event("all_to_allv", 16, 16, "Float", 7, **{"In split size": "[4, 4, 4, 4]"}),
        rpc_event("send", 8, 8, "Int", 8), rpc_event("wait", 0, 0, "Float", 9),
        {"ph": "X", "name": "ProfilerStep#7", "ts": 0, "dur": 9},
        {"ph": "X", "name": "ProfilerStep#8", "ts": 9, "dur": 9},
        {"ph": "X", "name": "aten::mm", "ts": 3, "dur": 1, "args": [1, "anything"]},
    ],
}  # fmt: skip


def _uneven(rank: int) -> bytes:
    sent = ([4, 12], [8, 20])[rank]
    got = [(4, 8), (12, 20)][rank]
    splits = {"In split size": str(sent), "Out split size": str(list(got)), "Group size": 2}
    events = [rpc_event("all_to_allv", sum(sent), sum(got), "Float", 1, **splits),
              rpc_event("allreduce", 64, 64, "Half", 2, **{"Group size": 2})]  # fmt: skip
    info = {"backend": "nccl", "rank": rank, "world_size": 2}
    return json.dumps({"distributedInfo": info, "traceEvents": events}).encode()


def _c10d(name: str, ts: float, dims: list[Any], types: list[str], concrete: list[str]) -> Any:
    args = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 20.0, "args": args}


def _gloo(name: str, ts: float, dur: float, dims: list[Any] | None = None, type_: str = "") -> Any:
    args = {"Input Dims": dims, "Input type": [type_]} if dims is not None else {}
    return {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur, "args": args}


def _gloo_rank(rank: int) -> bytes:
    """A gloo job's rank as its profiler writes it: c10d:: calls, gloo: work events."""
    sent, got = ([4, 12], [8, 20])[rank], ([4, 8], [12, 20])[rank]
    a2a_uneven = ["", "", "", str(got), str(sent), "False", "-1"]
    events = [
        _c10d("c10d::allreduce_", 10, [[[1024]], [], [], [], [], []],
              ["TensorList", "", "", "", "Scalar", "Scalar"], ["", "", "", "", "False", "-1"]),
        _gloo("gloo:all_reduce", 11, 900.5, [[1024]], "float"),
        _c10d("c10d::_allgather_base_", 20, [[1024], [512], [], [], []],
              ["float", "float", "", "Scalar", "Scalar"], ["", "", "", "False", "-1"]),
        _gloo("gloo:all_gather", 21, 300.0, [[512]], "float"),
        _c10d("c10d::allgather_", 30, [[], [[128]], [], [], []],
              ["", "TensorList", "", "Scalar", "Scalar"], ["", "", "", "False", "-1"]),
        _gloo("gloo:all_gather", 31, 250.0, [[128]], "double"),
        _c10d("c10d::_reduce_scatter_base_", 40, [[1024], [2048], [], [], [], []],
              ["float", "float", "", "", "Scalar", "Scalar"], ["", "", "", "", "False", "-1"]),
        _gloo("gloo:all_reduce", 41, 700.0, [[2048]], "float"),
        _c10d("c10d::alltoall_base_", 50, [[32], [16 + 16 * rank], [], [], [], [], []],
              ["float", "float", "", "ScalarList", "ScalarList", "Scalar", "Scalar"], a2a_uneven),
        _gloo("gloo:all_to_all", 51, 120.0, [[16 + 16 * rank]], "float"),
        _c10d("c10d::barrier", 60, [[1], [], [], [], []],
              ["unsigned char", "", "ScalarList", "Scalar", "Scalar"],
              ["", "", "[]", "False", "-1"]),
        _gloo("gloo:barrier", 61, 80.0),
        _c10d("c10d::send", 70, [[[16]], [], [], []], ["TensorList", "", "Scalar", "Scalar"],
              ["", "", "1", "0"]),
        _gloo("gloo:send", 71, 118.0, [[16]], "int"),
        {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 100},
    ]  # fmt: skip
    pg = {"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}
    info = {"backend": "gloo", "rank": rank, "world_size": 2, "pg_count": 1, "pg_config": [pg]}
    return json.dumps({"distributedInfo": info, "traceEvents": events}).encode()


FR_DUMP = {
    "version": "2.10",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
    "entries": [
        {"profiling_name": "gloo:all_reduce", "input_sizes": [[16]], "output_sizes": [[16]],
         "input_dtypes": ["Half"], "process_group": ["0", "default_pg"], "duration_ms": None},
        {"profiling_name": "gloo:all_gather", "input_sizes": [[32]], "output_sizes": [[2, 32]],
         "input_dtypes": ["Float"], "process_group": ["0", "default_pg"], "duration_ms": 0.5},
        {"profiling_name": "gloo:barrier", "input_sizes": [], "output_sizes": [],
         "input_dtypes": [], "process_group": ["0", "default_pg"]},
        {"profiling_name": "gloo:reduce_scatter", "input_sizes": [[3]], "output_sizes": [[1]],
         "input_dtypes": ["Float"], "process_group": ["0", "default_pg"]},
    ],
}  # fmt: skip
PARAM = [
    {"comms": "init", "pg_id": 0, "global_ranks": [0, 1, 2, 3], "world_size": 4},
    {"comms": "all_reduce", "in_msg_size": 2048, "out_msg_size": 2048, "dtype": "float",
     "world_size": 4},
    {"comms": "all_gather_base", "in_msg_size": 64, "out_msg_size": 256, "dtype": "half",
     "world_size": 4},
    {"comms": "all_to_allv", "in_msg_size": 16, "out_msg_size": 16, "dtype": "float",
     "world_size": 4, "in_split": [4, 4, 4, 4], "out_split": [4, 4, 4, 4]},
    {"compute": "gemm", "mm_dim": 64, "dtype": "float"},
    {"comms": "all_gather", "in_msg_size": 3, "out_msg_size": 12, "dtype": "float",
     "world_size": 4},
    {"comms": "broadcast", "in_msg_size": 5, "out_msg_size": 5, "dtype": "complex64",
     "world_size": 4},
    {"comms": "frobnicate", "in_msg_size": 5, "out_msg_size": 5, "dtype": "float"},
    {"comms": "barrier", "world_size": 4},
]  # fmt: skip


def _as_pickled(dump: dict[str, Any]) -> dict[str, Any]:
    """The dump as torch 2.13's _dump_fr_trace pickles it (checked here on a gloo job):
    process_group a tuple, and fields replay does not read beside the ones it does."""
    frames = [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 3245}]
    entries = [
        {**e, "process_group": tuple(e["process_group"]), "state": "completed", "frames": frames}
        for e in dump["entries"]
    ]
    return {**dump, "comm_lib_version": "", "pg_status": {}, "entries": entries}


VALID: dict[str, list[tuple[str, bytes]]] = {
    "nccl-record-param-comms": [("rank0.json", json.dumps(NCCL).encode())],
    "nccl-gzip": [("rank0.json.gz", gzip.compress(json.dumps(NCCL).encode()))],
    "nccl-uneven-all-to-allv": [("rank0.json", _uneven(0)), ("rank1.json", _uneven(1))],
    "gloo-profiler": [("rank0.json", _gloo_rank(0)), ("rank1.json", _gloo_rank(1))],
    "flight-recorder": [
        ("fr_0", pickle.dumps(_as_pickled(FR_DUMP))),
        ("fr_1.json", json.dumps(FR_DUMP).encode()),
    ],
    "param-basic": [("param.json", json.dumps(PARAM).encode())],
}
