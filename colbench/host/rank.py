"""A rank's life, whatever its task: join the world, run the task, leave."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from colbench.errors import UsageError
from colbench.host.inflight import InFlight
from colbench.host.job import RankJob
from colbench.host.launchers import devices, emulation
from colbench.host.launchers.env import local_world_size_from_env
from colbench.host.pace import KEY, Pace, ProgressLines, in_thread, lines_wanted, say
from colbench.host.startup import _device_for, init_process_group


class _Gathers(Protocol):
    """The side group's one collective :func:`meet_peers` needs (colbench.bench.groups'
    ``SideGroup`` is one): the host knows tasks, not the sweep that makes one."""

    def gather_objects(self, mine: Any) -> list[Any]: ...


class _Introduction(Protocol):
    @property
    def digest(self) -> object: ...
    @property
    def rank(self) -> int: ...


PeerT = TypeVar("PeerT", bound=_Introduction)


def rank_main(job: RankJob, rank: int, local_rank: int, in_flight: InFlight) -> None:
    """One rank's whole life: join the group, run its task, leave."""
    import torch.distributed as dist

    device = _device_for(
        job.backend,
        local_rank,
        local_world_size_from_env(job.world_size),
        job.launch.ranks_per_gpu,
    )
    in_flight.phase = "rendezvous"
    in_flight.store = init_process_group(job, rank, device, in_flight)
    stop_lines = keep_pace(job, rank, in_flight)
    try:
        in_flight.step("setup")
        job.task.run_rank(job, rank, device, in_flight)
    except BaseException as exc:
        # Stamp the failure now: tearing down would close connections and make the
        # peers fail too, and the first failure must stay recognisable as the first.
        in_flight.failed(exc)
        raise
    finally:
        stop_lines()
    # Only a clean run tears down: after a failure the process exits at once, and a
    # teardown could block on peers that are gone.
    in_flight.phase = "shutdown"
    dist.destroy_process_group()


def keep_pace(job: RankJob, rank: int, in_flight: InFlight) -> Callable[[], None]:
    """Rank 0's forecast (``in_flight.pace``, colbench.host.pace), published for a spawning
    parent's progress lines; a launched rank 0 prints them itself, from a thread. Returns
    what stops that thread."""
    if rank != 0:
        return _nothing
    started_at = job.started_at or time.time()
    store = in_flight.store
    spawned = job.store_host is not None and store is not None
    in_flight.pace = pace = Pace(
        started_at, say=say, publish=_publisher(store) if spawned else None
    )
    if spawned or not lines_wanted(job.output.progress, job.task.live_bar):
        return _nothing

    def source() -> tuple[Any, str]:
        return pace.forecast, in_flight.describe() if in_flight.seq else ""

    return in_thread(ProgressLines(source, started_at))


def _nothing() -> None:
    pass


def _publisher(store: Any) -> Callable[[str], None]:
    def publish(text: str) -> None:
        # Failing, the parent's lines go without numbers; the run goes on.
        with contextlib.suppress(RuntimeError, OSError):
            store.set(KEY, text)

    return publish


def gpu_record(device: Any, ranks_per_gpu: int) -> dict[str, Any]:
    """This rank's GPU for meta.json: index and bus id, and under --ranks-per-gpu the
    emulated node's NCCL variables as this rank saw them (they differ per rank)."""
    if device.type != "cuda":
        return {}
    record: dict[str, Any] = {"index": device.index, "bus_id": devices.gpu_bus_id(device)}
    if ranks_per_gpu > 1:
        record["nccl_env"] = {name: os.environ.get(name) for name in emulation.VARIABLES}
    return record


def exit_now(code: int) -> NoReturn:
    """End a rank that has finished cleanly, skipping the interpreter's teardown.

    Everything is on disk and the process group is gone by now, but torch's C++
    teardown at interpreter exit sometimes aborts a clean rank ("terminate called without
    an active exception", no Python frame left; about 1 run in 20 on a busy 2-core
    machine), and a SIGABRT would turn a complete run into a failed one.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def meet_peers(side: _Gathers, me: PeerT, disagreement: str) -> list[PeerT]:
    """Gather every rank's introduction (a :class:`Peer`, or another task's with a
    ``digest`` and a ``rank``); stop with ``disagreement`` (naming the ``{ranks}``) if
    their digests differ from rank 0's.

    This is the first collective after the side group exists, so ranks started with
    different plans are told so before any of them waits in a collective the others
    will never call.
    """
    peers: list[PeerT] = side.gather_objects(me)
    differing = [p.rank for p in peers if p.digest != peers[0].digest]
    if differing:
        raise UsageError(disagreement.format(ranks=", ".join(map(str, differing))))
    return peers
