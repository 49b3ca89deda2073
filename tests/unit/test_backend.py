"""Backend choice and run directories (colbench.host.world), without starting ranks."""

from __future__ import annotations

import datetime
import types
from pathlib import Path

import pytest

from colbench.bench.ops import REGISTRY
from colbench.commands.sweep.task import SweepTask
from colbench.config.model import SweepConfig
from colbench.errors import UsageError
from colbench.host import world
from colbench.host.world import default_nprocs, resolve_backend
from colbench.results import rundir


@pytest.mark.parametrize(
    ("gpus", "nccl", "expected"),
    [
        (0, True, "gloo"),
        (0, False, "gloo"),
        # One GPU is a world of one, as nccl-tests -g 1 measures it; under a launcher, one
        # GPU per process is enough.
        (1, True, "nccl"),
        (2, True, "nccl"),
        (2, False, "gloo"),
    ],
)
def test_auto_backend(gpus: int, nccl: bool, expected: str) -> None:
    assert resolve_backend("auto", gpus, nccl) == expected


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_gloo_is_always_gloo(gpus: int) -> None:
    assert resolve_backend("gloo", gpus, True) == "gloo"
    assert resolve_backend("gloo", gpus, False) == "gloo"


def test_explicit_nccl() -> None:
    assert resolve_backend("nccl", 1, True) == "nccl"
    assert resolve_backend("nccl", 2, True) == "nccl"
    with pytest.raises(UsageError, match="needs CUDA GPUs"):
        resolve_backend("nccl", 0, True)
    with pytest.raises(UsageError, match="no NCCL"):
        resolve_backend("nccl", 2, False)


def test_default_nprocs() -> None:
    assert default_nprocs("nccl", 8) == 8
    assert default_nprocs("gloo", 8) == 2
    assert default_nprocs("gloo", 0) == 2
    assert default_nprocs("nccl", 1) == 1


def cfg(tmp_path: Path, **kwargs: object) -> SweepConfig:
    base: dict = {"sizes_bytes": (1024,), "results_root": str(tmp_path / "results")}
    base.update(kwargs)
    return SweepConfig.of(**base)


def make_run_dir(c: SweepConfig, backend: str) -> Path:
    return world.make_run_dir(c.output, SweepTask(c).label, backend)


def run_label(c: SweepConfig) -> str:
    return SweepTask(c).label


def test_out_dir_that_is_new_is_created(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "run"
    assert make_run_dir(cfg(tmp_path, out_dir=str(out)), "gloo") == out
    assert out.is_dir()


def test_out_dir_that_exists_empty_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    assert make_run_dir(cfg(tmp_path, out_dir=str(out)), "gloo") == out


def test_out_dir_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.csv").write_text("precious\n")
    with pytest.raises(UsageError, match="not empty") as info:
        make_run_dir(cfg(tmp_path, out_dir=str(out)), "gloo")
    assert str(out) in str(info.value)
    assert (out / "results.csv").read_text() == "precious\n"


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.write_text("x")
    with pytest.raises(UsageError):
        make_run_dir(cfg(tmp_path, out_dir=str(out)), "gloo")
    assert out.read_text() == "x"


class FrozenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> FrozenDatetime:
        return cls(2024, 5, 6, 7, 8, 9)


def test_default_names_are_unique_within_one_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = types.SimpleNamespace(datetime=FrozenDatetime, timedelta=datetime.timedelta)
    monkeypatch.setattr(rundir, "_dt", clock)
    c = cfg(tmp_path, ops=("all_reduce", "all_gather"))
    first = make_run_dir(c, "gloo")
    second = make_run_dir(c, "gloo")
    third = make_run_dir(c, "gloo")
    assert first.name == "20240506-070809-all_reduce-all_gather-gloo"
    assert first != second != third != first
    assert second.name == first.name + "-2"
    assert third.name == first.name + "-3"
    assert all(p.is_dir() and p.parent == tmp_path / "results" for p in (first, second, third))


def test_default_names_really_called_twice(tmp_path: Path) -> None:
    c = cfg(tmp_path)
    assert make_run_dir(c, "nccl") != make_run_dir(c, "nccl")


def test_run_label() -> None:
    assert run_label(SweepConfig.of(ops=("all_reduce",))) == "all_reduce"
    every = [op.name for op in REGISTRY]
    assert run_label(SweepConfig.of(ops=tuple(every))) == "all"
    long_label = run_label(SweepConfig.of(ops=tuple(every[:-1])))
    assert len(long_label) <= 48
