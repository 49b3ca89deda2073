"""gate and predict read each run directory once per command: the fabric check, the
judging or fitting, the copy check and --update-baseline's checks share one read (a
load's typing and validity pass is most of a small command's time)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from colbench.results import rows
from tests.conftest import run_main
from tests.unit.gate_runs import BIG, GATHER, STEADY, scaled, write_run
from tests.unit.predict_runs import model_run


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[Path]:
    """How often each results.csv went through rows.load, wherever a module holds it: the
    real loader, wrapped, under every name colbench imported it by."""
    real = rows.load
    counts: Counter[Path] = Counter()

    def recording(path: Any) -> Any:
        counts[rows.csv_path(path).resolve()] += 1
        return real(path)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("colbench") and getattr(module, "load", None) is real:
            monkeypatch.setattr(module, "load", recording)
    return counts


def _once(reads: Counter[Path], *runs: Path) -> None:
    assert reads == Counter({run.resolve() / "results.csv": 1 for run in runs})


def test_gate_reads_each_run_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reads: Counter[Path]
) -> None:
    base = write_run(tmp_path / "base", {BIG: STEADY, GATHER: STEADY})
    one = write_run(tmp_path / "one", {BIG: STEADY, GATHER: scaled(STEADY, 1.01)})
    two = write_run(tmp_path / "two", {BIG: STEADY, GATHER: STEADY})
    code, out, err = run_main(
        capsys, "gate", str(base), str(one), str(two), "--check", "busbw_gbps:-15%"
    )
    assert code == 0 and "all_gather" in out, out + err
    _once(reads, base, one, two)


def test_gate_update_baseline_reads_each_run_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reads: Counter[Path]
) -> None:
    base, first = tmp_path / "base", write_run(tmp_path / "a", {BIG: STEADY})
    code, _, err = run_main(capsys, "gate", str(base), str(first), "--update-baseline")
    assert code == 0, err
    reads.clear()
    run = write_run(tmp_path / "b", {BIG: STEADY})
    argv = ["gate", str(base), str(run), "--update-baseline", "--keep", "2"]
    code, out, err = run_main(capsys, *argv)
    assert code == 0 and "is the new baseline" in err and "all_reduce" in out, out + err
    _once(reads, base, run)
    assert len(rows.load(base)) == 10  # both runs kept: the baseline was read, not skipped


def test_predict_reads_each_run_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reads: Counter[Path]
) -> None:
    fitted = [model_run(tmp_path / f"r{n}", n) for n in (2, 3, 4)]
    against = model_run(tmp_path / "r8", 8)
    code, out, err = run_main(capsys, "predict", *map(str, fitted), "--ranks", "64",
                              "--against", str(against))  # fmt: skip
    assert code == 0 and "all_gather" in out, out + err
    _once(reads, *fitted, against)
