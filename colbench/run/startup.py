"""A rank's start-up: its device, the process group, the hang watchdog."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path
from typing import Any

from colbench import devices, launch, memory
from colbench.faults import Fault
from colbench.inflight import InFlight
from colbench.run import protocol
from colbench.run import watchdog as hang_watchdog
from colbench.run.job import RankJob
from colbench.run.outcome import finish_meta, kept_line
from colbench.run.prepare import _gpu_count


def _device_for(backend: str, local_rank: int, local_world_size: int) -> Any:
    import torch

    if backend == "nccl":
        # The launcher's own count, not ``local_world_size``: that falls back to the world
        # size, which on several nodes over-counts the ranks sharing this node's GPUs.
        # Spawned ranks have none: local rank = rank, one GPU each (run_sweep checked).
        index = devices.pick_cuda_index(
            local_rank, memory.declared_local_world_size(), _gpu_count()
        )
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        return device
    share_cpu_threads(local_world_size)
    return torch.device("cpu")


def share_cpu_threads(local_world_size: int) -> None:
    """Give each CPU rank its share of the host's cores for torch's intra-op threads.

    More threads than cores make every parallel region (data fill, verification) wait
    for a descheduled thread, milliseconds per tensor op, and idle OpenMP threads spin
    for a while after each region, stealing the core a collective is timed on.
    OMP_NUM_THREADS, when set, wins.
    """
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world_size)))


def init_process_group(
    job: RankJob, rank: int, device: Any, in_flight: InFlight | None = None
) -> Any:
    """Join the process group; returns the rendezvous store (for progress).

    With ``in_flight``, the hang watchdog is armed as the communicator starts: from then
    on a step that stops moving ends the rank with exit code 4 (--init-timeout for the
    start-up itself, which torch leaves unbounded on NCCL; --timeout after it).
    """
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=hang_watchdog.process_group_timeout_s(job.cfg.launch.timeout_s))
    kwargs: dict[str, Any] = {"rank": rank, "world_size": job.world_size, "timeout": timeout}
    if job.backend == "nccl":
        # Eager NCCL init: the communicator exists (and fails) here, not on the first call.
        kwargs["device_id"] = device
    # store_host None: env:// (an external launcher's MASTER_ADDR, or torchrun's store).
    store = launch.rendezvous(
        job.store_host,
        job.store_port,
        rank,
        job.world_size,
        job.cfg.launch.init_timeout_s,
        job.cfg.launch.timeout_s,
    )
    if in_flight is not None:
        in_flight.store = store
        in_flight.step(hang_watchdog.COMM_STARTUP)
        _arm_watchdog(job, in_flight)
        Fault(rank, os.environ.get("COLBENCH_FAULT")).at_init()
    dist.init_process_group(job.backend, store=store, **kwargs)
    return store


def _arm_watchdog(job: RankJob, in_flight: InFlight) -> hang_watchdog.Watchdog:
    """Start the rank's hang watchdog (see :mod:`colbench.run.watchdog`)."""
    import torch.distributed as dist

    run_dir = Path(job.run_dir) if job.run_dir is not None else None
    launched = job.store_host is None
    connect = None
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if launched and host and port.isdigit():
        # A client of its own: the rank's store client may be held by the blocked call.
        def connect() -> Any:
            return dist.TCPStore(
                host,
                int(port),
                is_master=False,
                timeout=_dt.timedelta(seconds=hang_watchdog.EXCHANGE_S),
                wait_for_workers=False,
            )

    def on_verdict(failure: protocol.Failure) -> None:
        if run_dir is not None:
            finish_meta(run_dir, "failed", failure.meta())
            print(
                f"colbench: {kept_line(run_dir)}",
                file=sys.stderr,
            )

    return hang_watchdog.Watchdog(
        in_flight,
        world_size=job.world_size,
        timeout_s=job.cfg.launch.timeout_s,
        init_timeout_s=job.cfg.launch.init_timeout_s,
        run_dir=run_dir,
        launched=launched,
        connect=connect,
        on_verdict=on_verdict,
    ).start()
