"""What a run records about itself in ``meta.json``: versions, hardware, launcher, env.

Only allow-listed environment variables are recorded: the ones that change what
collectives do (NCCL_*, TORCH_*, CUDA_*, GLOO_*, OMP_*), never the whole
environment, which may hold secrets.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.results.rows import SCHEMA_VERSION

ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "GLOO_", "OMP_")
#: Exceptions inside allowed prefixes: these can carry credentials or tokens.
_ENV_DENY_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def allowed_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(ENV_PREFIXES) and not any(word in k for word in _ENV_DENY_WORDS)
    }


def _proc(name: str) -> dict[str, str]:
    """The first block of /proc/NAME's ``key: value`` lines (cpuinfo's first processor,
    meminfo whole); empty where unreadable."""
    first: dict[str, str] = {}
    try:
        for line in Path("/proc", name).read_text().splitlines():
            if not line.strip() and first:
                break
            key, _, value = line.partition(":")
            first[key.strip()] = value.strip()
    except OSError:
        pass
    return first


def cpu_model() -> str:
    return _proc("cpuinfo").get("model name") or platform.processor() or platform.machine()


#: /proc/cpuinfo's fields that name a CPU's generation: x86's, then Arm's.
_CPU_ID_FIELDS = (
    ("vendor_id", "cpu family", "model", "stepping"),
    ("CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision"),
)


def cpu_id() -> str | None:
    """The CPU's generation as the processor itself reports it (x86's vendor, family,
    model and stepping; Arm's implementer and part), or None where unknown.

    A hypervisor may give every host the same generic model name ("AMD EPYC", "Intel(R)
    Xeon(R) Processor"), so that two machines of different speed look alike by name;
    these fields still tell them apart (issue 33)."""
    first = _proc("cpuinfo")
    for names in _CPU_ID_FIELDS:
        if all(first.get(name) for name in names):
            return ", ".join(f"{name} {first[name]}" for name in names)
    return None


def versions() -> dict[str, str | None]:
    import torch

    nccl: str | None = None
    if torch.cuda.is_available():
        try:
            raw = torch.cuda.nccl.version()
            nccl = ".".join(map(str, raw)) if isinstance(raw, tuple) else str(raw)
        except (RuntimeError, AttributeError):
            nccl = None
    return {
        "colbench": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "python": platform.python_version(),
    }


#: torch's settings that change its cost per NCCL call (the torch tax, colbench.direct):
#: the flight recorder's ring of entries, CUDA timing events on every work, the watchdog's
#: async error handling, desync debugging, and a host-side poll in every wait().
TORCH_PER_CALL = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_ENABLE_TIMING",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_DESYNC_DEBUG",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_DISTRIBUTED_DEBUG",
)


def torch_per_call(env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Each of :data:`TORCH_PER_CALL` as the rank saw it; None: unset (torch's default)."""
    env = os.environ if env is None else env
    return {name: env.get(name) for name in TORCH_PER_CALL}


def gpus() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def memory_bytes() -> int | None:
    total = _proc("meminfo").get("MemTotal", "").split()
    return int(total[0]) * 1024 if total and total[0].isdigit() else None


def machine() -> dict[str, Any]:
    """The machine fingerprint a baseline is tied to (see :data:`MUST_MATCH`).

    gloo is compiled into torch and reports no version of its own: the torch version
    stands for it.
    """
    vers = versions()
    return {
        "cpu_model": cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_cores": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "gpus": sorted(set(gpus())),
        "torch": vers["torch"],
        "gloo": f"bundled with torch {vers['torch']}",
        "cuda": vers["cuda"],
        "nccl": vers["nccl"],
    }


#: Fingerprint entries that must agree for performance to be comparable; the others
#: (memory, kernel) are shown when they differ, not required to match.
MUST_MATCH = ("cpu_model", "cpu_id", "cpu_cores", "gpus", "torch", "cuda", "nccl")
SHOWN = ("memory_bytes", "kernel")


def fingerprint(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A run's fingerprint from its meta.json; runs recorded before fingerprints existed
    give what they have (CPU model and cores, versions), the rest is left unknown."""
    recorded = meta.get("machine")
    if isinstance(recorded, Mapping):
        return dict(recorded)
    cpu, vers = meta.get("cpu") or {}, meta.get("versions") or {}
    known = {
        "cpu_model": cpu.get("model"),
        "cpu_cores": cpu.get("cores"),
        "torch": vers.get("torch"),
        "cuda": vers.get("cuda"),
        "nccl": vers.get("nccl"),
    }
    return {k: v for k, v in known.items() if v is not None}


def machine_differences(
    base: Mapping[str, Any], cur: Mapping[str, Any], names: tuple[str, ...] = MUST_MATCH
) -> list[tuple[str, str, str]]:
    """(entry, baseline, current) for each of ``names`` both fingerprints record and
    that differs; an entry one side lacks is unknown, not a difference."""
    out = []
    for name in names:
        if name in base and name in cur and base[name] != cur[name]:
            out.append((name, _shown(base[name]), _shown(cur[name])))
    return out


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return "-" if value in (None, "") else str(value)


def collect(
    *,
    run_id: str,
    config: dict[str, Any],
    launcher: str,
    backend: str,
    world_size: int,
    hosts: list[str],
    devices: list[str],
    pids: list[int] | None = None,
    group_size: int | None = None,
) -> dict[str, Any]:
    """``hosts`` holds one node label per rank, in rank order."""
    per_node = Counter(hosts)
    sizes = set(per_node.values())
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": "running",
        "command_line": list(config.get("command_line") or sys.argv),
        "versions": versions(),
        "backend": backend,
        "launcher": launcher,
        "world_size": world_size,
        "hosts": sorted(set(hosts)),
        "rank_hosts": hosts,
        "rank_pids": pids or [],
        "nnodes": len(set(hosts)),
        # One number when every node runs as many ranks, else ranks per node label.
        "local_world_size": sizes.pop() if len(sizes) == 1 else dict(sorted(per_node.items())),
        "group_size": group_size or world_size,
        "groups": world_size // (group_size or world_size),
        "devices": devices,
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
        "machine": machine(),
        "platform": platform.platform(),
        "coordinator_host": socket.gethostname(),
        "env": allowed_env(),
        "torch_per_call": torch_per_call(),
        "config": config,
    }
