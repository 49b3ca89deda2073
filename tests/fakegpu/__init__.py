"""Run colbench as on a GPU machine, on this one: see sitecustomize.py here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What every emulated node's rank sets besides its own NCCL_HOSTID (one host, spawned).
EMULATION_FIXED = {
    "NCCL_NET": "Socket",
    "NCCL_NET_PLUGIN": "none",
    "NCCL_MNNVL_ENABLE": "0",
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_SOCKET_IFNAME": "lo",
}

FAKE_GPU = Path(__file__).resolve().parent
REPO = FAKE_GPU.parent.parent


def gpu(index: int, mode: str = "Default", free_mib: int = 80_000) -> dict[str, Any]:
    """One fake GPU: its own PCI address and UUID."""
    return {
        "bus_id": f"0000:{0x17 + index:02x}:00.0",
        "uuid": f"GPU-{index:04x}aaaa-0000-1111-2222-333344445555",
        "mode": mode,
        "free_mib": free_mib,
    }


@dataclass
class FakeRun:
    """What a run on fake GPUs did: its exit, its stderr, and every recorded call."""

    returncode: int
    stderr: str
    records: list[dict[str, Any]]

    def calls(self, call: str, role: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["call"] == call and role in (None, r["role"])]

    def inits(self) -> list[dict[str, Any]]:
        """Each rank's start of NCCL, in rank order."""
        return sorted(self.calls("nccl_init"), key=lambda r: r["rank"])


def fake_env(tmp: Path, gpus: Sequence[dict[str, Any]]) -> dict[str, str]:
    record_dir = tmp / "fake-gpu"
    record_dir.mkdir(exist_ok=True)
    return {
        "PYTHONPATH": f"{FAKE_GPU}{os.pathsep}{REPO}",
        "COLBENCH_FAKE_GPU_DIR": str(record_dir),
        "COLBENCH_FAKE_GPUS": json.dumps(list(gpus)),
        "PYTHONUNBUFFERED": "1",
    }


def records(tmp: Path) -> list[dict[str, Any]]:
    lines = [
        line for f in (tmp / "fake-gpu").glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    return [json.loads(line) for line in lines]


def run_on_fake_gpus(
    tmp: Path, gpus: Sequence[dict[str, Any]], *args: str, env: dict[str, str] | None = None
) -> FakeRun:
    """``python -m colbench ARGS`` on a machine with ``gpus``."""
    full = {**os.environ, **fake_env(tmp, gpus), **(env or {})}
    for name in ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "NCCL_SOCKET_IFNAME"):
        if name not in (env or {}):
            full.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "colbench", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=full,
        cwd=REPO,
        check=False,
    )
    return FakeRun(proc.returncode, proc.stderr, records(tmp))
