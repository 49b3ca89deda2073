"""Streams that never stop a run (colbench.host.supervise): a reader gone, a closed stream."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from colbench.host.supervise import Tolerant
from tests.conftest import REPO


def test_a_pipe_whose_reader_left_drops_lines_instead_of_raising() -> None:
    read, write = os.pipe()
    os.close(read)
    stream = Tolerant(os.fdopen(write, "w", buffering=1))
    assert stream.write("colbench: progress: 1/2 steps\n") > 0
    stream.flush()
    assert stream.broken
    assert stream.write("more\n") == 5  # dropped, quietly
    with contextlib.suppress(BrokenPipeError):
        stream.stream.close()


def test_a_closed_file_drops_lines() -> None:
    read, write = os.pipe()
    os.close(read)
    inner = os.fdopen(write, "w")
    inner.close()
    stream = Tolerant(inner)
    stream.write("x")
    stream.flush()
    assert stream.broken and not stream.isatty()


def test_guard_puts_dev_null_on_a_closed_stderr() -> None:
    # A process started with `2>&-`: Python leaves sys.stderr None, and the next file
    # opened would take descriptor 2.
    code = (
        "import os, sys\n"
        "from colbench.host.supervise import guard\n"
        "assert sys.stderr is None\n"
        "guard(); guard()\n"
        "print('to stderr', file=sys.stderr)\n"
        "fd = os.open(os.devnull, os.O_RDONLY)\n"
        "print(os.readlink('/proc/self/fd/2'), fd > 2, type(sys.stderr).__name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=False,
        stdout=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(2),
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.split() == ["/dev/null", "True", "Tolerant"]
