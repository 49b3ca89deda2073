"""Writing a run's files: every failure is one line naming the file and the cause.

A full disk, a run directory removed or renamed while the run measures, a file that
cannot be replaced: the OSError becomes :class:`~colbench.errors.WriteFailed` (exit 6),
whose message says which file and why, instead of a traceback or a rank blamed for an
op it measured well. What was already on disk stays: rows are appended and flushed one by
one (a torn last row is dropped by the reader, and said), and meta.json is replaced whole
or not at all.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from colbench.errors import WriteFailed


def failure(path: Path | str, exc: OSError) -> WriteFailed:
    """The one line for ``exc`` raised while writing ``path``."""
    cause = exc.strerror or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        cause += " (its directory was removed or renamed?)"
    return WriteFailed(f"cannot write {path}: {cause}", str(path))


@contextlib.contextmanager
def checked(path: Path | str) -> Iterator[None]:
    """Turn an OSError inside the block into :class:`WriteFailed` naming ``path``."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as exc:
        raise failure(path, exc) from None


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole through a hidden temporary file beside it: a reader sees the
    old file or the new one, never half; a failed write leaves no temporary behind."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise failure(path, exc) from None


def write_text(path: Path | str, text: str, append: bool = False) -> None:
    """Write (or append) ``text`` to ``path``: a report, a list, a figure's companion."""
    with checked(path), open(path, "a" if append else "w", encoding="utf-8") as f:
        f.write(text)
