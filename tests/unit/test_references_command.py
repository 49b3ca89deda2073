"""``colbench references``: listing, filters, a fleet's own file, a run placed against it,
health's floors exported to the format; bad input is one line and exit code 2."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from colbench.commands.health import floors as floor_files
from colbench.commands.references import table
from colbench.importers.nccl_tests import import_log
from tests.conftest import run_main

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests-logs"
GiB = 1024**3


def test_the_list_is_filtered_and_every_line_has_a_source(capsys):
    code, out, _ = run_main(capsys, "references", "--gpu", "h200", "--gpus-per-node", "8")
    assert code == 0
    lines = out.splitlines()[1:]
    expected = table.select(table.load(), gpu="H200", gpus_per_node=8)
    assert len(lines) == len(expected) >= 3
    assert all(" H200 " in line and line.split()[-1] for line in lines)
    assert "NVIDIA/nccl-tests#272" in out
    code, out, _ = run_main(capsys, "references")
    assert code == 0 and len(out.splitlines()) - 1 == len(table.load()) >= 25


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--gpu", "banana"), "names no GPU model"),
        (("--op", "all_shuffle"), "no collective"),
        (("--kind", "rumour"), "measurement, floor, expectation"),
        (("--references", "missing.yaml"), "no such file"),
        (("--run", "nowhere"), "no results.csv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, "references", *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_fleets_own_file_is_written_read_and_placed_against(capsys, tmp_path):
    golden = tmp_path / "golden.json"
    code, _, _ = run_main(capsys, "references", "--gpu", "H100", "--nodes", "2", "--write",
                          str(golden))  # fmt: skip
    assert code == 0
    refs = table.load(golden)
    assert refs and all(r.gpu == "H100" and r.nodes == 2 for r in refs)
    run, _ = import_log(LOGS / "all_reduce__a3mega-ztan-h100-2node.log", out_dir=tmp_path / "r")
    code, out, _ = run_main(capsys, "references", "--references", str(golden), "--run", str(run))
    assert code == 0
    assert "all_reduce 8G: 338 GB/s" in out
    meta = json.loads((run / "meta.json").read_text())
    assert meta["references"]["table"] == str(golden)


def _floors(tmp_path: Path, gpus: list[str]) -> Path:
    floor = floor_files.Floor("intra_all_reduce", 16 * GiB, 470.0, 0.01, 10, 20, 455.0, 440.0,
                              0.01, 0.001, 5.0, 8.0)  # fmt: skip
    pair = floor_files.Floor("pair", GiB, 45.0, 0.01, 10, 20, 43.0, 42.0, 0.01, 0.001, 5.0, 8.0)
    doc = {"schema_version": floor_files.SCHEMA_VERSION, "kind": floor_files.KIND,
           "health_version": 2, "fingerprint": {"gpus": gpus, "nodes": 4}, "runs": [],
           "floors": [asdict(floor), asdict(pair)]}  # fmt: skip
    path = tmp_path / "floors.json"
    path.write_text(json.dumps(doc))
    return path


def test_healths_floors_export_to_the_format(capsys, tmp_path):
    path = _floors(tmp_path, ["NVIDIA H100 80GB HBM3"])
    out_file = tmp_path / "fleet.json"
    code, _, _ = run_main(capsys, "references", "--from-floors", str(path), "--gpus-per-node",
                          "8", "--write", str(out_file))  # fmt: skip
    assert code == 0
    refs = {r.kind: r for r in table.load(out_file)}
    # The pair check is no collective of its own: only the node all_reduce is exported.
    assert set(refs) == {"measurement", "floor"}
    assert refs["floor"].busbw_gbps == 455.0 and refs["measurement"].busbw_gbps == 470.0
    assert refs["floor"].hardware == {"gpu": "H100", "gpus_per_node": 8, "nodes": 1}
    assert refs["floor"].op == "all_reduce" and refs["floor"].size_bytes == 16 * GiB


def test_floors_learned_without_a_gpu_are_refused(capsys, tmp_path):
    code, _, err = run_main(capsys, "references", "--from-floors", str(_floors(tmp_path, [])))
    assert code == 2 and "learned on no GPU" in err


def test_a_bad_floors_file_is_named_by_its_option(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    code, _, err = run_main(capsys, "references", "--from-floors", str(path))
    assert code == 2 and err.count("\n") == 1
    assert f"--from-floors {path} is not JSON" in err and "--floors " not in err
