"""Reading the files colbench is given: the one bounded reader every parser goes through.

A path on the command line may name anything: a device that never ends (``/dev/zero``),
a FIFO, a directory, a binary file, a log of many gigabytes. Each kind of file is declared
here with the most colbench reads of it, and :func:`read_bytes` checks a file's type and
size *before* reading, then reads at most that much. Every problem is a one-line
:class:`~colbench.errors.UsageError` naming the file (exit 2), never an exhausted memory
or a traceback.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from colbench.errors import UsageError

#: Bytes scanned for NUL bytes to call a file binary (as grep and git do).
_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Kind:
    """A kind of file colbench reads and the most it reads of one."""

    what: str
    """What a user calls it, for messages ("results CSV", "suite")."""
    limit_bytes: int
    """Larger files are refused before a byte is read: far beyond any real one."""
    article: str = "a"

    @property
    def limit(self) -> str:
        """The limit as sizes are typed (``1M``, ``512M``, ``1G``): every one is whole MiB,
        so this needs no general size formatter (which sits above this module)."""
        mib = self.limit_bytes // 1024**2
        return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"

    @property
    def one(self) -> str:
        """``a suite``, ``an nccl-tests log``."""
        return f"{self.article} {self.what}"


#: A YAML suite: a sweep's options. Real ones are a few hundred bytes.
SUITE = Kind("suite", 1024**2)
#: results.csv, p2p.csv and the other tables of a run (a baseline pools several runs):
#: a row is about 400 bytes, so this is over a million rows.
TABLE = Kind("results CSV", 512 * 1024**2)
#: meta.json: its largest parts grow with the ranks (hosts, pids, env seen per rank).
META = Kind("run's meta.json", 64 * 1024**2)
#: nccl-tests or rccl-tests stdout, NCCL INFO lines of thousands of ranks included.
LOG = Kind("nccl-tests log", 1024**3, "an")
#: NCCL's own INFO/WARN log (NCCL_DEBUG=INFO) of any job, every rank's lines in one file.
NCCL_LOG = Kind("NCCL log", 1024**3, "an")
#: What a rank leaves for the parent when it fails.
REPORT = Kind("rank error report", 16 * 1024**2)
#: An interleaved run's turn log: a line of about 200 bytes per size, repeat and variant.
TURNS = Kind("turn log", 512 * 1024**2)


#: What a file that is not a regular one is, by its type (``stat.S_IFMT``).
_FILE_TYPES = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFIFO: "a pipe",
    stat.S_IFSOCK: "a socket",
}


def _read_at_most(f: BinaryIO, size_bytes: int) -> bytes:
    # In pieces: f.read(n) reserves n bytes first, and under an address-space limit
    # (ulimit -v) reserving the kind's whole limit fails though the file is small.
    chunks: list[bytes] = []
    left_bytes = size_bytes
    while left_bytes > 0 and (chunk := f.read(min(left_bytes, 1 << 20))):
        chunks.append(chunk)
        left_bytes -= len(chunk)
    return b"".join(chunks)


def read_bytes(path: str | os.PathLike[str], kind: Kind) -> bytes:
    """The whole file, once it is known to be a regular file within ``kind``'s limit."""
    file = Path(path)
    limit = kind.limit
    try:
        # Non-blocking: opening a FIFO to read waits for a writer, for ever if none comes.
        with os.fdopen(os.open(file, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                what = _FILE_TYPES.get(stat.S_IFMT(info.st_mode), "not a regular file")
                raise UsageError(f"{file} is {what}, not {kind.one} file")
            if info.st_size > kind.limit_bytes:
                raise UsageError(
                    f"{file} holds {info.st_size} bytes, more than the {limit} any "
                    f"{kind.what} colbench reads"
                )
            data = _read_at_most(f, kind.limit_bytes + 1)
    except IsADirectoryError:
        raise UsageError(f"{file} is a directory, not {kind.one} file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {kind.what} {file}: {exc.strerror or exc}") from None
    if len(data) > kind.limit_bytes:
        raise UsageError(
            f"{file} grew past {limit} while read, more than any {kind.what} colbench reads"
        )
    return data


def read_stdin(kind: Kind) -> bytes:
    """Standard input whole (``-`` given as the file), within ``kind``'s limit: a log piped
    straight from the tool."""
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(f"- reads standard input, and nothing is piped in: give {kind.one} file")
    data = _read_at_most(sys.stdin.buffer, kind.limit_bytes + 1)
    if len(data) > kind.limit_bytes:
        raise UsageError(
            f"standard input holds more than the {kind.limit} any {kind.what} colbench reads"
        )
    return data


def tail_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """The last ``max_bytes`` of a log ('' when it cannot be read): what a rank or a
    child process printed last, however much it printed before."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return ""
            f.seek(max(0, info.st_size - max_bytes))
            return f.read(max_bytes).decode(errors="replace")
    except OSError:
        return ""


def is_binary(data: bytes) -> bool:
    """True when the start of ``data`` holds a NUL byte: no text file colbench reads does."""
    return b"\x00" in data[:_SNIFF_BYTES]


def read_text(path: str | os.PathLike[str], kind: Kind, *, strict: bool = True) -> str:
    """The file as text: UTF-8 (``strict``: refused where it is not; else undecodable
    bytes replaced, as a log copied from a terminal may hold some), never binary."""
    data = read_bytes(path, kind)
    if is_binary(data):
        raise UsageError(f"{path} holds binary data (NUL bytes), not {kind.one}")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path} is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}), "
            f"not {kind.one}"
        ) from None


#: Warnings already printed by this process: a command reads a run's files in several
#: steps (its rows, then its meta.json for the context lines), and says each once.
_WARNED: set[str] = set()


def warn(message: str) -> None:
    """A reader's note that a file is usable but not whole: one line on stderr."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"colbench: warning: {message}", file=sys.stderr)
