"""``colbench predict`` on real nccl-tests logs of different machines: a fit whose outlier
rejection leaves one world size is refused like one measured at one world size, and a fit
over different devices says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.datadir import NCCL_TESTS_LOGS
from tests.unit.predict_runs import model_run


def _imported(
    capsys: pytest.CaptureFixture[str], out: Path, log: str, *flags: str
) -> str:  # fmt: skip
    code, _, err = run_main(
        capsys, "import", "nccl-tests", str(NCCL_TESTS_LOGS / log), *flags, "--out", str(out)
    )
    assert code == 0, err
    return str(out)


def test_outliers_that_leave_one_world_size_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A DGX-2 at 12 ranks and an Azure NDv2 log read as 16 ranks: the Azure times are
    # ~87% above the DGX-2's model, so the robust fit rejects every one of them.
    dgx = _imported(capsys, tmp_path / "dgx", "all_reduce__dgx2-wohlbier-old.log")
    azure = _imported(
        capsys, tmp_path / "azure", "all_reduce__azureml-nd40rs-v100-old-nccl-info.log",
        "--world-size", "16",
    )  # fmt: skip
    code, stdout, err = run_main(capsys, "predict", dgx, azure, "--ranks", "64", "--algo", "ring")
    assert code == 2, stdout + err
    assert stdout == "" and "Traceback" not in err
    message = err.strip()
    assert len(message.splitlines()) == 1
    assert "the points at 16 ranks (azure: 9 points, residual +86." in message
    assert "were all rejected as outliers" in message
    assert "leaves one world size (12 ranks)" in message


def test_a_fit_over_different_devices_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dgx = _imported(capsys, tmp_path / "dgx", "all_reduce__dgx2-wohlbier-old.log")
    h100 = _imported(capsys, tmp_path / "h100", "all_reduce__a3mega-ztan-h100-2node.log")
    code, stdout, err = run_main(
        capsys, "predict", dgx, h100, "--algo", "ring", "--ranks-per-node", "8"
    )
    assert code == 0, err
    notes = [line for line in stdout.splitlines() if "different hardware" in line]
    assert notes == [
        "#   all_reduce ring: fitted on runs of different hardware (NVIDIA H100 80GB HBM3 in "
        "h100; Tesla V100-SXM3-32GB in dgx): the parameters average the machines, and "
        "predictions describe neither"
    ]
    # Runs of one device: no such note.
    same = [str(model_run(tmp_path / f"r{n}", n)) for n in (2, 4)]
    code, stdout, _ = run_main(capsys, "predict", *same)
    assert code == 0 and "different hardware" not in stdout
