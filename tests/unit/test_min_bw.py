"""NCCL_TESTS_MIN_BW means one thing in every command: nccl-tests' 0.9x rule, parsed once
(colbench.config.min_bw); gate's --min-avg-busbw-gbps is the value itself, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.commands.gate.engine import average_busbw_floors
from colbench.commands.sweep.task import min_bw_verdict
from colbench.config import min_bw
from colbench.config.min_bw import BusbwFloor
from colbench.errors import UsageError
from colbench.results.rows import load
from colbench.results.rundir import RunDir
from tests.conftest import run_main
from tests.unit.gate_runs import BIG, STEADY, write_run


def test_variable_is_read_as_nccl_tests_reads_it() -> None:
    assert min_bw.from_environment({}) is None
    assert min_bw.from_environment({"NCCL_TESTS_MIN_BW": " "}) is None
    assert min_bw.from_environment({"NCCL_TESTS_MIN_BW": "-1"}) is None  # unchecked
    floor = min_bw.from_environment({"NCCL_TESTS_MIN_BW": "100"})
    assert floor == BusbwFloor(100.0, "NCCL_TESTS_MIN_BW", 0.9)
    assert floor.floor_gbps == 90.0 and floor.describe() == "0.9 x NCCL_TESTS_MIN_BW=100"
    assert floor.okay(90.0) and not floor.okay(89.99)
    assert floor.okay(float("nan"))  # a run with no result does not fail, as nccl-tests
    for bad, why in (("fast", "not a number"), ("inf", "not finite"), ("-3", "negative")):
        with pytest.raises(UsageError, match=f"NCCL_TESTS_MIN_BW='{bad}' is {why}"):
            min_bw.from_environment({"NCCL_TESTS_MIN_BW": bad})


def test_explicit_floor_is_the_value_itself() -> None:
    assert min_bw.explicit(None) is None
    floor = min_bw.explicit("100")
    assert floor is not None and floor.floor_gbps == 100.0
    assert floor.describe() == "--min-avg-busbw-gbps 100"
    assert not floor.okay(99.0)
    with pytest.raises(UsageError, match="--min-avg-busbw-gbps '-1' is negative"):
        min_bw.explicit("-1")


def test_sweep_and_gate_agree_between_the_floor_and_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case where the two rules used to differ: an average between 0.9x the value and
    the value. nccl-tests passes it; so do sweep's verdict and the gate."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = write_run(tmp_path / "run", {BIG: STEADY})
    # One row key: the gate's average is its samples' median; sweep's verdict reads the
    # run's average from meta.json, set to the same figure here.
    (judged,) = average_busbw_floors(load(run), BusbwFloor(0.0))
    average = judged.avg_busbw_gbps
    RunDir(run).update_meta(busbw_avg_gbps=average)
    value = average / 0.95  # the average is 0.95x the value: within nccl-tests' 0.9x
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", f"{value:.6f}")
    assert min_bw_verdict(run) == 0
    assert f"(0.9 x NCCL_TESTS_MIN_BW={value:.6g})" in capsys.readouterr().err
    code, out, _ = run_main(capsys, "gate", str(run), str(run))
    assert code == 0
    assert f"meets the floor {0.9 * value:.4g} GB/s (0.9 x NCCL_TESTS_MIN_BW={value:.6g})" in out
    # Asked explicitly for the value itself, the gate fails, and names that floor.
    code, out, _ = run_main(capsys, "gate", str(run), str(run), "--min-avg-busbw-gbps", f"{value}")
    assert code == 1 and f"(--min-avg-busbw-gbps {value:g})" in out
    # Beyond 0.9x, both fail alike.
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", f"{average / 0.85:.6f}")
    assert min_bw_verdict(run) == 1
    assert run_main(capsys, "gate", str(run), str(run))[0] == 1


def test_a_bad_variable_is_refused_by_gate_even_with_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_run(tmp_path / "run", {BIG: STEADY})
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "fast")
    code, _, err = run_main(capsys, "gate", str(run), str(run), "--min-avg-busbw-gbps", "0")
    assert code == 2 and "NCCL_TESTS_MIN_BW='fast' is not a number" in err
