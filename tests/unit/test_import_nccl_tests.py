"""colbench import nccl-tests: hand-made logs in both layouts, and the real logs in tests/data."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from colbench.cli import main
from colbench.errors import UsageError
from colbench.importers.nccl_tests import import_log, parse_log
from colbench.nccl.lines import strip_prefixes as strip_prefix
from colbench.results.rows import COLUMNS, load
from tests.datadir import NCCL_TESTS_LOGS
from tests.unit import nccl_logs


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def test_new_layout_round_trips(tmp_path: Path) -> None:
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(nccl_logs.new_all_reduce_log())
    run_dir, imported = import_log(log, out_dir=tmp_path / "ar", variant="NCCL_ALGO=Tree")
    assert imported.warnings == [] and imported.notes == []
    frame = load(run_dir)
    assert list(frame.columns) == list(COLUMNS)
    # Six table lines, two placements each.
    assert len(frame) == 12
    assert sorted(set(frame["in_place"])) == [0, 1]
    assert set(frame["op"]) == {"all_reduce"} and set(frame["dtype"]) == {"float32"}
    assert set(frame["redop"]) == {"sum"} and set(frame["root"]) == {-1}
    assert set(frame["world_size"]) == {4} and set(frame["nnodes"]) == {2}
    assert set(frame["variant"]) == {"NCCL_ALGO=Tree"} and set(frame["backend"]) == {"nccl"}
    assert set(frame["device"]) == {"NVIDIA H100 80GB HBM3"}
    assert (frame["wrong"] == 0).all()
    assert set(frame["warmup"]) == {5} and set(frame["iters"]) == {20}
    out_of_place = frame[frame["in_place"] == 0].sort_values("size_bytes")
    sizes = [1 << e for e in range(10, 21, 2)]
    assert out_of_place["size_bytes"].tolist() == sizes
    assert out_of_place["requested_bytes"].tolist() == sizes
    for row in out_of_place.itertuples():
        printed = float(nccl_logs.time_text(nccl_logs.model_time_us(row.size_bytes)))
        assert row.time_us == pytest.approx(printed)
        # The CSV keeps six significant digits.
        assert row.algbw_gbps == pytest.approx(row.size_bytes / printed / 1e3, rel=1e-5)
        assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 1.5, rel=1e-5)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "imported" and meta["backend"] == "nccl"
    assert meta["world_size"] == 4 and meta["hosts"] == ["node-a", "node-b"]
    assert meta["source"]["file"] == str(log.resolve())


def test_old_layout_round_trips_and_maps_error_to_wrong(tmp_path: Path) -> None:
    log = tmp_path / "ag.log"
    log.write_text(nccl_logs.old_all_gather_log())
    run_dir, imported = import_log(log, out_dir=tmp_path / "ag")
    frame = load(run_dir).sort_values(["size_bytes", "in_place"])
    assert len(frame) == 8
    assert set(frame["op"]) == {"all_gather"} and set(frame["redop"]) == {"none"}
    assert set(frame["world_size"]) == {3} and set(frame["nnodes"]) == {1}
    assert frame["count"].tolist() == [4, 4, 128, 128, 4096, 4096, 131072, 131072]
    # error 1e+00 is beyond nccl-tests' float tolerance: at least one wrong element.
    assert frame["wrong"].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    assert len(imported.warnings) == 1
    assert "2 value(s) exceed" in imported.warnings[0]
    assert "reports 2 out of bounds" in imported.warnings[0]
    expected = [r["busbw_gbps"] for r in imported.rows]
    assert frame.sort_index()["busbw_gbps"].tolist() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    "prefix", ["[1,{i}]<stdout>:", "0: ", "12: "], ids=["mpirun-tag-output", "srun", "srun-12"]
)
def test_launcher_prefixes_are_stripped(prefix: str) -> None:
    plain = parse_log(nccl_logs.new_all_reduce_log(), source="plain.log")
    tagged = parse_log(nccl_logs.new_all_reduce_log(prefix=prefix), source="tagged.log")
    assert tagged.rows == plain.rows
    assert tagged.warnings == []


def test_strip_prefix_leaves_data_rows_alone() -> None:
    row = "        1024           256     float     sum      -1    20.09    0.05    0.08      0"
    assert strip_prefix(row) == row
    assert strip_prefix("[1,15]<stdout>:" + row) == row
    assert strip_prefix("3: " + row) == row


def test_wrong_busbw_in_the_log_is_warned_once_for_that_row() -> None:
    text = nccl_logs.new_all_reduce_log()
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.lstrip().startswith("262144"))
    cells = lines[index].split()
    cells[7] = f"{float(cells[7]) * 1.2:.2f}"  # out-of-place busbw 20% too high
    lines[index] = "  ".join(cells)
    imported = parse_log("\n".join(lines), source="edited.log")
    assert len(imported.warnings) == 1
    warning = imported.warnings[0]
    assert f"line {index + 1} (out-of-place): busbw {cells[7]} GB/s" in warning
    # The row keeps colbench's own value, not the log's.
    row = next(r for r in imported.rows if r["size_bytes"] == 262144 and r["in_place"] == 0)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.5)


def test_not_applicable_wrong_becomes_empty() -> None:
    text = nccl_logs.new_all_reduce_log().replace("      0\n", "    N/A\n")
    imported = parse_log(text, source="na.log")
    assert {r["wrong"] for r in imported.rows if r["in_place"] == 1} == {None}
    assert {r["wrong"] for r in imported.rows if r["in_place"] == 0} == {0}


def _without_rank_lines(text: str) -> str:
    # NCCL's "nranks N" line says the world size too; without both it is unknown.
    kept = (line for line in text.splitlines() if "Rank " not in line and "nranks" not in line)
    return "\n".join(kept) + "\n"


def test_world_size_is_asked_for_when_no_rank_lines() -> None:
    text = _without_rank_lines(nccl_logs.new_all_reduce_log())
    with pytest.raises(UsageError, match="give --world-size N") as info:
        parse_log(text, source="bare.log")
    assert "fit all_reduce at 4 ranks only" in str(info.value)
    rows = parse_log(text, source="bare.log", world_size=4).rows
    assert {r["world_size"] for r in rows} == {4} and {r["nnodes"] for r in rows} == {None}


def test_world_size_contradicting_the_rank_lines_is_refused() -> None:
    with pytest.raises(UsageError, match=r"lists 4 ranks .* --world-size is 8"):
        parse_log(nccl_logs.new_all_reduce_log(), source="ar.log", world_size=8)


def test_op_comes_from_the_numbers_or_the_file_name() -> None:
    text = nccl_logs.new_all_reduce_log()
    assert "_perf" not in text
    imported = parse_log(text, source="mystery.log")
    assert imported.facts["tables"][0]["op_from"] == "its sizes, counts and bandwidth ratio"
    assert {r["op"] for r in imported.rows} == {"all_reduce"}
    # At two ranks all_reduce's busbw factor is 1, like sendrecv's: the numbers cannot
    # tell them apart, so the file name decides, or the user must.
    two = nccl_logs.new_all_reduce_log(world_size=2)
    by_name = parse_log(two, source="allreduce-run3.log")
    assert by_name.facts["tables"][0]["op_from"] == "the file name"
    assert {r["op"] for r in by_name.rows} == {"all_reduce"}
    with pytest.raises(UsageError, match="give --op"):
        parse_log(two, source="x.log")
    assert {r["op"] for r in parse_log(two, source="x.log", op="sendrecv").rows} == {"sendrecv"}


def test_cli_import_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    code, _, err = run_cli(
        ["import", "nccl-tests", str(empty), "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and err.count("\n") == 1 and "no nccl-tests result table" in err
    assert not (tmp_path / "o").exists()
    code, _, err = run_cli(["import", "mpi-bench", str(empty)], capsys)
    assert code == 2 and "unknown import format" in err
    log = tmp_path / "ar.log"
    log.write_text(nccl_logs.new_all_reduce_log())
    code, _, err = run_cli(["import", "nccl-tests", str(log), "--variant", "Tree"], capsys)
    assert code == 2 and "bad --variant" in err


def test_cli_import_reads_a_piped_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = nccl_logs.new_all_reduce_log()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, _, err = run_cli(["import", "nccl-tests", "-", "--results-dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert "imported 12 rows (all_reduce at 4 ranks)" in err
    meta = json.loads((tmp_path / "imported-stdin" / "meta.json").read_text())
    assert meta["source"]["file"] == "-"
    assert meta["source"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    # Nothing piped in (a terminal): one line, not a wait for ever.
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = run_cli(["import", "nccl-tests", "-", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.count("\n") == 1 and "nothing is piped in" in err


def test_cli_import_then_reimport_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "ar.log"
    log.write_text(nccl_logs.new_all_reduce_log())
    out = tmp_path / "imported"
    code, _, err = run_cli(["import", "nccl-tests", str(log), "--out", str(out)], capsys)
    assert code == 0, err
    assert "imported 12 rows (all_reduce at 4 ranks)" in err
    code, _, err = run_cli(["import", "nccl-tests", str(log), "--out", str(out)], capsys)
    assert code == 2 and "already exists" in err
    # Without --out, a second import steps aside instead of overwriting.
    for _ in range(2):
        code, _, err = run_cli(
            ["import", "nccl-tests", str(log), "--results-dir", str(tmp_path / "res")], capsys
        )
        assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == ["imported-ar", "imported-ar-2"]


@pytest.mark.parametrize(
    ("hosts", "bus", "shared"),
    [
        (("vm",), lambda rank: "0000:1b:00", 4),  # 4 ranks, one GPU: emulated
        (("vm",), lambda rank: f"0000:{rank + 0x1B:02x}:00", 1),  # 4 GPUs of one node
        (("vm",), lambda rank: "0x1b", 1),  # the bus alone cannot tell (PCI domains)
        (("a", "b"), lambda rank: "0000:1b:00", 2),  # 2 ranks on each node's one GPU
    ],
    ids=["one-gpu", "four-gpus", "bus-only", "two-nodes"],
)
def test_ranks_sharing_a_gpu_are_an_emulated_fabric(
    hosts: tuple[str, ...], bus: Any, shared: int
) -> None:
    text = nccl_logs.new_all_reduce_log(world_size=4, hosts=hosts, bus=bus)
    imported = parse_log(text, source="ar.log")
    assert {r["ranks_per_gpu"] for r in imported.rows} == {shared}
    assert {r["fabric"] for r in imported.rows} == {"emulated" if shared > 1 else "real"}
    assert any("share one GPU" in n for n in imported.notes) == (shared > 1)
    assert imported.facts["tables"][0]["ranks_per_gpu"] == shared


# -- the real logs in tests/data/nccl-tests-logs (third-party data, sources in its INDEX.md) --

#: World sizes from INDEX.md; of the two logs without Rank lines, one says nothing else.
REAL_WORLD_SIZES = {
    "all_gather__dgx2-wohlbier-old.log": 12,
    "all_reduce__a3mega-ztan-h100-2node.log": 16,
    "all_reduce__alps-gh200-srun-label-2node.log": 8,
    "all_reduce__azureml-nd40rs-v100-old-nccl-info.log": 16,
    "all_reduce__dgx2-wohlbier-old.log": 12,
    "all_reduce__p5-eks-efa-tuner-nccl-info.log": 16,
    "alltoall__rccl-mi355x-2node-alibaba.log": 16,
    "alltoall__xxrjun-cluster01-h100-10node.log": 10,
    "broadcast__dgx2-wohlbier-old.log": 12,
    "broadcast__nccl-ebpf-rtx5090-socket.log": 2,
    "reduce__dgx2-wohlbier-old.log": 12,
    "reduce_scatter__dgx2-wohlbier-old.log": 12,
    "reduce_scatter__xxrjun-cluster01-h100-10node-80rank.log": 80,
    "sendrecv__liplus-a100-8gpu-trimmed.log": 8,
    "sendrecv__xxrjun-cluster01-h100-10node.log": 10,
}
NO_RANK_LINES = {
    "all_reduce__azureml-nd40rs-v100-old-nccl-info.log",
    "sendrecv__liplus-a100-8gpu-trimmed.log",
}
#: An independent, deliberately simple notion of "a table row": optional launcher
#: prefix, then size and count integers, a type word, and numbers after.
_TABLE_ROW = re.compile(r"^(?:\[\d+,\d+\]<stdout>:|\d+: )?\s+\d+\s+\d+\s+[a-z]\w*\s+[-\w.]+\s")


def test_index_lists_every_real_log() -> None:
    assert sorted(p.name for p in NCCL_TESTS_LOGS.glob("*.log")) == sorted(REAL_WORLD_SIZES)


@pytest.mark.parametrize("name", sorted(REAL_WORLD_SIZES))
def test_real_log_imports_every_row_without_false_warnings(name: str) -> None:
    text = (NCCL_TESTS_LOGS / name).read_text()
    given = REAL_WORLD_SIZES[name] if name in NO_RANK_LINES else None
    if name == "all_reduce__azureml-nd40rs-v100-old-nccl-info.log":
        with pytest.raises(UsageError, match="--world-size"):
            parse_log(text, source=name)
    imported = parse_log(text, source=name, world_size=given)
    table_lines = [line for line in text.splitlines() if _TABLE_ROW.match(line)]
    assert table_lines, name
    in_place_na = sum(1 for line in table_lines if line.split()[-4] == "N/A")
    assert len(imported.rows) == 2 * len(table_lines) - in_place_na
    assert {r["world_size"] for r in imported.rows} == {REAL_WORLD_SIZES[name]}
    assert {r["op"] for r in imported.rows} == {_op_of(name)}
    if name == "all_gather__dgx2-wohlbier-old.log":
        # The log itself says "Out of bounds values : 4 FAILED": that is a true warning.
        assert len(imported.warnings) == 1 and "reports 4 out of bounds" in imported.warnings[0]
        assert sum(int(r["wrong"] or 0) for r in imported.rows) == 4
    else:
        assert imported.warnings == []
    for row in imported.rows:
        factor = row["busbw_gbps"] / row["algbw_gbps"] if row["algbw_gbps"] else None
        if factor is not None:
            from colbench.bench import ops

            assert factor == pytest.approx(ops.get(row["op"]).busbw_factor(row["world_size"]))


#: Logs whose ranks shared a GPU (INDEX.md: "both ranks on the same device 0", separate
#: NCCL_HOSTID per rank). GH200 nodes print every GPU's bus as 0x01 (PCI domains differ):
#: the Alps log must stay a real fabric.
SHARED_GPU = {"broadcast__nccl-ebpf-rtx5090-socket.log": 2}


@pytest.mark.parametrize("name", sorted(set(REAL_WORLD_SIZES) - NO_RANK_LINES))
def test_ranks_sharing_a_gpu_import_as_an_emulated_fabric(name: str) -> None:
    imported = parse_log((NCCL_TESTS_LOGS / name).read_text(), source=name)
    shared = SHARED_GPU.get(name, 1)
    assert {r["ranks_per_gpu"] for r in imported.rows} == {shared}
    assert {r["fabric"] for r in imported.rows} == {"emulated" if shared > 1 else "real"}


def _op_of(name: str) -> str:
    from colbench.bench import ops

    return ops.get(name.split("__")[0]).name


def test_real_80_rank_log_round_trips_through_files(tmp_path: Path) -> None:
    name = "reduce_scatter__xxrjun-cluster01-h100-10node-80rank.log"
    run_dir, imported = import_log(NCCL_TESTS_LOGS / name, out_dir=tmp_path / "rs80")
    frame = load(run_dir)
    assert len(frame) == len(imported.rows) == 20
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["world_size"] == 80 and meta["nnodes"] == 10
    assert meta["versions"]["nccl-tests"] == "2.17.8"
    # The header asked for 32M..16G (maxBytes reduced): requested sizes are reconstructed.
    assert frame["requested_bytes"].min() == 33554432
    assert (frame["size_bytes"] <= frame["requested_bytes"]).all()
