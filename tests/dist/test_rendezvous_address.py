"""A rendezvous address where no torch store answers, met by real ranks under the env
launcher: every wait ends within --init-timeout (plus a grace) in one line that names the
address and what answered there, with a documented exit code, never a hang.

The peers are real listening sockets on free ports of 127.0.0.1, served by threads of
this test: one that accepts and never answers, an HTTP server, one that closes every
connection, and a store that answers colbench's probe and then goes quiet (as a store
whose host stops mid-exchange does).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from colbench.host.launchers.rendezvous import QUESTION, STORE_ANSWER, free_port, who_answers
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
        # close() alone leaves the accepting thread blocked (and the port bound) until the
        # worker exits; shutdown wakes it.
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        for conn in conns:
            conn.close()


#: What a launched rank met: (exit code, stdout, stderr lines, seconds).
Met = tuple[int, str, list[str], float]


def launched_rank(rank: int, port: int, out: Path) -> Met:
    """Rank ``rank`` of a world of 2 under the env launcher, rendezvous at 127.0.0.1:port."""
    env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank),
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
    started = time.monotonic()
    proc = run_colbench(*QUICK, "--out", str(out), env=env, timeout=BOUND_S + 60)
    return proc.returncode, proc.stdout, proc.stderr.splitlines(), time.monotonic() - started


#: Every launched rank of this file, by case: (rank, what serves its port; None: nothing
#: listens). Rank 1 cases meet no store as a client; rank 0 cases cannot host it.
CASES: dict[str, tuple[int, Callable[[socket.socket], None] | None]] = {
    "silent": (1, _hold), "http": (1, _http), "closes": (1, _close),
    "store-goes-quiet": (1, _store_then_quiet), "nothing": (1, None),
    "rank0-silent": (0, _hold), "rank0-http": (0, _http),
}  # fmt: skip


@pytest.fixture(scope="module")
def met(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, Met]]:
    """Each case's port and what its rank met. The ranks spend their time waiting out
    --init-timeout (and a stuck client's grace), not computing: they run at once, each
    on its own port with its own listener, and each is timed from its own start."""
    with ExitStack() as stack:
        ports = {
            case: free_port() if serve is None else stack.enter_context(listener(serve))
            for case, (_, serve) in CASES.items()
        }
        outs = {case: tmp_path_factory.mktemp(case) / "run" for case in CASES}
        with ThreadPoolExecutor(len(CASES)) as pool:
            futures = {
                case: pool.submit(launched_rank, rank, ports[case], outs[case])
                for case, (rank, _) in CASES.items()
            }
            return {case: (ports[case], future.result()) for case, future in futures.items()}


def one_line(stdout: str, lines: list[str]) -> str:
    """The only stderr line: colbench's, with no torch C++ log around it (nothing on stdout)."""
    assert stdout == ""
    assert len(lines) == 1, "\n".join(lines)
    assert lines[0].startswith("colbench: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("case", "code", "said"),
    [
        ("silent", 4, "127.0.0.1:{port} accepted the connection but nothing answered within 3 s"),
        ("http", 2, "127.0.0.1:{port} answered but is not a torch store (it sent "
                    "'HTTP/1.0 400 Bad Request')"),
        ("closes", 4, "nothing answered at 127.0.0.1:{port} within 3 s (it closed the "
                      "connection without answering)"),
        ("store-goes-quiet", 4, "the store stopped answering this rank"),
    ],
    ids=["silent", "http", "closes", "store-goes-quiet"],
)  # fmt: skip
def test_a_client_rank_meeting_no_store_says_what_answered(
    met: dict[str, tuple[int, Met]], case: str, code: int, said: str
) -> None:
    port, (rc, stdout, lines, elapsed_s) = met[case]
    line = one_line(stdout, lines)
    assert rc == code, line
    assert said.format(port=port) in line, line
    assert f"127.0.0.1:{port}" in line
    assert elapsed_s < BOUND_S


def test_nothing_listening_is_exit_4_within_init_timeout(
    met: dict[str, tuple[int, Met]],
) -> None:
    port, (rc, stdout, lines, elapsed_s) = met["nothing"]
    line = one_line(stdout, lines)
    assert rc == 4, line
    assert f"nothing answered at 127.0.0.1:{port} within 3 s (connection refused)" in line
    assert "--init-timeout 3 s" in line
    assert elapsed_s < BOUND_S


@pytest.mark.parametrize("case", ["rank0-silent", "rank0-http"], ids=["silent", "http"])
def test_rank_0_on_a_taken_port_names_what_holds_it(
    met: dict[str, tuple[int, Met]], case: str
) -> None:
    port, (rc, stdout, lines, elapsed_s) = met[case]
    line = one_line(stdout, lines)
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
