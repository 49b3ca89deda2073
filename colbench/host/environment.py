"""`colbench env`: what this machine offers and what a sweep here would do."""

from __future__ import annotations

import os

from colbench.errors import UsageError
from colbench.host.launchers import LaunchEnv, detect
from colbench.results import metadata


def describe() -> str:
    import torch.distributed as dist

    from colbench.host.world import default_nprocs, resolve_backend

    vers = metadata.versions()
    gpus = metadata.gpus()
    backends = [
        name
        for name, ok in (
            ("gloo", dist.is_gloo_available()),
            ("nccl", dist.is_nccl_available()),
            ("mpi", dist.is_mpi_available()),
            ("ucc", dist.is_ucc_available()),
        )
        if ok
    ]
    try:
        launch = detect()
        launcher = launch_lines(launch) if launch else "none: colbench spawns its own ranks"
    except UsageError as exc:
        launcher = f"misconfigured: {exc}"
        launch = None
    spawning = launch is None
    backend = resolve_backend("auto", spawning, len(gpus), dist.is_nccl_available())
    lines = [
        f"colbench      {vers['colbench']}",
        f"torch         {vers['torch']}",
        f"cuda          {vers['cuda'] or 'none (CPU build or no driver)'}",
        f"nccl          {vers['nccl'] or 'not available'}",
        f"python        {vers['python']}",
        f"backends      {', '.join(backends) or 'none'}",
        f"gpus          {len(gpus)}"
        + "".join(f"\n  cuda:{i}      {name}" for i, name in enumerate(gpus)),
        f"cpu           {metadata.cpu_model()} ({os.cpu_count()} cores)",
        f"launcher      {launcher}",
        f"default run   --backend {backend}"
        + (f" --nprocs {default_nprocs(backend, len(gpus))}" if spawning else ""),
    ]
    env = metadata.allowed_env()
    if env:
        lines.append("environment   " + " ".join(f"{k}={v}" for k, v in env.items()))
    return "\n".join(lines)


def launch_lines(launch: LaunchEnv) -> str:
    """What the launcher says about the job; nodes it does not name are counted at run time."""

    def known(value: object) -> str:
        return "not given (counted when the ranks meet)" if value is None else str(value)

    hosts = launch.hosts
    shown = ", ".join(hosts[:8]) + (f", ... ({len(hosts)} in all)" if len(hosts) > 8 else "")
    return "\n".join(
        [
            launch.launcher,
            f"  rank        {launch.rank} (local rank {launch.local_rank})",
            f"  world size  {launch.world_size}",
            f"  local world {known(launch.local_world_size)}",
            f"  nodes       {known(launch.nnodes)}",
            f"  hosts       {shown or 'not listed by the launcher'}",
            f"  master      {launch.master_addr}:{launch.master_port}",
        ]
    )
