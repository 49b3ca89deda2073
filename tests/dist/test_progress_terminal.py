"""The progress bar and the table sharing one real terminal narrower than a table line."""

from __future__ import annotations

import fcntl
import math
import os
import pty
import re
import struct
import sys
import termios
import time
from pathlib import Path

from colbench.results.reporters.console import format_line
from colbench.results.rows import load
from tests.conftest import REPO

# CSI sequences (colour, cursor moves, erase, cursor show/hide) and OSC titles.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _run_in_terminal(args: list[str], columns: int, timeout_s: float = 120) -> str:
    """``python -m colbench ARGS`` with stdout and stderr on one pseudo-terminal of
    ``columns`` columns, as a user's shell runs it; the raw bytes the terminal got."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty's slave is already its stdin, stdout and stderr
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
            env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
            env.update(TERM="xterm-256color", PYTHONPATH=str(REPO))
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "colbench", *args], env)
        finally:
            os._exit(127)
    captured = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            captured += chunk
        else:
            os.kill(pid, 9)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, captured.decode(errors="replace")
    return captured.decode()


def _terminal_lines(raw: str, bar_label: str) -> list[str]:
    """What the terminal shows line by line, less the bar: a carriage return starts the
    line over, so each segment between them is a separate redraw."""
    lines = []
    for line in _ANSI.sub("", raw).split("\n"):
        for segment in line.split("\r"):
            if segment and not segment.startswith(bar_label):
                lines.append(segment)
    return lines


def _same_row(shown: str, expected: str) -> bool:
    """The same table line: every cell where it should be, each number equal up to the
    last digit shown (the CSV keeps 6 significant digits, so a value rebuilt from it
    can round the other way)."""
    if len(shown) != len(expected):
        return False
    cells, want = shown.split(), expected.split()
    if len(cells) != len(want):
        return False
    for cell, value in zip(cells, want, strict=True):
        try:
            if not math.isclose(float(cell), float(value), rel_tol=1e-3, abs_tol=0.011):
                return False
        except ValueError:
            if cell != value:
                return False
    return True


def test_bar_on_a_narrow_terminal_leaves_every_table_line_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    raw = _run_in_terminal(
        ["sweep", "--op", "all_reduce,all_gather", "--sizes", "1K-64K", "--nprocs", "2",
         "--progress", "--out", str(out)],
        columns=100,
    )  # fmt: skip
    assert "━" in raw, "the bar never showed: the test would prove nothing"
    shown = _terminal_lines(raw, "sweep")
    frame = load(out)
    expected = [
        format_line(group.to_dict("records"))
        for _, group in frame.groupby(["op", "size_bytes"], sort=False)
    ]
    assert len(expected) == 14 and all(len(line) > 100 for line in expected)
    for line in expected:
        assert any(_same_row(s, line) for s in shown), (
            f"table line broken on a 100-column terminal:\n{line}\nshown:\n" + "\n".join(shown)
        )
    header = next(line for line in shown if line.startswith("#       size"))
    assert len(header) > 100
