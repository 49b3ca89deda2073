"""A run placed against the published results (colbench/commands/references/place.py): the real
H100 nccl-tests logs in tests/data beside the shipped table, a CPU run beside nothing."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from colbench.commands.health import floors as published
from colbench.commands.references import place
from colbench.commands.references.table import load
from colbench.importers.nccl_tests import import_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests-logs"
REFS = load()
GiB = 1024**3


def _imported(tmp_path: Path, name: str) -> dict:
    run, _ = import_log(LOGS / name, out_dir=tmp_path / "run")
    return json.loads((run / "meta.json").read_text())[place.FIELD]


def test_real_p5_log_stands_beside_the_published_p5_and_h100_runs(tmp_path: Path):
    placement = _imported(tmp_path, "all_reduce__p5-eks-efa-tuner-nccl-info.log")
    assert placement["facts"] | {"device": None} == {
        "device": None, "gpu": "H100", "fabric": None, "gpus_per_node": 8, "nodes": 2,
        "emulated": False,
    }  # fmt: skip
    by_size = {r["size_bytes"]: r for r in placement["rows"]}
    # The log's largest size (16 GiB) and every size a matching reference gives.
    assert 16 * GiB in by_size and 8 * GiB in by_size
    row = by_size[8 * GiB]
    ids = {s["id"] for s in row["sources"]}
    assert ids == {"aws-p5-2node-allreduce-8g", "coreweave-pr92-h100-2node-allreduce-8g"}
    # The log's own 8 GiB row: out-of-place 479.86, in-place 479.71; the run's figure is
    # their median, and the percentage is of the published median.
    assert row["busbw_gbps"] == pytest.approx(479.785, abs=0.01)
    median = statistics.median([479.28, 440.58])
    assert row["pct_of_published"] == pytest.approx(100 * 479.785 / median, abs=0.1)
    text = place.lines(placement)
    assert any(
        line.startswith("all_reduce 8G: 480 GB/s, ") and "of published 2 x 8 x H100" in line
        for line in text
    )
    assert any("coreweave/nccl-tests#92" in line for line in text)


def test_real_a3mega_log_is_placed_and_its_slower_rows_say_so(tmp_path: Path):
    placement = _imported(tmp_path, "all_reduce__a3mega-ztan-h100-2node.log")
    row = next(r for r in placement["rows"] if r["size_bytes"] == 8 * GiB)
    assert row["pct_of_published"] < 80  # 338 GB/s against 441-479
    assert all(s["hardware"].startswith("2 x 8 x H100") for s in row["sources"])


def test_a_cpu_run_has_no_published_result():
    rows = [{"device": "cpu", "op": "all_reduce", "size_bytes": str(GiB), "busbw_gbps": "1.2",
             "world_size": "2", "nnodes": "1", "status": "ok"}]  # fmt: skip
    placement = place.place(rows, {}, REFS)
    assert placement["none"].startswith("no published result for this hardware")
    assert place.lines(placement) == [placement["none"]]


def _rows(device: str, world: int, nodes: int, sizes: dict[int, float], **extra: str):
    return [
        {"device": device, "op": "all_reduce", "size_bytes": str(size), "busbw_gbps": str(bw),
         "world_size": str(world), "nnodes": str(nodes), "status": "ok", **extra}
        for size, bw in sizes.items()
    ]  # fmt: skip


def test_a_single_node_h100_run_meets_the_azure_floor_and_nvls_figures():
    placement = place.place(_rows("NVIDIA H100 80GB HBM3", 8, 1, {16 * GiB: 402.0}), {}, REFS)
    (row,) = placement["rows"]
    floor = {f["id"]: f for f in row["floors"]}["azure-nhc-nd96isr-h100-v5-floor"]
    assert floor == {"id": "azure-nhc-nd96isr-h100-v5-floor", "busbw_gbps": 460.0, "above": False}
    line = place.lines(placement)[0]
    assert "BELOW the 460 GB/s floor" in line
    # No measurement at 16 GiB on one node: those at other large sizes (and the maintainer's
    # peak) stand in, and the line says so. The issue's own example: 402 GB/s is 84% of
    # the published single-node H100 median (478.87 of 466.35, 478.87 and ~480).
    assert row["published_at_other_sizes"] is True
    assert {s["id"] for s in row["sources"] if s["kind"] != "floor"} == {
        "azure-aibench-nd-h100-v5-allreduce-8g",
        "azure-aibench-nd-h100-v5-allreduce-1g",
        "nccl-tests-212-h100-nvls-expectation",
    }
    assert row["pct_of_published"] == pytest.approx(100 * 402 / 478.87, abs=0.1)
    assert "84% of published 8 x H100 NVLink4 NVSwitch (466-480 GB/s, 3 sources)" in line
    assert "published at 1G, 8G, peak" in line


def test_facts_the_run_lacks_or_no_reference_shares_make_the_match_looser():
    # Four nodes of H100: no reference at 4 nodes, the multi-node ones stand in.
    placement = place.place(_rows("NVIDIA H100 80GB HBM3", 32, 4, {8 * GiB: 300.0}), {}, REFS)
    (row,) = placement["rows"]
    assert "none at 4 node(s)" in row["looser"]
    assert all(s["hardware"].startswith("2 x") for s in row["sources"])
    assert "looser match" in place.lines(placement)[0]
    # No node count at all: said as unknown.
    rows = _rows("NVIDIA H100 80GB HBM3", 8, 1, {8 * GiB: 400.0})
    for r in rows:
        r["nnodes"] = ""
    (row,) = place.place(rows, {}, REFS)["rows"]
    assert "nodes" in row["missing"]


def test_emulated_nodes_and_unknown_ops_say_why_nothing_applies():
    rows = _rows("NVIDIA H200", 4, 4, {GiB: 10.0}, ranks_per_gpu="4", fabric="emulated")
    assert "emulated" in place.place(rows, {}, REFS)["none"]
    rows = _rows("NVIDIA H200", 8, 1, {GiB: 10.0})
    for r in rows:
        r["op"] = "gather"
    assert place.lines(place.place(rows, {}, REFS)) == ["gather: no published gather on H200"]


def test_small_runs_name_their_largest_size():
    placement = place.place(_rows("NVIDIA H100 80GB HBM3", 8, 1, {GiB // 8: 100.0}), {}, REFS)
    assert "largest 128M" in place.lines(placement)[0]


def test_health_places_each_nodes_own_checks_and_the_whole_world_apart():
    meta = {"devices": ["NVIDIA H100 80GB HBM3"], "local_world_size": 8, "nnodes": 2,
            "world_size": 16}  # fmt: skip
    findings = [
        {"node": "a", "check": "intra_all_reduce", "size_bytes": 16 * GiB, "busbw_gbps": 470.0},
        {"node": "b", "check": "intra_all_reduce", "size_bytes": 16 * GiB, "busbw_gbps": 450.0},
        {"node": "fleet", "check": "world", "size_bytes": 8 * GiB, "busbw_gbps": 470.0},
        {"node": "a", "check": "pair", "size_bytes": GiB, "busbw_gbps": 40.0},
    ]
    placement = published.place_health(findings, meta)
    (node,) = placement["node"]["rows"]
    assert node["busbw_gbps"] == 460.0  # the median over the nodes
    assert node["floors"][0] == {
        "id": "azure-nhc-nd96isr-h100-v5-floor", "busbw_gbps": 460.0, "above": True
    }  # fmt: skip
    (world,) = placement["world"]["rows"]
    assert placement["world"]["facts"]["nodes"] == 2
    assert {s["id"] for s in world["sources"]} == {
        "aws-p5-2node-allreduce-8g", "coreweave-pr92-h100-2node-allreduce-8g"
    }  # fmt: skip
    text = published.health_lines(placement)
    assert text[0].startswith("each node's own ranks: all_reduce 16G: 460 GB/s")
    assert any(line.startswith("the whole world: all_reduce 8G: 470 GB/s") for line in text)


def test_a_pcie_card_is_not_matched_as_an_nvswitch_system_without_saying_so():
    placement = place.place(_rows("NVIDIA H100 PCIe", 8, 1, {8 * GiB: 100.0}), {}, REFS)
    (row,) = placement["rows"]
    assert placement["facts"]["fabric"] == "PCIe"
    assert any("PCIe cards" in note for note in row["looser"])
    assert "looser match" in place.lines(placement)[0]
