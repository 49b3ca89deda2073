"""Emulated nodes (--ranks-per-gpu): each rank's NCCL environment, the parent's refusals,
and the GPU facts the parent reads without CUDA (NVML through a recording fake, or
nvidia-smi's text)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from colbench.config.model import SweepConfig, default_timeout
from colbench.config.options import SweepOptions
from colbench.config.validate import from_options
from colbench.errors import UsageError
from colbench.host.launchers import gpus
from tests.fakegpu import EMULATION_FIXED


def test_each_rank_is_a_node_of_its_own_over_loopback() -> None:
    sets = [gpus.rank_environment(r, "vm", True, {})[0] for r in range(4)]
    assert len({s["NCCL_HOSTID"] for s in sets}) == 4
    assert all(s["NCCL_HOSTID"].startswith("vm") for s in sets)
    for s in sets:
        assert {k: v for k, v in s.items() if k != "NCCL_HOSTID"} == EMULATION_FIXED
    assert set(sets[0]) <= set(gpus.VARIABLES)


def test_the_users_own_values_win_and_are_what_is_recorded() -> None:
    to_set, seen = gpus.rank_environment(
        1, "vm", False, {"NCCL_NET": "IB", "NCCL_SOCKET_IFNAME": "eth0"}
    )
    assert "NCCL_NET" not in to_set and seen["NCCL_NET"] == "IB"
    # Several hosts: the user's network carries the sockets, not loopback.
    assert "NCCL_SOCKET_IFNAME" not in to_set


def test_the_parent_refuses_what_cannot_start() -> None:
    shared = gpus.Gpu(0, "H100", "GPU-a", "0000:17:00.0", "Default", 2**30, 2**31)
    exclusive = gpus.Gpu(1, "H100", "GPU-b", "0000:65:00.0", "Exclusive_Process", 1, 2)
    assert gpus.check_parent(1, "gloo", None) == []
    assert gpus.check_parent(2, "nccl", [shared]) == []
    with pytest.raises(UsageError, match="--ranks-per-gpu 2 shares each GPU among NCCL ranks"):
        gpus.check_parent(2, "gloo", [shared])
    with pytest.raises(UsageError, match="no GPU is visible"):
        gpus.check_parent(2, "nccl", [])
    with pytest.raises(UsageError, match=r"GPU 1 \(0000:65:00.0\) is in Exclusive_Process"):
        gpus.check_parent(2, "nccl", [shared, exclusive])
    (note,) = gpus.check_parent(2, "nccl", None)
    assert "NVML could not say" in note


def test_gloo_with_ranks_per_gpu_is_refused_before_anything_starts() -> None:
    with pytest.raises(UsageError) as info:
        from_options(SweepOptions(backend="gloo", ranks_per_gpu=2))
    assert str(info.value).startswith("--ranks-per-gpu 2 shares each GPU among NCCL ranks")
    with pytest.raises(UsageError, match="--ranks-per-gpu takes 1 to 16"):
        from_options(SweepOptions(ranks_per_gpu=0))


def test_emulated_worlds_get_longer_default_timeouts() -> None:
    assert default_timeout(None, 1, init=False) == 300.0
    assert default_timeout(None, 2, init=False) > 300.0
    assert default_timeout(None, 2, init=True) > 120.0
    assert default_timeout(7.0, 4, init=True) == 7.0
    cfg = from_options(SweepOptions(ranks_per_gpu=2))
    assert cfg.launch.timeout_s == default_timeout(None, 2, init=False)
    assert SweepConfig().launch.ranks_per_gpu == 1


def test_meta_and_header_say_emulated() -> None:
    assert gpus.describe(1, True) == {"kind": "real", "ranks_per_gpu": 1}
    meta = gpus.describe(4, True)
    assert meta["kind"] == "emulated" and meta["ranks_per_gpu"] == 4 and meta["time_sliced"]
    assert "loopback" in meta["transport"]
    assert gpus.header_line(1) is None
    line = gpus.header_line(4)
    assert line is not None and line.startswith("# fabric emulated: 4 ranks per GPU")


class FakeNvml:
    """pynvml's calls, answered from a list of GPUs; records what was asked."""

    def __init__(self, modes: list[int], fail: bool = False) -> None:
        self.modes = modes
        self.fail = fail
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.asked.append(name)
            if self.fail:
                raise RuntimeError("NVML Shared Library Not Found")
            return self._answer(name, *args)

        return call

    def _answer(self, name: str, *args: Any) -> Any:
        index = args[0] if args else 0
        answers = {
            "nvmlDeviceGetCount": len(self.modes),
            "nvmlDeviceGetHandleByIndex": index,
            "nvmlDeviceGetName": b"NVIDIA H100",
            "nvmlDeviceGetUUID": f"GPU-{index}",
            "nvmlDeviceGetPciInfo": types.SimpleNamespace(busId=f"00000000:{17 + index}:00.0"),
            "nvmlDeviceGetComputeMode": self.modes[index] if name.endswith("Mode") else 0,
            "nvmlDeviceGetMemoryInfo": types.SimpleNamespace(free=2**33, total=2**34),
        }
        return answers.get(name)


