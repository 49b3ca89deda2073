"""stdout and stderr that never stop a run.

A run's results are its files; what it prints is a view of them. A long run started as
``colbench p2p 2>&- &``, or piped into ``head`` (whose reader leaves early), or whose
log pipe broke, would otherwise die on its next line: Python ignores SIGPIPE and raises
BrokenPipeError instead, and a closed stderr is None (``sys.stderr.write`` fails). So
the parent and every rank write through :class:`Tolerant`, which drops what can no
longer be written, and a closed descriptor 1 or 2 is reopened on /dev/null first (else
the next file opened would take its number and receive gloo's warnings).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO, cast


class Tolerant:
    """A text stream whose writes and flushes never raise: once one fails (EPIPE, EBADF,
    a closed file), the rest are dropped."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return int(self.stream.write(text))
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        # fileno, encoding, buffer...: what print, rich and click may ask of a stream.
        return getattr(self.stream, name)


def _reopen_if_closed(fd: int) -> bool:
    """Put /dev/null on ``fd`` when it is closed; whether it was."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return True


def guard() -> None:
    """Make this process's stdout and stderr :class:`Tolerant` (idempotent)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        reopened = _reopen_if_closed(fd)
        stream = getattr(sys, name)
        if isinstance(stream, Tolerant):
            continue
        if stream is None or reopened:
            stream = open(fd, "w", buffering=1, closefd=False, encoding="utf-8")  # noqa: SIM115
        setattr(sys, name, cast(TextIO, Tolerant(stream)))
