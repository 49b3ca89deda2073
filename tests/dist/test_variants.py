"""A real variant sweep from a YAML suite: fresh gloo ranks per variant, rows tagged,
every rank's view of its variant's environment recorded; then plot/compare/fit on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.cli import main
from colbench.results.rows import load
from tests.conftest import call_colbench

SUITE = """\
description: variant probe
op: all_reduce
sizes: [1K, 16K, 256K]
backend: gloo
nprocs: 2
iters: 50
warmup: 1
variants:
  COLBENCH_PROBE: [a, b]
"""


@pytest.fixture(scope="module")
def variant_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("variants")
    suite = root / "probe.yaml"
    suite.write_text(SUITE)
    out = root / "run"
    # Flags override the file: fewer iterations, plus an NCCL_* axis gloo ignores.
    proc = call_colbench(
        "run", str(suite), "--iters", "3", "--env", "NCCL_ALGO=Ring", "--plot", "--no-table",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


def test_each_variant_ran_in_ranks_that_saw_its_value(variant_run: tuple[Path, str]) -> None:
    out, stderr = variant_run
    frame = load(out)
    names = ["COLBENCH_PROBE=a,NCCL_ALGO=Ring", "COLBENCH_PROBE=b,NCCL_ALGO=Ring"]
    assert sorted(set(frame["variant"])) == names
    for name in names:
        rows = frame[frame["variant"] == name]
        assert sorted(rows["size_bytes"]) == [1024, 16384, 262144]
        assert (rows["wrong"] == 0).all()
    assert set(frame["iters"]) == {3}  # the flag, not the file's 50
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["rows"] == len(frame) == 6
    assert [v["variant"] for v in meta["variants"]] == names
    for record, value in zip(meta["variants"], ["a", "b"], strict=True):
        assert record["env_seen_by_rank"] == [
            {"COLBENCH_PROBE": value, "NCCL_ALGO": "Ring"},
            {"COLBENCH_PROBE": value, "NCCL_ALGO": "Ring"},
        ]
    assert stderr.count("NCCL_ALGO has no effect on gloo") == 1
    assert "variant 2/2: COLBENCH_PROBE=b,NCCL_ALGO=Ring" in stderr
    assert f"6 rows of 2 variants in {out}/results.csv" in stderr


def test_one_variant_says_its_rows_once(tmp_path: Path) -> None:
    proc = call_colbench(
        "sweep", "--backend", "gloo", "--nprocs", "1", "--sizes", "1K", "-n", "1", "-w", "0",
        "--env", "NCCL_ALGO=Ring", "--no-table", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "results.csv" in line]
    assert said == [f"colbench: 1 row in {tmp_path / 'run'}/results.csv"], proc.stderr


def test_plots_written_and_variants_compare_and_fit(
    variant_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = variant_run
    for name in ("busbw.png", "time.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    a, b = "COLBENCH_PROBE=a,NCCL_ALGO=Ring", "COLBENCH_PROBE=b,NCCL_ALGO=Ring"
    figures = out / "ab"
    # In-process: these commands spawn nothing, and a fresh interpreter costs seconds here.
    with pytest.raises(SystemExit) as info:
        main(
            [
                "compare",
                str(out),
                str(out),
                "--variant-a",
                a,
                "--variant-b",
                b,
                "--metric",
                "time",
                "--out",
                str(figures),
            ]
        )
    captured = capsys.readouterr()
    assert info.value.code == 0, captured.err
    rows = [line for line in captured.out.splitlines() if line.startswith("  all_reduce")]
    # The last two columns: B/A, then its spread ("-": one sample a side).
    assert len(rows) == 3 and all(float(line.split()[-2]) > 0 for line in rows)
    assert all(line.split()[-1] == "-" for line in rows)
    (figure,) = figures.glob("compare-*.png")
    assert figure.stat().st_size > 10_000
    with pytest.raises(SystemExit) as info:
        main(["fit", str(out)])
    captured = capsys.readouterr()
    assert info.value.code == 0, captured.err
    assert "COLBENCH_PROBE=a" in captured.out and "COLBENCH_PROBE=b" in captured.out