def test_nvml_facts_and_cuda_visible_devices() -> None:
    nvml = FakeNvml([0, 3])
    found = gpus.query(nvml)
    assert found is not None
    assert [(g.index, g.bus_id, g.compute_mode) for g in found] == [
        (0, "0000:17:00.0", "Default"),
        (1, "0000:18:00.0", "Exclusive_Process"),
    ]
    assert found[0].name == "NVIDIA H100" and found[0].memory_free_bytes == 2**33
    assert nvml.asked[0] == "nvmlInit" and nvml.asked[-1] == "nvmlShutdown"
    assert [g.index for g in gpus.visible(found, "1")] == [1]
    assert [g.index for g in gpus.visible(found, "GPU-1,0")] == [1, 0]
    assert [g.index for g in gpus.visible(found, "0,7,1")] == [0]  # CUDA stops at a bad entry
    assert gpus.visible(found, None) == found


def test_nvidia_smi_stands_in_for_nvml() -> None:
    asked: list[list[str]] = []

    def run(argv: list[str]) -> str:
        asked.append(argv)
        return (
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 00000000:19:00.0, Default, 81000, 81559\n"
            "1, NVIDIA H100 80GB HBM3, GPU-bbbb, 00000000:3B:00.0, Exclusive_Process, 5, 81559\n"
        )

    found = gpus.query(FakeNvml([0], fail=True), run)
    assert asked and asked[0][0] == "nvidia-smi"
    assert found is not None
    assert [(g.bus_id, g.compute_mode, g.shareable) for g in found] == [
        ("0000:19:00.0", "Default", True),
        ("0000:3b:00.0", "Exclusive_Process", False),
    ]
    assert found[0].memory_free_bytes == 81000 * 2**20


def test_nothing_known_is_not_no_gpu() -> None:
    def missing(argv: list[str]) -> str:
        raise FileNotFoundError(argv[0])

    assert gpus.query(FakeNvml([0], fail=True), missing) is None


# -- nccl-tests ranks of an emulated cross-check (colbench.commands.crosscheck.emulated_rank)
# -------


def test_an_nccl_tests_rank_gets_what_a_colbench_rank_gets() -> None:
    from colbench.commands.crosscheck import emulated_rank

    env = emulated_rank.environment(4, {"PMI_RANK": "5", "PATH": "/bin"})
    assert env["NCCL_HOSTID"] == gpus.host_id(socket.gethostname(), 5)
    assert env["NCCL_TESTS_DEVICE"] == "1"  # rank 5 of 4 per GPU: the second GPU
    assert env["NCCL_SOCKET_IFNAME"] == "lo" and env["PATH"] == "/bin"
    assert {env[k] for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")} == {"1"}
    # Open MPI's rank variable; the user's own NCCL values win, but not the GPU: colbench's
    # side takes GPU rank // K, and both sides must be one world.
    mine = {"OMPI_COMM_WORLD_RANK": "2", "NCCL_TESTS_DEVICE": "0", "NCCL_NET": "IB"}
    env = emulated_rank.environment(2, mine)
    assert env["NCCL_TESTS_DEVICE"] == "1" and env["NCCL_NET"] == "IB"
    assert env["NCCL_HOSTID"].endswith("rank2")
    with pytest.raises(SystemExit, match="run nccl-tests under mpiexec"):
        emulated_rank.environment(2, {})
    # A batch script's SLURM_PROCID (0 in every process) is no MPI rank.
    with pytest.raises(SystemExit, match="run nccl-tests under mpiexec"):
        emulated_rank.environment(2, {"SLURM_PROCID": "0"})


def test_an_nccl_tests_rank_becomes_the_program(tmp_path: Path) -> None:
    """A real process: the module execs the program with the emulation's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    proc = subprocess.run(
        [sys.executable, "-m", "colbench.commands.crosscheck.emulated_rank", "2", "/usr/bin/env"],
        env={**env, "PMI_RANK": "3"}, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    seen = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert seen["NCCL_HOSTID"].endswith("-colbench-rank3") and seen["NCCL_TESTS_DEVICE"] == "1"
    bad = subprocess.run(
        [sys.executable, "-m", "colbench.commands.crosscheck.emulated_rank", "x"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode != 0 and "usage:" in bad.stderr
