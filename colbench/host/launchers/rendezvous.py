"""Every rank meets the others through one TCPStore, within ``--init-timeout``; and who
answers at a rendezvous address, asked first in torch's own store protocol, in bounded time."""

from __future__ import annotations

import datetime as _dt
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from colbench.errors import ExitCode, RankFailure, UsageError


class RendezvousTimeout(RankFailure):
    """The ranks of a job did not all meet within ``--init-timeout``."""

    exit_code = ExitCode.TIMEOUT


#: Each rank's key when it has checked in; their count, kept by the store (one round trip
#: to poll, at any size).
_ARRIVED, _ARRIVED_COUNT = "colbench/arrived/{}", "colbench/arrived-count"


def _wait_for_all(store: Any, world_size: int, deadline: float) -> None:
    """Poll the arrival count until every rank is in, or raise TimeoutError at ``deadline``:
    not ``store.wait``, whose timeout makes torch's socket layer print its own warnings
    (``[c10d] waitForInput ... timed out``) ahead of colbench's one line naming the missing."""
    delay = 0.01
    while store.add(_ARRIVED_COUNT, 0) < world_size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the other ranks never all checked in")
        time.sleep(min(delay, left))
        delay = min(delay * 1.5, 0.2)


def arrived_ranks(store: Any, world_size: int) -> list[int]:
    """Ranks that have checked in at the rendezvous on ``store`` (raises if it is gone)."""
    return [r for r in range(world_size) if store.check([_ARRIVED.format(r)])]


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


#: How long past ``--init-timeout`` a rank stuck inside torch's store client is given
#: before it ends itself: torch's own timeouts normally end the wait well within it.
STUCK_GRACE_S = 5.0


def _probe(host: str, port: int, rank: int, deadline: float, init_timeout_s: float) -> None:
    """Wait, within the deadline, until a torch store answers at host:port (:func:`probe`),
    so that torch's client never meets anything else."""
    try:
        probe(host, port, deadline, init_timeout_s)
    except NotAStore as exc:
        raise UsageError(
            f"rank {rank}: start-up failed: {exc}; MASTER_ADDR and MASTER_PORT must name the "
            "store that rank 0 (or torchrun) hosts"
        ) from None


def _serve(host: str, port: int, world_size: int, left: _dt.timedelta) -> Any:
    """Rank 0's store server, as env:// makes it minus its wait for every client inside
    the constructor: rank 0 checks in like the others, so a timeout can name the missing
    ranks."""
    import torch.distributed as dist

    try:
        return dist.TCPStore(
            host,
            port,
            world_size,
            is_master=True,
            timeout=left,
            wait_for_workers=False,
            multi_tenant=True,
        )
    except RuntimeError as exc:
        if "listen" not in str(exc):
            raise
        there = who_answers(host or "127.0.0.1", port, 1.0)
        taken = "another torch store (another job's?)" if "torch store answers" in there else there
        raise UsageError(
            f"rank 0: start-up failed: cannot host the rendezvous store on port {port}, "
            f"which is taken: {taken}; set MASTER_PORT to a free port"
        ) from None


def _open_store(
    host: str | None,
    port: int | None,
    rank: int,
    world_size: int,
    deadline: float,
    init_timeout_s: float,
) -> Any:
    """This rank's TCPStore, server or client, without waiting for the other ranks."""
    import torch.distributed as dist

    def left() -> _dt.timedelta:
        return _dt.timedelta(seconds=max(0.5, deadline - time.monotonic()))

    env_host, env_port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    # torchrun's agent hosts the store and every worker is a client (torch's own test).
    if host is None and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        if env_port.isdigit():
            _probe(env_host, int(env_port), rank, deadline, init_timeout_s)
        return next(dist.rendezvous("env://", rank=rank, world_size=world_size, timeout=left()))[0]
    if host is None and world_size == 1 and not env_port:
        # A world of one needs no address; a private store keeps torch's init happy.
        return dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=left())
    if host is None and rank == 0:
        return _serve(env_host, int(env_port), world_size, left())
    host, port = (env_host, int(env_port)) if host is None else (host, port)
    assert port is not None
    # torch's client alone would retry a refused connection past the deadline, and wait
    # for ever on a peer that accepts and never answers.
    _probe(host, port, rank, deadline, init_timeout_s)
    return dist.TCPStore(host, port, world_size, is_master=False, timeout=left())


