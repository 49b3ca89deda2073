"""colbench replay checks every trace before planning (colbench/commands/replay/schema.py): each
malformed shape is one line naming the trace, the call and the field, exit 2, never a
traceback; and valid traces plan exactly as they did before the check existed (a golden
plan of each, written by the code before it).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_main
from tests.unit.replay_traces import VALID, fr_dump, param_trace, rpc_trace

GOLDEN = Path(__file__).resolve().parent / "data" / "golden" / "replay-plans.json"
UPDATE = os.environ.get("COLBENCH_UPDATE_GOLDEN") == "1"


def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def _rpc(**args: Any) -> bytes:
    return _json(rpc_trace(**args))


def _fr(**entry: Any) -> bytes:
    return _json(fr_dump(**entry))


def _param(**item: Any) -> bytes:
    return _json(param_trace(**item))


def _event(**fields: Any) -> bytes:
    doc = rpc_trace()
    doc["traceEvents"][0].update(fields)
    return _json(doc)


def _info(**info: Any) -> bytes:
    doc = rpc_trace()
    doc["distributedInfo"].update(info)
    return _json(doc)


def _c10d(args: dict[str, Any]) -> bytes:
    event = {"ph": "X", "cat": "cpu_op", "name": "c10d::alltoall_base_", "ts": 1, "dur": 2}
    return _json({"traceEvents": [{**event, "args": args}]})


DIMS = [[8], [8], [], [], [], [], []]
#: name -> (the file's bytes, what the one line must say). Each is one malformed shape.
BAD: dict[str, tuple[bytes, str]] = {
    # Wrong types: the fields replay reads.
    "dtype-number": (_rpc(dtype=5), "call 1 (allreduce): dtype 5 is not a string"),
    "dtype-list": (_rpc(dtype=["Float"]), "dtype ['Float'] is not a string"),
    "args-list": (_event(args=[1, 2]), "call 1 (record_param_comms): args [1, 2] is not an"),
    "count-bool": (_rpc(**{"In msg nelems": True}), "In msg nelems True is not an integer"),
    "count-text": (_rpc(**{"Out msg nelems": "4"}), "Out msg nelems '4' is not an integer"),
    "count-missing": (_rpc(**{"In msg nelems": None}), "In msg nelems is missing"),
    "name-number": (_rpc(**{"Collective name": 7}), "Collective name 7 is not a string"),
    "ts-text": (_event(ts="soon"), "call 1 (allreduce): ts 'soon' is not a number"),
    "splits-text": (_rpc(**{"In split size": "[1, 2"}), "In split size '[1, 2' is not a list"),
    "info-list": (_json({**rpc_trace(), "distributedInfo": [0]}), "distributedInfo [0] is not"),
    "pg-config-text": (_info(pg_config="abc"), "distributedInfo: pg_config 'abc' is not a list"),
    "c10d-dims-text": (_c10d({"Input Dims": "8"}), "Input Dims '8' is not a list"),
    "c10d-dims-deep": (_c10d({"Input Dims": [[[[8]]]]}), "Input Dims [[[...]]] is not a"),
    "c10d-types": (_c10d({"Input Dims": DIMS, "Input type": [1]}), "Input type [1] is not a"),
    "fr-pg-config-list": (_json({**fr_dump(), "pg_config": [1, 2]}), "pg_config [1, 2] is not"),
    "fr-entries-object": (_json({**fr_dump(), "entries": {}}), "entries {} is not a list"),
    "fr-entry-list": (_json({**fr_dump(), "entries": [[1]]}), "call 1 (?): entry [1] is not"),
    "fr-dtypes": (_fr(input_dtypes=[5]), "call 1 (nccl:all_reduce): input_dtypes [5] is not"),
    "fr-group": (_fr(process_group=5), "process_group 5 is not a process group's"),
    "fr-sizes": (_fr(input_sizes=[4]), "input_sizes [4] is not a tensor's dims"),
    "fr-ranks": (_json({**fr_dump(), "pg_config": {"0": {"ranks": 2}}}), "pg_config 0: ranks 2"),
    "param-dtype": (_param(dtype=5), "call 1 (all_reduce): dtype 5 is not a string"),
    "param-comms-list": (_param(comms=["all_reduce"]), "call 1 (?): comms ['all_reduce'] is"),
    "param-entry": (_json(["all_reduce"]), "a list"),
    "param-size-missing": (_param(in_msg_size=None), "in_msg_size or out_msg_size is missing"),
    # Out of range.
    "negative-count": (_rpc(**{"In msg nelems": -4}), "In msg nelems -4 is negative"),
    "group-zero": (_rpc(**{"Group size": 0}), "Group size 0 is not a group size"),
    "group-past-world": (_rpc(**{"Group size": 64}), "group size 64 is larger than the job's"),
    "group-past-ranks": (_rpc(**{"Group size": 2**31}), "is more ranks than colbench runs"),
    "world-zero": (_info(world_size=0), "distributedInfo: world_size 0 is not a group size"),
    "rank-negative": (_info(rank=-1), "distributedInfo: rank -1 is not a rank"),
    "rank-past-world": (_info(rank=5), "distributedInfo: rank 5 is not a rank of its world of 2"),
    "pg-size-zero": (_info(pg_config=[{"pg_size": 0}]), "pg_config 1: pg_size 0 is not a"),
    "count-past-int64": (_rpc(**{"In msg nelems": 2**63}), "than a tensor holds (2^63)"),
    "dims-past-int64": (_fr(input_sizes=[[2**32, 2**32]]), "than a tensor holds (2^63)"),
    "duration-negative": (_fr(duration_ms=-1.5), "duration_ms -1.5 is negative"),
    "duration-infinite": (_fr(duration_ms=float("inf")), "duration_ms inf is not a finite"),
    "dur-nan": (_event(dur=float("nan")), "call 1 (allreduce): dur nan is not a finite"),
    "fr-negative-dim": (_fr(input_sizes=[[-4]]), "input_sizes [[-4]] holds a negative dim"),
    "param-negative": (_param(in_msg_size=-4), "call 1 (all_reduce): in_msg_size -4 is negative"),
    "param-world-zero": (_param(world_size=0), "world_size 0 is not a group size"),
    "param-split": (_param(in_split=[-1, 5]), "in_split [-1, 5] holds one that is negative"),
    "c10d-split": (
        _c10d({"Input Dims": DIMS, "Concrete Inputs": ["", "", "", "[-8]", "[8]"]}),
        "call 1 (c10d::alltoall_base_): Concrete Inputs[3] '[-8]' holds one that is negative",
    ),
    # The file as a whole.
    "int-5000-digits": (b'{"traceEvents": [' + b"9" * 5000 + b"]}", "more than 4300 digits"),
    "nested-100000": (b"[" * 100_000 + b"]" * 100_000, "JSON nested deeper than Python's"),
    "empty": (b"", "an empty file"),
    "white-space": (b" \n\t\n", "only white space (4 bytes)"),
    "not-utf8": (b'[{"comms": "all_reduce\xe9"}]', "not UTF-8 text (byte 22)"),
    "binary": (b"\x00\x01\x02", "binary data"),
    "bad-gzip": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage", "does not decompress"),
    "cut-gzip": (gzip.compress(_rpc())[:30], "a gzip file cut short"),
    "gzip-empty": (gzip.compress(b""), "an empty file"),
    "pickle-keys": (pickle.dumps({1: 2, "entries": 5, "version": "2"}), "entries 5 is not a"),
    "no-collective": (_json([{"compute": "gemm"}]), "a PARAM trace with 1 entries, no"),
    "only-bookkeeping": (_rpc(**{"Collective name": "init"}), "1 events, no collective"),
}  # fmt: skip


def _refused(capsys: pytest.CaptureFixture[str], *paths: Path) -> str:
    code, out, err = run_main(capsys, "replay", *map(str, paths), "--dry-run")
    assert code == 2 and out == "" and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("colbench: error: ")
    return line


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_trace_is_one_line_naming_trace_call_and_field(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, says = BAD[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(data)
    line = _refused(capsys, path)
    assert line.startswith(f"colbench: error: trace {path}") and says in line, line


PATHS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda d: d / "nope.json", "cannot read trace"),
    "directory": (lambda d: d, "is a directory"),
    "loop": (lambda d: _symlink_loop(d / "loop.json"), "Too many levels of symbolic links"),
    "under-a-file": (lambda d: _file(d / "f") / "x.json", "Not a directory"),
}


def _symlink_loop(path: Path) -> Path:
    path.symlink_to(path)
    return path


def _file(path: Path) -> Path:
    path.write_text("{}")
    return path


@pytest.mark.parametrize("name", sorted(PATHS))
def test_a_path_that_is_no_readable_file_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, says = PATHS[name]
    path = make(tmp_path)
    line = _refused(capsys, path)
    assert str(path) in line and says in line, line


def test_a_trace_is_checked_against_the_other_traces_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiled = tmp_path / "rank0.json"
    profiled.write_bytes(_rpc())  # world of 2
    dump = tmp_path / "fr_1"
    dump.write_bytes(_json({**fr_dump(), "pg_config": {"0": {"ranks": "[0, 1, 2, 3]"}}}))
    line = _refused(capsys, profiled, dump)
    assert f"trace {dump}, call 1 (nccl:all_reduce): group size 4 is larger than" in line
    assert f"the job's world of 2 ranks ({profiled} says)" in line


def test_names_and_sizes_that_are_odd_but_well_formed_are_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A world of 2^31 - 1 ranks once listed every missing rank (minutes, gigabytes); a
    # file name's 200 digits were taken for a rank. Neither is a fault of the trace.
    world = tmp_path / "world.json"
    world.write_bytes(_info(world_size=2**31 - 1))
    digits = tmp_path / ("fr_" + "7" * 200)
    digits.write_bytes(_fr())
    huge = tmp_path / "huge.json"  # 2 TiB: past the 1T sweep takes, so listed, not planned
    huge.write_bytes(_param(in_msg_size=2**39, out_msg_size=2**39))
    for path in (world, digits, huge):
        code, out, err = run_main(capsys, "replay", str(path), "--dry-run", "--json")
        assert code == 0, err
    assert json.loads(out)[0]["reason"] == "larger than the 1T colbench measures"


def test_missing_ranks_of_a_large_world_are_counted_not_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uneven = json.loads(dict(VALID["nccl-uneven-all-to-allv"])["rank0.json"])
    uneven["distributedInfo"]["world_size"] = 2**31 - 1
    path = tmp_path / "rank0.json"
    path.write_bytes(_json(uneven))
    line = _refused(capsys, path)
    assert line.endswith("missing rank 1, 2, 3, 4, 5, 6, 7, 8, ... (2147483646 in all)")


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_traces_plan_exactly_as_before(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for file_name, data in VALID[name]:
        (tmp_path / file_name).write_bytes(data)
        paths.append(str(tmp_path / file_name))
    code, out, err = run_main(capsys, "replay", *paths, "--dry-run", "--json")
    assert code == 0, err
    code, text, err = run_main(capsys, "replay", *paths, "--dry-run")
    assert code == 0, err
    plans = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if UPDATE:
        plans[name] = {"json": json.loads(out), "text": text}
        GOLDEN.write_text(json.dumps(plans, indent=1, sort_keys=True) + "\n")
    assert plans[name] == {"json": json.loads(out), "text": text}
