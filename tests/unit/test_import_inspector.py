"""``colbench import inspector``: NCCL Inspector's JSON output -> rows. The data are
examples written from NCCL's source and README (tests/data/nccl-inspector/INDEX.md),
not a real run's output."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from colbench.errors import UsageError
from colbench.importers import import_log
from colbench.importers.inspector import read_dir, rows_of
from colbench.results.rows import load
from tests.conftest import run_main
from tests.datadir import NCCL_INSPECTOR

MiB = 1024**2


def test_a_v2_28_dump_reads_into_one_row_per_op_and_size(tmp_path: Path):
    run, imported = import_log("inspector", str(NCCL_INSPECTOR / "v2.28.9"),
                               out_dir=tmp_path / "run", dtype="float32")  # fmt: skip
    df = load(run)
    assert sorted(zip(df.op, df.size_bytes, strict=True)) == [
        ("all_gather", 16 * MiB),  # 8 MiB per rank x 2 ranks: nccl-tests' size
        ("all_reduce", 4096),
        ("all_reduce", 64 * MiB),
    ]
    big = df[(df.op == "all_reduce") & (df.size_bytes == 64 * MiB)].iloc[0]
    # Each call's time is its ranks' mean; the row's the median over the three calls.
    calls = [(1000 + 1002) / 2, (1010 + 1008) / 2, (990 + 994) / 2]
    assert big.time_us == statistics.median(calls)
    assert (big.iters, big.time_min_us, big.time_max_us) == (3, min(calls), max(calls))
    assert big.busbw_gbps == pytest.approx(64 * MiB / big.time_us / 1e3)  # factor 1 at n=2
    assert (big.world_size, big.group_size, big.nnodes) == (2, 2, 1)
    assert (big["dtype"], big["count"], big["nccl_algo"]) == ("float32", 16 * MiB, "")
    gather = df[df.op == "all_gather"].iloc[0]
    # The call's ranks took 400 and 401 us: busbw from their mean, all_gather's factor 1/2.
    assert gather.busbw_gbps == pytest.approx(16 * MiB / 401 / 1e3 * 0.5, abs=1e-3)
    meta = json.loads((run / "meta.json").read_text())
    (comm,) = meta["communicators"]
    assert comm["id"] == "0x7f8c496ae9f661"
    assert comm["ranks"] == [{"rank": 0, "host": "gpu-a"}, {"rank": 1, "host": "gpu-a"}]
    row = next(r for r in comm["rows"] if r["size_bytes"] == 64 * MiB)
    assert row["rank_time_us"] == {"0": 1000, "1": 1002}
    assert meta["source"]["versions"] == ["v4.0"] and meta["source"]["files"] == 2
    # No GPU model in the Inspector's output, none given: no published result applies.
    assert "no published result" in meta["references"]["none"]
    assert imported.warnings == []


def test_newer_output_names_communicators_and_skips_point_to_point(tmp_path: Path):
    found = read_dir(NCCL_INSPECTOR / "v2.30-dev")
    assert dict(found.skipped) == {"p2p_perf": 4}
    rows, comms = rows_of(found, "r")
    assert {c["name"] for c in comms} == {"tp0", "tp1"}
    ar = sorted((r for r in rows if r.op == "all_reduce"), key=lambda r: r.repeat)
    # Two communicators of the same size, op and size: one row's repeats 0 and 1.
    assert [r.repeat for r in ar] == [0, 1] and all(r.size_bytes == 256 * MiB for r in ar)
    # tp0's calls: (5110 + 5130) / 2 and (5120 + 5140) / 2; tp1's: 5305 and 5315.
    assert {r.time_us for r in ar} == {statistics.median([5120, 5130]),
                                      statistics.median([5305, 5315])}  # fmt: skip
    rs = [r for r in rows if r.op == "reduce_scatter"]
    assert [r.size_bytes for r in rs] == [64 * MiB, 64 * MiB]  # 32 MiB per rank x 2
    assert all(r.dtype == "unknown" and r.count == 0 for r in rows)


def test_the_readme_examples_read_and_match_the_inspectors_own_bandwidths():
    found = read_dir(NCCL_INSPECTOR / "readme-v2.28.9")
    rows, _ = rows_of(found, "r", device="NVIDIA H100 80GB HBM3")
    by_op = {r.op: r for r in rows}
    assert by_op["all_reduce"].busbw_gbps == pytest.approx(485.119099, abs=1e-5)
    assert by_op["reduce_scatter"].algbw_gbps == pytest.approx(418.439467, abs=1e-5)
    assert by_op["reduce_scatter"].size_bytes == 16 * 1024**3


def test_with_a_device_the_jobs_rows_are_placed_against_the_references(tmp_path: Path):
    _, imported = import_log(
        "inspector",
        str(NCCL_INSPECTOR / "readme-v2.28.9"),
        out_dir=tmp_path / "run",
        device="NVIDIA H100 80GB HBM3",
    )
    placement = imported.facts["references"]
    assert placement["facts"]["gpu"] == "H100" and placement["facts"]["gpus_per_node"] == 8
    row = next(r for r in placement["rows"] if r["op"] == "all_reduce")
    assert row["size_bytes"] == 16 * 1024**3
    assert "azure-nhc-nd96isr-h100-v5-floor" in {s["id"] for s in row["sources"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('# HELP nccl_bus_bandwidth_gbs x\nnccl_bus_bandwidth_gbs{a="b"} 1\n', "Prometheus"),
        ("not json at all\n", "not JSON"),
        (
            '{"header": {"id": "0x1"}, "metadata": {}, "coll_perf": {"coll": "AllReduce"}}\n',
            "no 'rank'",
        ),
        ('{"metadata": {}}\n', "no 'header'"),
    ],
)
def test_what_is_not_inspector_json_is_one_line(tmp_path: Path, text: str, message: str):
    (tmp_path / "h-pid1.log").write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        read_dir(tmp_path)
    assert "\n" not in str(info.value)


def test_the_cli_refuses_options_of_the_other_format(capsys, tmp_path: Path):
    code, _, err = run_main(capsys, "import", "inspector", str(NCCL_INSPECTOR / "v2.28.9"),
                            "--world-size", "4", "--out", str(tmp_path / "x"))  # fmt: skip
    assert code == 2 and "does not apply to Inspector output" in err
    code, _, err = run_main(capsys, "import", "inspector", str(tmp_path / "nowhere"))
    assert code == 2 and "no such file or directory" in err
    code, _, err = run_main(capsys, "import", "inspector", str(NCCL_INSPECTOR / "v2.28.9"),
                            "--out", str(tmp_path / "ok"), "--dtype", "bfloat16")  # fmt: skip
    assert code == 0 and "imported 3 rows" in err
