"""Every rank meets the others through one TCPStore, within ``--init-timeout``."""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from colbench.errors import ExitCode, RankFailure


class RendezvousTimeout(RankFailure):
    """The ranks of a job did not all meet within ``--init-timeout``."""

    exit_code = ExitCode.TIMEOUT


def _arrival_key(rank: int) -> str:
    return f"colbench/arrived/{rank}"


#: Ranks checked in so far, counted by the store (one round trip to poll, at any size).
_ARRIVED_COUNT = "colbench/arrived-count"


def _wait_for_all(store: Any, world_size: int, deadline: float) -> None:
    """Poll the arrival count until every rank is in, or raise TimeoutError at ``deadline``.

    Not ``store.wait``: torch's socket layer prints its own warnings when a wait times
    out (``[c10d] waitForInput ... timed out``), ahead of colbench's one line that names
    the missing ranks; polling leaves colbench's line the only one.
    """
    delay = 0.01
    while store.add(_ARRIVED_COUNT, 0) < world_size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the other ranks never all checked in")
        time.sleep(min(delay, left))
        delay = min(delay * 1.5, 0.2)


def arrived_ranks(store: Any, world_size: int) -> list[int]:
    """Ranks that have checked in at the rendezvous on ``store`` (raises if it is gone)."""
    return [r for r in range(world_size) if store.check([_arrival_key(r)])]


def shown_ranks(ranks: Sequence[object], limit: int = 8) -> str:
    """The first ``limit`` of ``ranks``, comma-separated (a 1000-rank job stays one line)."""
    return ", ".join(map(str, ranks[:limit])) + (", ..." if len(ranks) > limit else "")


def _missing_ranks(store: Any, world_size: int) -> str:
    try:
        arrived = arrived_ranks(store, world_size)
    except (RuntimeError, OSError):
        return "; the store went away (its host, rank 0 or the launcher, gave up or died)"
    missing = [r for r in range(world_size) if r not in arrived]
    if not missing:
        return ""
    return f"; {len(arrived)} of {world_size} ranks arrived, missing rank(s) {shown_ranks(missing)}"


def _agent_store() -> bool:
    # torchrun's agent hosts the store and every worker is a client (torch's own test).
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)


def _wait_listening(host: str, port: int, deadline: float, what: str) -> None:
    """Poll until something accepts TCP connections at host:port.

    torch's TCPStore client retries a refused connection for its whole timeout and then
    once more, so it alone would overrun ``--init-timeout``; a bare connection that is
    closed at once does not count as a store client.
    """
    delay = 0.05
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"nothing accepted connections at {what}")
        try:
            socket.create_connection((host, port), timeout=min(1.0, left)).close()
            return
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host!r}: {exc.strerror}") from None
        except OSError:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)


def _open_store(
    host: str | None, port: int | None, rank: int, world_size: int, deadline: float, where: str
) -> Any:
    """This rank's TCPStore, server or client, without waiting for the other ranks."""
    import torch.distributed as dist

    def left() -> _dt.timedelta:
        return _dt.timedelta(seconds=max(0.5, deadline - time.monotonic()))

    env_host, env_port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if host is None and _agent_store():
        if env_port.isdigit():
            _wait_listening(env_host, int(env_port), deadline, where)
        return next(dist.rendezvous("env://", rank=rank, world_size=world_size, timeout=left()))[0]
    if host is None and world_size == 1 and not env_port:
        # A world of one needs no address; a private store keeps torch's init happy.
        return dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=left())
    if host is None and rank == 0:
        # What env:// does, minus its wait for every client inside the constructor:
        # rank 0 checks in like the others, so a timeout can name the missing ranks.
        return dist.TCPStore(
            env_host,
            int(env_port),
            world_size,
            is_master=True,
            timeout=left(),
            wait_for_workers=False,
            multi_tenant=True,
        )
    host, port = (env_host, int(env_port)) if host is None else (host, port)
    assert port is not None
    _wait_listening(host, port, deadline, where)
    return dist.TCPStore(host, port, world_size, is_master=False, timeout=left())


def rendezvous(
    host: str | None,
    port: int | None,
    rank: int,
    world_size: int,
    init_timeout_s: float,
    timeout_s: float,
) -> Any:
    """Meet every rank through a TCPStore within ``init_timeout_s``; returns the store.

    ``host`` None means env:// (MASTER_ADDR/MASTER_PORT; torchrun's agent store when it
    offers one). After every rank has checked in, the store's timeout becomes
    ``timeout_s``, the run's process-group timeout.
    """
    started = time.monotonic()
    deadline = started + init_timeout_s
    if host is not None:
        where = f"{host}:{port}"
    else:
        where = f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}"
    store: Any = None
    try:
        store = _open_store(host, port, rank, world_size, deadline, where)
        store.set(_arrival_key(rank), socket.gethostname())
        store.add(_ARRIVED_COUNT, 1)
        _wait_for_all(store, world_size, deadline)
    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        missing = _missing_ranks(store, world_size) if store is not None else ""
        raise RendezvousTimeout(
            f"start-up failed: rendezvous of {world_size} ranks at {where} did not complete after "
            f"{time.monotonic() - started:.0f} s (--init-timeout {init_timeout_s:g} s)"
            f"{missing}: {first}"
        ) from None
    store.set_timeout(_dt.timedelta(seconds=timeout_s))
    return store


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free now (only for tests; runs let TCPStore pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
