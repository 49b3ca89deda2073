"""colbench import nccl-tests FILE.json: nccl-tests' JSON report, every value as written.

The real report (tests/data/nccl-tests-json/, 2 x T4, -I 1) is the reference; the rows
are read back from the imported run directory, so the CSV's own round trip is checked too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from colbench.importers import nccl_tests
from colbench.results import load
from colbench.results.reporters import nccl_tests_json as writer
from colbench.results.rows import Row
from tests.conftest import run_main
from tests.unit.rows import row

T4 = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "nccl-tests-json"
    / ("allreduce-t4-2gpu-nccl2.29.3-per-iter.json")
)
PLACEMENTS = (("out_of_place", 0), ("in_place", 1))


def t4() -> dict[str, Any]:
    return json.loads(T4.read_text())


def imported(capsys: pytest.CaptureFixture[str], source: Path, out: Path, *more: str) -> Any:
    code, _, err = run_main(capsys, "import", "nccl-tests", str(source), "--out", str(out), *more)
    assert code == 0, err
    return load(out)


def test_real_report_imports_every_value_exactly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    frame = imported(capsys, T4, tmp_path / "t4")
    report = t4()
    entry = report["results"][0]
    assert len(frame) == 100
    for name, in_place in PLACEMENTS:
        mine = frame[frame["in_place"] == in_place].sort_values("repeat")
        times = entry[f"{name}_per_iter"]["times_us"]
        # Each iteration is a sample: its time exactly as the report wrote it.
        assert list(mine["time_us"]) == times
        assert list(mine["repeat"]) == list(range(50))
        # 2 ranks: all_reduce's busbw factor 2(n-1)/n is 1, so busbw = algbw = size / time.
        assert list(mine["busbw_gbps"]) == [entry["size"] / t / 1e3 for t in times]
        assert set(mine["wrong"]) == {int(entry[name]["nwrong"])}
    first = frame.iloc[0]
    assert (first["op"], first["dtype"], first["redop"], first["root"]) == (
        "all_reduce",
        "float16",
        "sum",
        -1,
    )
    assert (first["size_bytes"], first["count"], first["world_size"]) == (134217728, 67108864, 2)
    assert (first["warmup"], first["iters"], first["backend"], first["device"]) == (
        10,
        1,
        "nccl",
        "Tesla T4",
    )
    meta = json.loads((tmp_path / "t4" / "meta.json").read_text())
    kept = meta["nccl_tests"]
    # The summaries, as written: time, alg_bw, bus_bw, nwrong and each per-iteration block.
    for name, _ in PLACEMENTS:
        assert kept["results"][0][name] == entry[name]
        block = {k: v for k, v in entry[f"{name}_per_iter"].items() if k != "times_us"}
        assert kept["results"][0][f"{name}_per_iter"] == block
    for key in ("version", "start_time", "end_time", "args", "nccl_version", "config"):
        assert kept[key] == report[key], key
    for key in ("out_of_bounds", "average_bus_bandwidth", "errors"):
        assert kept[key] == report[key], key
    assert meta["versions"] == {"nccl": "2.29.3"}
    assert (tmp_path / "t4" / "nccl-tests.json").read_bytes() == T4.read_bytes()


def test_report_without_per_iteration_blocks_keeps_its_figures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = t4()
    entry = report["results"][0]
    for name, _ in PLACEMENTS:
        del entry[f"{name}_per_iter"]
    source = tmp_path / "summary.json"
    source.write_text(json.dumps(report))
    frame = imported(capsys, source, tmp_path / "run")
    assert len(frame) == 2
    for name, in_place in PLACEMENTS:
        mine = frame[frame["in_place"] == in_place].iloc[0]
        body = entry[name]
        assert (mine["time_us"], mine["algbw_gbps"], mine["busbw_gbps"]) == (
            body["time"],
            body["alg_bw"],
            body["bus_bw"],
        )
        assert (mine["iters"], mine["average"]) == (50, "avg")


def test_gate_judges_the_iterations_as_samples(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = t4()
    for name, _ in PLACEMENTS:
        block = report["results"][0][f"{name}_per_iter"]
        block["times_us"] = [t * 1.3 for t in block["times_us"]]
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(report))
    imported(capsys, T4, tmp_path / "base")
    imported(capsys, T4, tmp_path / "same")
    imported(capsys, slow, tmp_path / "slow")
    check = ("--check", "busbw_gbps:-10%")
    code, out, _ = run_main(capsys, "gate", str(tmp_path / "base"), str(tmp_path / "same"), *check)
    assert code == 0, out
    code, out, _ = run_main(capsys, "gate", str(tmp_path / "base"), str(tmp_path / "slow"), *check)
    assert code == 1
    assert "50/50" in out


def test_colbench_report_round_trips(tmp_path: Path) -> None:
    """What sweep -J writes reads back: op from colbench's command line, the world from
    one device per rank, each rank's slowest time per iteration as the sample."""
    hdr = writer.Header(
        args=("colbench", "sweep", "--op", "all_gather", "-I", "1"),
        env=(),
        nccl_version=0,
        sizes_bytes=(4096,),
        warmup_iters=2,
        iterations=3,
        validation=1,
        graph=0,
        per_iter_timing=True,
        devices=[writer.Device(r, 0, 10 + r, "vm", -1, "", "cpu") for r in range(4)],
    )
    rows = [Row(**row("all_gather", 4096, 30.0, world_size=4, in_place=p)) for p in (0, 1)]
    ranks = {
        p: ((10.0, 20.0, 30.0), (12.0, 18.0, 33.5), (1.0, 2.0, 3.0), (9.0, 9.0, 9.0))
        for p in (0, 1)
    }
    text = hdr.json("2026-01-01 00:00:00") + writer.record(rows, ranks)
    text += writer.footer(0, [1.0], None, [""], "2026-01-01 00:00:01")
    out, report = nccl_tests.parse_log(text).rows, json.loads(text)
    assert report["results"][0]["in_place_per_iter"]["times_us"] == [12.0, 20.0, 33.5]
    assert [(r.op, r.world_size, r.backend, r.device) for r in out[:1]] == [
        ("all_gather", 4, "gloo", "cpu")
    ]
    assert [r.time_us for r in out if r.in_place == 1] == [12.0, 20.0, 33.5]
    assert {r.redop for r in out} == {"none"}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: d.update(version=4), "up to version 3"),
        (lambda d: d.update(args=["./mystery"]), "give --op"),
        (lambda d: d["results"][0].update(type="complex"), "unknown nccl-tests type"),
        (lambda d: d.pop("results"), "no results list"),
    ],
)
def test_unreadable_reports_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: Any, fragment: str
) -> None:
    report = t4()
    change(report)
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(report))
    code, _, err = run_main(
        capsys, "import", "nccl-tests", str(source), "--out", str(tmp_path / "r")
    )
    assert code == 2 and fragment in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_torn_report_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "torn.json"
    source.write_bytes(T4.read_bytes()[:2000])
    code, _, err = run_main(
        capsys, "import", "nccl-tests", str(source), "--out", str(tmp_path / "r")
    )
    assert code == 2 and "not a JSON document" in err


def test_collective_from_the_file_name_when_args_do_not_say(tmp_path: Path) -> None:
    report = t4()
    report["args"] = ["./a.out"]
    rows = nccl_tests.parse_log(json.dumps(report), source="all_reduce-t4.json").rows
    assert {r.op for r in rows} == {"all_reduce"}
    assert nccl_tests.parse_log(json.dumps(report), source="x.json", op="all_reduce").rows
