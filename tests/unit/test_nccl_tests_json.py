"""sweep -J: nccl-tests' JSON report, checked against a report nccl-tests itself wrote.

The reference is tests/data/nccl-tests-json/ (2 x T4, NCCL 2.29.3, -I 1; see its
INDEX.md). It was written by one process, so the per-process block's layout is checked
against util.cu's description instead (a list of one list per process).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from colbench.bench.rowmaker import percentile
from colbench.config.min_bw import BusbwFloor
from colbench.errors import WriteFailed
from colbench.results.reporters import nccl_tests_json as report
from colbench.results.reporters.stragglers import RankTimes
from colbench.results.rows import Row
from tests.conftest import run_main
from tests.unit.rows import row

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests-json"
T4 = DATA / "allreduce-t4-2gpu-nccl2.29.3-per-iter.json"
PER_PROCESS = "per_process_max_times_us"


def t4() -> dict[str, Any]:
    return json.loads(T4.read_text())


def header(per_iter: bool = True, ranks: int = 2) -> report.Header:
    return report.Header(
        args=("colbench", "sweep", "-I", "1", "-J", "x.json"),
        env=("HOME=/root", "NCCL_DEBUG=INFO"),
        nccl_version=22903,
        sizes_bytes=(1024, 4096),
        warmup_iters=5,
        iterations=4,
        validation=1,
        graph=0,
        per_iter_timing=per_iter,
        devices=[
            report.Device(r, 0, 100 + r, "node1", r, "0000:17:00", "NVIDIA H100")
            for r in range(ranks)
        ],
    )


def rows_of(size: int, time_us: float, wrong: int | None = 0) -> list[Row]:
    return [
        Row(
            **row(
                "all_reduce", size, time_us, world_size=2, dtype="float16", in_place=p, wrong=wrong
            )
        )
        for p in (0, 1)
    ]


#: Two ranks' times of four iterations (us); rank 1 is the slower in iterations 1 and 3.
RANK_TIMES = ((10.0, 11.0, 10.5, 10.0), (10.25, 12.5, 10.0, 14.0))


def written_report(tmp_path: Path, per_iter: bool = True) -> dict[str, Any]:
    path = tmp_path / "r.json"
    rep = report.NcclTestsJsonReporter(path, header(per_iter), None, lambda line: None)
    rep.on_start({})
    for size in (1024, 4096):
        rows = rows_of(size, 10.5)
        for r in rows:
            rep.on_rank_times(r, RankTimes((10.0, 11.0), (0.0, 0.0), (), RANK_TIMES))
        rep.on_rows(rows)
    rep.on_end(1.0)
    rep.close()
    return json.loads(path.read_text())


def shape(value: Any) -> Any:
    """A JSON value's structure: each object's keys in order with their values' shapes, a
    list by its first element's, a leaf by its JSON type (int and float told apart)."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_report_has_the_real_reports_keys_order_and_types(tmp_path: Path) -> None:
    mine = written_report(tmp_path)
    # Only the per-process block is new (the reference was written by one process); it
    # closes each per-iteration block, as util.cu writes it.
    for placement in ("out_of_place_per_iter", "in_place_per_iter"):
        block = mine["results"][0][placement]
        assert list(block)[-1] == PER_PROCESS
        assert shape(block.pop(PER_PROCESS)) == [["float"]]
    assert shape(mine) == shape(t4())


def test_report_text_keeps_nccl_tests_quirks(tmp_path: Path) -> None:
    written_report(tmp_path)
    text = (tmp_path / "r.json").read_text()
    # One line, no trailing newline, as util.cu writes it.
    assert "\n" not in text
    assert '"root":"    -1"' in text
    assert '"nwrong":0.000000' in text
    assert '"blocking_collectives":"false","per_iter_timing":"true"' in text
    assert '"average_bus_bandwidth":{"bandwidth":' in text
    assert text.endswith('"errors":[""],"end_time":"' + json.loads(text)["end_time"] + '"}')
    # Six decimals on every double (%lf).
    assert '"time":10.500000,' in text


def test_summary_figures_are_nccl_tests_own_on_the_real_report() -> None:
    """iter_stats reproduces, from the real report's times_us, the summary nccl-tests
    wrote beside them (formatted as it formats them)."""
    for placement in ("out_of_place_per_iter", "in_place_per_iter"):
        block = t4()["results"][0][placement]
        stats = report.iter_stats(block["times_us"])
        for key in ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us"):
            assert report.double(getattr(stats, key)) == f"{block[key]:f}", key
        assert report.double(stats.cv_pct) == f"{block['cv_pct']:f}"


def test_per_iteration_block_from_each_ranks_times(tmp_path: Path) -> None:
    block = written_report(tmp_path)["results"][1]["in_place_per_iter"]
    assert block[PER_PROCESS] == [list(r) for r in RANK_TIMES]
    # times_us: per iteration, the slowest process (what analyze_perf_json checks).
    assert block["times_us"] == [10.25, 12.5, 10.5, 14.0]
    ordered = sorted(block["times_us"])
    assert block["p50_us"] == ordered[2]  # sorted[n // 2], the upper median
    assert block["p95_us"] == block["p99_us"] == ordered[3]
    mean = sum(ordered) / 4
    assert block["avg_us"] == pytest.approx(mean, abs=1e-6)
    assert block["stdev_us"] == pytest.approx(statistics.pstdev(ordered), abs=1e-6)
    # colbench's own p50 column interpolates: here 11.5, not 12.5.
    assert percentile(ordered, 50) == pytest.approx(11.5)
    assert block["p50_us"] != percentile(ordered, 50)


