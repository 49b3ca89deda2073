"""Who answers at a rendezvous address, asked in torch's own store protocol, in bounded time.

torch's TCPStore client waits without limit on a peer that accepts its connection and
never answers (its handshake reads have no timeout: a rank stayed blocked for 200 s with
``--init-timeout 10``), and against a peer that answers something else it retries for its
whole timeout and then prints a page of C++ log ending in "Expected: 13783, Got:
1347703880" (an HTTP server's "HTTP" read as a number). Asking first, in the store's own
words and with our own deadline, turns both into one line before torch connects.

The question is what every torch client sends first, VALIDATE with torch's magic number,
then ADD of 0 to a key of colbench's own, whose answer is the key's value: 8 bytes, all
zero. Query numbers and the layout are torch's ``TCPStoreBackend.hpp`` (``QueryType``:
VALIDATE 0, ADD 4; sizes and values little-endian 64-bit), the same since torch 2.0.
"""

from __future__ import annotations

import socket
import struct
import time

from colbench.errors import UsageError

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
    except (NothingAnswered, NotAStore) as exc:
        return str(exc)
    except OSError as exc:
        return str(exc)
    return f"a torch store answers at {host}:{port}"