def _watch_stuck(deadline: float, say: Callable[[], str]) -> threading.Event:
    """Set the returned event when the rendezvous is over; until then, a daemon thread
    ends the process (exit 4, ``say()`` on stderr) once the deadline and a grace have
    passed. torch's store client blocks without limit on a store that stops answering
    mid-exchange (its host stopped, say), and nothing in Python can interrupt it."""
    over = threading.Event()

    def watch() -> None:
        if over.wait(max(0.0, deadline - time.monotonic()) + STUCK_GRACE_S):
            return
        try:
            print(f"colbench: error: {say()}", file=sys.stderr, flush=True)
        finally:
            os._exit(int(ExitCode.TIMEOUT))

    threading.Thread(target=watch, name="colbench-rendezvous-deadline", daemon=True).start()
    return over


def rendezvous(
    host: str | None,
    port: int | None,
    rank: int,
    world_size: int,
    init_timeout_s: float,
    timeout_s: float,
) -> Any:
    """Meet every rank through a TCPStore within ``init_timeout_s``; returns the store, its
    timeout now ``timeout_s``. ``host`` None means env:// (MASTER_ADDR and MASTER_PORT;
    torchrun's agent store when it offers one)."""
    started = time.monotonic()
    deadline = started + init_timeout_s
    if host is None:
        host_at, port_at = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    else:
        host_at, port_at = host, str(port)
    where = f"{host_at}:{port_at}"

    def failed(why: str) -> str:
        return (
            f"start-up failed: rendezvous of {world_size} ranks at {where} did not complete "
            f"after {time.monotonic() - started:.0f} s (--init-timeout {init_timeout_s:g} s)"
            f"{why}"
        )

    def stuck() -> str:
        there = who_answers(host_at, int(port_at), 1.0) if port_at.isdigit() else ""
        if there.startswith("a torch store answers"):
            there = "a new connection to it is answered"
        return (
            f"rank {rank} on {socket.gethostname()} (pid {os.getpid()}) failed during "
            f"rendezvous: {failed(f': the store stopped answering this rank ({there})')}"
        )

    store: Any = None
    over = _watch_stuck(deadline, stuck)
    try:
        store = _open_store(host, port, rank, world_size, deadline, init_timeout_s)
        store.set(_ARRIVED.format(rank), socket.gethostname())
        store.add(_ARRIVED_COUNT, 1)
        _wait_for_all(store, world_size, deadline)
    except UsageError:
        raise
    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        missing = _missing_ranks(store, world_size) if store is not None else ""
        raise RendezvousTimeout(failed(f"{missing}: {first}")) from None
    finally:
        over.set()
    store.set_timeout(_dt.timedelta(seconds=timeout_s))
    return store


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free now (only for tests; runs let TCPStore pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# Who answers at the rendezvous address, before torch's client connects:
# torch's TCPStore client waits without limit on a peer that accepts its connection and
# never answers (its handshake reads have no timeout: a rank stayed blocked for 200 s with
# ``--init-timeout 10``), and against a peer that answers something else it retries for its
# whole timeout and then prints a page of C++ log ending in "Expected: 13783, Got:
# 1347703880" (an HTTP server's "HTTP" read as a number). Asking first, in the store's own
# words and with our own deadline, turns both into one line before torch connects.
#
# The question is what every torch client sends first, VALIDATE with torch's magic number,
# then ADD of 0 to a key of colbench's own, whose answer is the key's value: 8 bytes, all
# zero. Query numbers and the layout are torch's ``TCPStoreBackend.hpp`` (``QueryType``:
# VALIDATE 0, ADD 4; sizes and values little-endian 64-bit), the same since torch 2.0.

_VALIDATE, _ADD = 0, 4
_MAGIC = 0x3C85F7CE
_KEY = b"colbench/probe"
#: The whole question, sent at once.
QUESTION = (
    struct.pack("<BI", _VALIDATE, _MAGIC)
    + struct.pack("<BQ", _ADD, len(_KEY))
    + _KEY
    + struct.pack("<q", 0)
)
#: A store's answer: the probe key's value, never changed from 0.
STORE_ANSWER = struct.pack("<q", 0)
#: How much of a stranger's answer is read to show it.
_SHOWN_BYTES = 60


class NothingAnswered(TimeoutError):
    """Nothing at the address answered as a store before the deadline."""


class NotAStore(UsageError):
    """Something answered at the address, and it is not a torch store."""


def shown(data: bytes) -> str:
    """A stranger's answer, readable on one line: its first line of text, else hex."""
    text = data.split(b"\n", 1)[0].rstrip(b"\r")
    if text and all(32 <= b < 127 for b in text):
        return repr(text.decode("ascii"))
    return f"{len(data)} bytes: {data[:16].hex(' ')}{' ...' if len(data) > 16 else ''}"


def _reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "connecting timed out"
    return exc.strerror or type(exc).__name__


def _ask(sock: socket.socket, deadline: float) -> bytes | None:
    """The peer's answer to :data:`QUESTION`: 8 bytes or fewer if it closed, None if it
    stayed silent until ``deadline``."""
    sock.sendall(QUESTION)
    answer = b""
    while len(answer) < len(STORE_ANSWER):
        left = deadline - time.monotonic()
        if left <= 0:
            return answer or None
        sock.settimeout(left)
        try:
            chunk = sock.recv(len(STORE_ANSWER) - len(answer))
        except TimeoutError:
            return answer or None
        if not chunk:
            return answer
        answer += chunk
    return answer


def _rest(sock: socket.socket, answer: bytes) -> bytes:
    """More of a stranger's answer, to show it (whatever comes within a moment)."""
    sock.settimeout(0.2)
    try:
        while len(answer) < _SHOWN_BYTES:
            chunk = sock.recv(_SHOWN_BYTES - len(answer))
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    return answer


def probe(host: str, port: int, deadline: float, timeout_s: float) -> None:
    """Return once a torch store answers at ``host:port``; raise before ``deadline``
    (``time.monotonic``) otherwise: :class:`NothingAnswered` when nothing did (refused,
    silent, or closing every connection), :class:`NotAStore` when something else did,
    OSError when ``host`` does not resolve. ``timeout_s`` is only for the message."""
    where = f"{host}:{port}"
    why = "nothing accepted the connection"
    delay_s = 0.05
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise NothingAnswered(f"nothing answered at {where} within {timeout_s:g} s ({why})")
        try:
            sock = socket.create_connection((host, port), timeout=min(1.0, left))
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host!r}: {exc.strerror}") from None
        except OSError as exc:
            why = _reason(exc)
        else:
            with sock:
                try:
                    answer = _ask(sock, deadline)
                except OSError as exc:
                    answer, why = b"", _reason(exc)
                if answer == STORE_ANSWER:
                    return
                if answer is None:
                    raise NothingAnswered(
                        f"{where} accepted the connection but nothing answered within "
                        f"{timeout_s:g} s: not a torch store, or a stopped one"
                    )
                if answer:
                    raise NotAStore(
                        f"{where} answered but is not a torch store (it sent "
                        f"{shown(_rest(sock, answer))})"
                    )
                why = "it closed the connection without answering"
        # A store that is still starting refuses or drops connections for a moment.
        time.sleep(min(delay_s, max(0.0, deadline - time.monotonic())))
        delay_s = min(delay_s * 2, 1.0)


def who_answers(host: str, port: int, wait_s: float) -> str:
    """One phrase saying what answers at ``host:port`` now, waiting at most ``wait_s``."""
    try:
        probe(host, port, time.monotonic() + wait_s, wait_s)
    except (NotAStore, OSError) as exc:  # NothingAnswered is a TimeoutError
        return str(exc)
    return f"a torch store answers at {host}:{port}"
