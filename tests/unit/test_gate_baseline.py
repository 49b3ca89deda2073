"""Accepting a run as the baseline, and the committed smoke baseline itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.commands.gate.command import update_baseline
from colbench.errors import UsageError
from colbench.results.rows import load
from tests.conftest import run_main
from tests.unit.gate_runs import (
    BIG,
    STEADY,
    scaled,
    write_run,
)

# --- baselines -----------------------------------------------------------------------


def test_update_baseline_copies_and_merges(tmp_path: Path) -> None:
    one = write_run(tmp_path / "one", {BIG: STEADY})
    two = write_run(tmp_path / "two", {BIG: STEADY[:2]})
    target = update_baseline([one, two], tmp_path / "baselines" / "smoke")
    merged = load(target)
    assert len(merged) == 7 and set(merged["run_id"]) == {"one", "two"}
    meta = json.loads((target / "meta.json").read_text())
    assert meta["pooled_runs"] == ["one", "two"]
    update_baseline(one, target)
    assert len(load(target)) == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wrong": {BIG: 1}}, "wrong elements"),
        ({"oom": [BIG]}, "no measurement"),
        ({"status": "interrupted"}, "status is 'interrupted'"),
    ],
)
def test_update_baseline_refuses_a_broken_run(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY}, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        update_baseline(run, tmp_path / "base")
    assert not (tmp_path / "base").exists()


# --- the committed smoke baseline ----------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "results" / "baselines" / "gloo-smoke"


def test_committed_baseline_is_clean_and_pooled() -> None:
    # load() reads every schema; the baseline is re-measured when the columns change.
    frame = load(BASELINE)
    assert (frame["wrong"] == 0).all() and (frame["status"] == "ok").all()
    keys = ["op", "dtype", "redop", "root", "in_place", "size_bytes"]
    samples = frame.groupby(keys).size()
    # Three runs of the suite's --repeat 5, pooled: enough for Holm over the judged rows.
    assert samples.min() >= 15 and frame["run_id"].nunique() >= 3
    assert set(frame["op"]) == set(ops.BY_NAME)
    meta = json.loads((BASELINE / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["world_size"] == 2
    # That it was measured from configs/smoke-cpu.yaml and nothing else:
    # tests/unit/test_smoke_definition.py.


def test_a_run_the_gate_fails_joins_no_window_and_replaces_only_when_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base"
    first = write_run(tmp_path / "first", {BIG: STEADY})
    assert run_main(capsys, "gate", str(base), str(first), "--update-baseline")[0] == 0
    slow = write_run(tmp_path / "slow", {BIG: scaled(STEADY, 4.0)})
    argv = ["gate", str(base), str(slow), "--check", "busbw_gbps:-10%", "--update-baseline"]
    code, out, err = run_main(capsys, *argv, "--keep", "5")
    assert code == 1 and "FAIL" in out and "not accepted: it fails the gate" in err, out + err
    assert json.loads((base / "meta.json").read_text())["run_id"] == "first"
    # --keep 1: a deliberate re-baselining, said as such.
    code, out, err = run_main(capsys, *argv)
    assert code == 0 and "is the new baseline" in err and "although it fails the gate" in err
    assert json.loads((base / "meta.json").read_text())["run_id"] == "slow"