def test_percentile_index_is_nearest_rank() -> None:
    assert [report.percentile_index(50, p) for p in (95, 99)] == [47, 49]
    assert [report.percentile_index(10, p) for p in (50, 95, 99)] == [4, 9, 9]
    assert report.percentile_index(1, 99) == 0


def test_without_per_iter_timing_no_blocks(tmp_path: Path) -> None:
    doc = written_report(tmp_path, per_iter=False)
    assert doc["config"]["per_iter_timing"] == "false"
    assert not [k for k in doc["results"][0] if k.endswith("_per_iter")]


def test_out_of_place_not_measured_is_null(tmp_path: Path) -> None:
    in_place_only = [rows_of(1024, 10.0)[1]]
    entry = json.loads(report.record(in_place_only, None))
    assert entry["out_of_place"] is None
    assert entry["in_place"]["time"] == 10.0


def test_unchecked_results_write_null_nwrong() -> None:
    entry = json.loads(report.record(rows_of(1024, 10.0, wrong=None), None))
    assert entry["in_place"]["nwrong"] is None


def test_file_is_a_whole_report_after_every_size(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    rep = report.NcclTestsJsonReporter(path, header(False), None, lambda line: None)
    rep.on_start({})
    assert json.loads(path.read_text())["results"] == []
    rep.on_rows(rows_of(1024, 10.0))
    mid = json.loads(path.read_text())
    assert len(mid["results"]) == 1 and mid["errors"] == [report.INCOMPLETE]
    rep.close()  # a failure: no on_end
    assert json.loads(path.read_text())["errors"] == [report.INCOMPLETE]


def test_existing_file_is_kept_as_nccl_tests_keeps_it(tmp_path: Path) -> None:
    said: list[str] = []
    (tmp_path / "r.json").write_text("theirs")
    (tmp_path / "r.json.0").write_text("theirs too")
    rep = report.NcclTestsJsonReporter(tmp_path / "r.json", header(), None, said.append)
    rep.on_start({})
    rep.close()
    assert (tmp_path / "r.json").read_text() == "theirs"
    assert json.loads((tmp_path / "r.json.1").read_text())["version"] == 3
    assert said == [f"# Writing JSON output to {tmp_path / 'r.json.1'}"]


def test_unwritable_report_is_a_write_failure(tmp_path: Path) -> None:
    rep = report.NcclTestsJsonReporter(tmp_path / "gone" / "r.json", header(), None, print)
    with pytest.raises(WriteFailed, match=r"gone/r\.json"):
        rep.on_start({})


def test_report_okay_is_nccl_tests_rule() -> None:
    # The rule itself: tests/unit/test_min_bw.py.
    okay = [
        json.loads("{" + report.footer(0, [90.0], f, [""], "x")[2:])["average_bus_bandwidth"][
            "okay"
        ]
        for f in (None, BusbwFloor(100.0), BusbwFloor(101.0))
    ]
    assert okay == ["unchecked", "true", "false"]


def test_strings_escaped_and_cut_as_util_cu() -> None:
    assert report.text('a/b"c\\d\te\nf') == '"a\\/b\\"c\\\\d\\te\\nf"'
    assert report.text("caf\u00e9 au lait") == '"caf"'
    assert report.double(float("nan")) == '"nan"'


def test_credentials_left_out_of_env() -> None:
    env = report.environment({"HOME": "/root", "HF_TOKEN": "hf_abc", "AWS_SECRET_ACCESS_KEY": "x"})
    assert env == ["HOME=/root", "HF_TOKEN=<redacted>", "AWS_SECRET_ACCESS_KEY=<redacted>"]


def test_device_hex_is_nccl_tests_pci_text() -> None:
    assert report.device_hex("0000:17:00.0") == "0000:17:00"
    assert report.device_hex("") == ""


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["-J", "report.txt"], "ending in .json"),
        (["-J", "/nonexistent-dir/r.json"], "does not exist"),
        (["-J", "r.json", "-I", "2"], "takes 0 or 1"),
        (["-I", "1"], "give -J FILE.json"),
        (["-J", "r.json", "--op", "all_reduce,all_gather"], "one --op"),
        (["-J", "r.json", "--repeat", "3"], "one measurement per size"),
        (["-J", "r.json", "--env", "NCCL_ALGO=Ring,Tree"], "one world"),
    ],
)
def test_bad_report_options_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run_main(capsys, "sweep", "--backend", "gloo", *argv)
    assert code == 2, err
    assert out == ""
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_bad_min_bw_exits_2_before_measuring(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "lots")
    code, _, err = run_main(capsys, "sweep", "--backend", "gloo", "--out", str(tmp_path / "r"))
    assert code == 2 and "NCCL_TESTS_MIN_BW" in err
    assert not (tmp_path / "r").exists()


def test_step_of_sizes_from_zero_is_in_bytes() -> None:
    # 0 B then 1 KiB grows by no factor: the ratio is infinite, once an OverflowError.
    assert report._step([0, 1024]) == ("step_bytes", 1024)
    assert report._step([0, 1024, 4096]) == ("step_bytes", 0)
    assert report._step([1024, 2048, 4096]) == ("step_factor", 2)
