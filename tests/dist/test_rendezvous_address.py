"""A rendezvous address where no torch store answers, met by real ranks under the env
launcher: every wait ends within --init-timeout (plus a grace) in one line that names the
address and what answered there, with a documented exit code, never a hang.

The peers are real listening sockets on free ports of 127.0.0.1, served by threads of
this test: one that accepts and never answers, an HTTP server, one that closes every
connection, and a store that answers colbench's probe and then goes quiet (as a store
whose host stops mid-exchange does).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from colbench.host.launchers import free_port
from colbench.host.launchers.rendezvous import QUESTION, STORE_ANSWER, who_answers
from tests.conftest import run_colbench

#: Most waits below run out in full: short, as its length changes none of the verdicts.
INIT_TIMEOUT_S = 3
#: Generous for a busy 2-core machine: interpreter and torch start-up, the timeout
#: itself, the grace of a stuck client (STUCK_GRACE_S); never the hang it replaces.
BOUND_S = 60
QUICK = ["sweep", "--backend", "gloo", "--op", "all_reduce", "--sizes", "1K", "-n", "1", "-w",
         "0", "--no-table", "--no-progress", "--init-timeout", str(INIT_TIMEOUT_S)]  # fmt: skip


def _hold(conn: socket.socket) -> None:
    """Accept and never answer: read whatever comes until the client leaves."""
    while conn.recv(4096):
        pass


def _http(conn: socket.socket) -> None:
    conn.recv(4096)
    conn.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<html></html>\n")


def _close(conn: socket.socket) -> None:
    pass


def _store_then_quiet(conn: socket.socket) -> None:
    """Answer colbench's probe as a store does; then say nothing to torch's client."""
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
        if data == QUESTION:
            conn.sendall(STORE_ANSWER)
            data = b""


@contextmanager
def listener(serve: Callable[[socket.socket], None]) -> Iterator[int]:
    """A real listening socket on a free port whose connections ``serve`` answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    conns: list[socket.socket] = []

    def one(conn: socket.socket) -> None:
        try:
            serve(conn)
        except OSError:
            pass
        finally:
            if serve is not _hold:
                conn.close()

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()
        for conn in conns:
            conn.close()


def launched_rank(rank: int, port: int, out: Path) -> tuple[int, list[str], float]:
    """Rank ``rank`` of a world of 2 under the env launcher, rendezvous at 127.0.0.1:port:
    (exit code, stderr lines, seconds)."""
    env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank),
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
    started = time.monotonic()
    proc = run_colbench(*QUICK, "--out", str(out), env=env, timeout=BOUND_S + 60)
    elapsed_s = time.monotonic() - started
    assert proc.stdout == ""
    return proc.returncode, proc.stderr.splitlines(), elapsed_s


def one_line(lines: list[str]) -> str:
    """The only stderr line: colbench's, with no torch C++ log around it."""
    assert len(lines) == 1, "\n".join(lines)
    assert lines[0].startswith("colbench: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("serve", "code", "said"),
    [
        (_hold, 4, "127.0.0.1:{port} accepted the connection but nothing answered within 3 s"),
        (_http, 2, "127.0.0.1:{port} answered but is not a torch store (it sent "
                   "'HTTP/1.0 400 Bad Request')"),
        (_close, 4, "nothing answered at 127.0.0.1:{port} within 3 s (it closed the "
                    "connection without answering)"),
        (_store_then_quiet, 4, "the store stopped answering this rank"),
    ],
    ids=["silent", "http", "closes", "store-goes-quiet"],
)  # fmt: skip
def test_a_client_rank_meeting_no_store_says_what_answered(
    tmp_path: Path, serve: Callable[[socket.socket], None], code: int, said: str
) -> None:
    with listener(serve) as port:
        rc, lines, elapsed_s = launched_rank(1, port, tmp_path / "run")
    line = one_line(lines)
    assert rc == code, line
    assert said.format(port=port) in line, line
    assert f"127.0.0.1:{port}" in line
    assert elapsed_s < BOUND_S


def test_nothing_listening_is_exit_4_within_init_timeout(tmp_path: Path) -> None:
    port = free_port()
    rc, lines, elapsed_s = launched_rank(1, port, tmp_path / "run")
    line = one_line(lines)
    assert rc == 4, line
    assert f"nothing answered at 127.0.0.1:{port} within 3 s (connection refused)" in line
    assert "--init-timeout 3 s" in line
    assert elapsed_s < BOUND_S


@pytest.mark.parametrize("serve", [_hold, _http], ids=["silent", "http"])
def test_rank_0_on_a_taken_port_names_what_holds_it(
    tmp_path: Path, serve: Callable[[socket.socket], None]
) -> None:
    with listener(serve) as port:
        rc, lines, elapsed_s = launched_rank(0, port, tmp_path / "run")
    line = one_line(lines)
    assert rc == 2, line
    assert f"cannot host the rendezvous store on port {port}, which is taken" in line
    assert "set MASTER_PORT to a free port" in line
    assert elapsed_s < BOUND_S


def test_the_probe_knows_a_real_store_and_leaves_it_working() -> None:
    import datetime

    import torch.distributed as dist

    server = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    port = server.port
    assert who_answers("127.0.0.1", port, 5.0) == (f"a torch store answers at 127.0.0.1:{port}")
    # torch's own client still joins after the probe's connection came and went.
    client = dist.TCPStore("127.0.0.1", port, 2, is_master=False,
                           timeout=datetime.timedelta(seconds=10))  # fmt: skip
    client.set("after-probe", "yes")
    assert server.get("after-probe") == b"yes"
