"""Rows of an emulated fabric (--ranks-per-gpu) are never judged against rows of a real
one without --allow-emulated: compare, gate and predict refuse in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.results.rows import load
from tests.conftest import run_main
from tests.unit.rows import SIZES, alpha_beta, row, write_run


def _runs(tmp_path: Path, world_sizes: tuple[int, ...] = (4,)) -> dict[str, Path]:
    made = {}
    for per_gpu, name in ((1, "real"), (2, "emulated")):
        for n in world_sizes:
            time = alpha_beta(20.0 * per_gpu, 10.0 / per_gpu)
            rows = [row("all_reduce", s, time(s), world_size=n, ranks_per_gpu=per_gpu,
                        in_place=1) for s in SIZES]  # fmt: skip
            made[f"{name}{n}"] = write_run(tmp_path / f"{name}{n}", rows)
    return made


def test_rows_carry_their_fabric(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    frame = load(runs["emulated4"])
    assert set(frame["fabric"]) == {"emulated"} and set(frame["ranks_per_gpu"]) == {2}


@pytest.mark.parametrize(
    "command",
    [
        ["compare", "{real4}", "{emulated4}", "--out", "{tmp}/c"],
        ["gate", "{real4}", "{emulated4}", "--check", "busbw_gbps:-10%"],
    ],
    ids=["compare", "gate"],
)
def test_mixing_fabrics_is_refused_then_allowed_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    runs = {k: str(v) for k, v in _runs(tmp_path).items()}
    argv = [word.format(tmp=tmp_path, **runs) for word in command]
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("colbench: error: ") and "emulated fabric" in line
    assert "--allow-emulated" in line
    code, _, err = run_main(capsys, *argv, "--allow-emulated")
    assert code in (0, 1)
    assert "colbench: warning: " in err and "(--allow-emulated)" in err


def test_predict_refuses_to_fit_across_fabrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path, (2, 4))
    code, _, err = run_main(capsys, "predict", str(runs["real2"]), str(runs["emulated4"]),
                            "--ranks", "8")  # fmt: skip
    assert code == 2 and "emulated fabric" in err and "--allow-emulated" in err


def test_one_fabric_compares_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    code, _, err = run_main(capsys, "compare", str(runs["emulated4"]), str(runs["emulated4"]),
                            "--out", str(tmp_path / "c"))  # fmt: skip
    assert code == 0 and "warning" not in err and "emulated fabric" not in err
