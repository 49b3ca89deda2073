"""On a one-GPU machine `colbench sweep` with no --backend measures NCCL at world size 1.

The machine's GPU count and NCCL are fakes; run_sweep is the real one, stopped where it
would spawn ranks by a stand-in that records the backend and world size it was asked for.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist

from colbench.bench.ops import REGISTRY
from colbench.commands.sweep import command
from colbench.config.model import SweepConfig
from colbench.errors import UsageError
from colbench.host import world
from colbench.host.launchers import detect
from colbench.host.launchers import gpus as gpus_module


class Machine:
    """A machine with ``gpus`` GPUs and NCCL; records every spawn run_sweep asks for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
        self.spawned: list[tuple[str, int]] = []
        monkeypatch.setattr(gpus_module, "gpu_count", lambda: gpus)
        monkeypatch.setattr(detect, "join_or_spawn", lambda nprocs: (None, ()))
        monkeypatch.setattr(world, "join_or_spawn", lambda nprocs: (None, ()))
        monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
        monkeypatch.setattr(command, "_run_variants", self._spawn)

    def _spawn(self, cfg: SweepConfig, backend: str, world_size: int, run_dir: Path) -> int:
        self.spawned.append((backend, world_size))
        return 0


def sweep(tmp_path: Path, **kwargs: Any) -> SweepConfig:
    return SweepConfig.of(sizes_bytes=(1024,), out_dir=str(tmp_path / "run"), **kwargs)


def test_one_gpu_measures_nccl_at_world_size_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = Machine(monkeypatch, gpus=1)
    assert command.run_sweep(sweep(tmp_path)) == 0
    assert machine.spawned == [("nccl", 1)]
    notes = [line for line in capsys.readouterr().err.splitlines() if "one GPU" in line]
    assert len(notes) == 1
    assert notes[0].startswith("colbench: note: one GPU: measuring NCCL with 1 rank")
    assert "nccl-tests -g 1" in notes[0] and "--backend gloo" in notes[0]


def test_gloo_on_request_still_runs_two_cpu_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = Machine(monkeypatch, gpus=1)
    assert command.run_sweep(sweep(tmp_path, backend="gloo")) == 0
    assert machine.spawned == [("gloo", 2)]
    assert "one GPU" not in capsys.readouterr().err


def test_more_ranks_than_the_gpu_says_how_to_get_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = Machine(monkeypatch, gpus=1)
    with pytest.raises(UsageError, match=r"--nprocs 2 but only 1 GPU.*--backend gloo runs 2"):
        command.run_sweep(sweep(tmp_path, nprocs=2))
    assert machine.spawned == []


def test_several_gpus_get_one_rank_each_without_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = Machine(monkeypatch, gpus=4)
    assert command.run_sweep(sweep(tmp_path)) == 0
    assert machine.spawned == [("nccl", 4)]
    assert "one GPU" not in capsys.readouterr().err


def test_no_gpu_keeps_gloo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = Machine(monkeypatch, gpus=0)
    assert command.run_sweep(sweep(tmp_path)) == 0
    assert machine.spawned == [("gloo", 2)]


def test_bus_bandwidth_at_world_size_one_is_sane() -> None:
    """nccl-tests' formulas at n=1: 0 where data would cross between ranks, never negative."""
    factors = {coll.name: coll.busbw_factor(1) for coll in REGISTRY}
    assert all(math.isfinite(f) and f >= 0 for f in factors.values()), factors
    assert factors["all_reduce"] == factors["all_gather"] == factors["reduce_scatter"] == 0
    assert factors["broadcast"] == factors["reduce"] == 1
