"""Golden outputs of `colbench gate` and `colbench compare` on the committed baseline.

The baseline is judged against itself and against a copy with edited numbers (slower,
faster, missing, wrong, oom, other backend, other root, new rows), so that the text
tables, Markdown, JUnit XML and exit codes are pinned byte for byte: a refactor of the
comparison engine must not change what a user sees. Regenerate (after a deliberate
change, which the commit then explains) with COLBENCH_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_main

# A frozen copy of the smoke baseline as it was when the goldens were written, so that
# re-measuring results/baselines/gloo-smoke does not churn every golden line.
BASELINE = Path(__file__).resolve().parent / "data" / "golden" / "gloo-smoke"
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
UPDATE = os.environ.get("COLBENCH_UPDATE_GOLDEN") == "1"

_TIMES = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")
_BANDWIDTHS = ("algbw_gbps", "busbw_gbps", "aggbw_gbps")


def _scale(row: dict[str, str], time_factor: float) -> None:
    for column in _TIMES:
        row[column] = f"{float(row[column]) * time_factor:.6g}"
    for column in _BANDWIDTHS:
        row[column] = f"{float(row[column]) / time_factor:.6g}"


def _edit(row: dict[str, str]) -> dict[str, str] | None:
    """One edit per op, so that every verdict and every 'x' reason shows up."""
    op, size = row["op"], int(row["size_bytes"])
    if op == "all_reduce":
        _scale(row, 1.5)  # slower everywhere: worse beyond the limits
    elif op == "broadcast":
        _scale(row, 0.5)  # faster: better
    elif op == "reduce" and size == 4096:
        return None  # gone: missing in the gate, only in A in compare
    elif op == "gather" and size == 8192:
        row["wrong"] = "5"
    elif op == "scatter" and size == 16384:
        row["status"] = "oom"
        for column in (*_TIMES, *_BANDWIDTHS, "wrong"):
            row[column] = ""
    elif op == "all_gather" and size == 2048:
        row["backend"] = "nccl"
    elif op == "reduce_scatter" and size == 1024 and row["repeat"] != "0":
        _scale(row, 3.0)  # one sample of three stays: a big change, but noisy
    elif op == "reduce" and size == 8192:
        row["root"] = "1"  # another root is another measurement
    elif op == "sendrecv" and size == 65536:
        row["device"] = "other-cpu"  # outside the key: not comparable in the gate
    return row


def _edited_copy(tmp_path: Path, suffix: str = "") -> Path:
    """``suffix`` makes the copy's runs others (pooled with the baseline's copy, one run
    may not come twice)."""
    target = tmp_path / "edited"
    target.mkdir()
    with open(BASELINE / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        columns = list(reader.fieldnames or [])
        rows = [r for r in (_edit(dict(x)) for x in reader) if r is not None]
    rows = [{**r, "run_id": r["run_id"] + suffix} for r in rows]
    # A size the baseline never measured: new in the gate, only in B in compare.
    extra = [dict(r) for r in rows if r["op"] == "all_to_all" and r["size_bytes"] == "262144"]
    for r in extra:
        r["requested_bytes"] = r["size_bytes"] = "524288"
        r["count"] = str(int(r["count"]) * 2)
    with open(target / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows + extra)
    meta = json.loads((BASELINE / "meta.json").read_text())
    meta["versions"]["torch"] = "2.99.0+cpu"
    meta["run_id"] += suffix
    # Another run, not a cut copy: its meta.json counts its own rows.
    meta["rows"] = sum(r["run_id"] == meta["run_id"] for r in rows + extra)
    (target / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


def _check(name: str, text: str, tmp_path: Path) -> None:
    text = text.replace(str(tmp_path), "TMP").replace(str(BASELINE), "BASELINE")
    golden = GOLDEN / name
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"output differs from {golden}"


@pytest.fixture
def copy_of_baseline(tmp_path: Path) -> Path:
    target = tmp_path / "same"
    shutil.copytree(BASELINE, target)
    return target


def _gate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, current: Path, *flags: str
) -> None:
    report, junit = tmp_path / f"{name}.md", tmp_path / f"{name}.xml"
    code, out, err = run_main(
        capsys,
        "gate",
        str(BASELINE),
        str(current),
        *flags,
        "--report",
        str(report),
        "--junit",
        str(junit),
    )
    _check(f"gate-{name}.txt", f"exit {code}\n--- stdout\n{out}--- stderr\n{err}", tmp_path)
    _check(f"gate-{name}.md", report.read_text(), tmp_path)
    _check(f"gate-{name}.xml", junit.read_text(), tmp_path)


CHECKS = ("--check", "busbw_gbps:-15%", "--check", "time_p50_us:+25%")


def test_gate_against_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_of_baseline: Path
) -> None:
    _gate(capsys, tmp_path, "self", copy_of_baseline, *CHECKS)


def test_gate_against_edited_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "0.05")
    edited = _edited_copy(tmp_path)
    # The edited torch version would make the baseline's machine differ: --any-machine
    # judges performance all the same (tests/unit/test_gate_machine.py covers the refusal).
    _gate(
        capsys, tmp_path, "edited", edited, *CHECKS, "--min-size", "2K", "--max-size", "128K",
        "--any-machine",
    )  # fmt: skip


def test_gate_absolute_check_on_pooled_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_of_baseline: Path
) -> None:
    edited = _edited_copy(tmp_path, suffix="-edited")
    _gate(
        capsys, tmp_path, "pooled", edited, "--check", "time_us:5000", str(copy_of_baseline),
        "--any-machine",
    )  # fmt: skip


@pytest.mark.parametrize("metric", ["busbw", "time"])
def test_compare_golden(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, copy_of_baseline: Path, metric: str
) -> None:
    edited = _edited_copy(tmp_path)
    for name, other in (("self", copy_of_baseline), ("edited", edited)):
        folder = tmp_path / f"figures-{name}"
        code, out, err = run_main(
            capsys, "compare", str(BASELINE), str(other), "--metric", metric, "--out", str(folder)
        )
        # --out is a directory: the figure is named after the runs, inside it.
        assert [f.name for f in folder.iterdir()] == [f"compare-gloo-smoke-vs-{other.name}.png"]
        _check(f"compare-{name}-{metric}.txt", f"exit {code}\n{out}--- stderr\n{err}", tmp_path)
