"""A command's output on stdout, written so that losing it is one clear outcome.

Where stdout goes is the user's choice: a pipe whose reader stops early
(``colbench replay --dry-run TRACE | head -1``), a full disk (``> /dev/full``), or
nothing at all (``>&-``). Each write here that fails raises :class:`OutputLost`, which
is no OSError, so the CLI framework (which would turn a broken pipe into exit 1, colbench's
"wrong results") passes it to ``colbench.cli.main``: a reader that went away is exit 141
without a word, as a shell reports SIGPIPE; any other failure one line and exit 2.
"""

from __future__ import annotations

import errno
import os
import sys


class OutputLost(Exception):
    """stdout cannot take what a command writes."""

    def __init__(self, reason: str, broken_pipe: bool = False) -> None:
        super().__init__(reason)
        self.broken_pipe = broken_pipe


def lost(exc: OSError) -> OutputLost:
    """``exc`` (from writing or flushing stdout) as OutputLost."""
    broken = exc.errno == errno.EPIPE
    return OutputLost(exc.strerror or str(exc), broken_pipe=broken)


def write(text: str) -> None:
    """``text`` and a newline on stdout, every byte, flushed: a failure shows here, not at
    exit. Under ``python -u`` (PYTHONUNBUFFERED) stdout's text layer writes straight to the
    file, takes a partial write (a pipe whose reader left midway) as done and drops the
    rest: a long output would end 0, cut. So the bytes go out here until all are written,
    and the next write after a reader left fails."""
    stream = sys.stdout
    if stream is None:  # Python's stdout when the process started with fd 1 closed
        raise OutputLost("standard output is closed")
    binary = getattr(stream, "buffer", None)
    try:
        if binary is None:  # a text stream with no bytes under it
            stream.write(text + "\n")
            stream.flush()
            return
        stream.flush()  # what was printed before goes first
        data = (text + "\n").encode(stream.encoding, stream.errors or "strict")
        while data:
            written = binary.write(data)
            if written is None:  # a non-blocking stdout that is full: nothing was taken
                raise OutputLost("standard output would block")
            data = data[written:]
        binary.flush()
    except OSError as exc:
        raise lost(exc) from None


def flush() -> None:
    """Flush what other code printed to stdout, as OutputLost if it cannot be."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as exc:
        raise lost(exc) from None


def silence() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit does not fail
    again on what is still buffered (it would print 'Exception ignored' and exit 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno() if sys.stdout is not None else 1)
        os.close(null)
    except (OSError, ValueError):
        pass


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and its noun in the right number ("1 row", "3 rows", never "1 rows"), for
    every line colbench prints; ``many`` for a noun whose plural is not noun + s."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
