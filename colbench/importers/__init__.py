"""Readers that turn other tools' output into colbench rows (``colbench import``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from colbench.errors import UsageError
from colbench.output import plural

if TYPE_CHECKING:
    from colbench.importers.nccl_tests import Imported

#: Names ``colbench import KIND`` accepts; rccl-tests prints nccl-tests' layout.
FORMATS = ("nccl-tests", "rccl-tests", "nccl_tests")


def import_log(kind: str, log: str, **options: Any) -> tuple[Path, Imported]:
    """Read ``log``, written by the tool ``kind``, into a new run directory."""
    if kind.strip().lower() not in FORMATS:
        raise UsageError(f"unknown import format {kind!r}: colbench imports nccl-tests")
    from colbench.importers import nccl_tests

    return nccl_tests.import_log(log, **options)


def summary(run_dir: Path, imported: Imported) -> str:
    """The last line ``colbench import`` prints: how many rows of which tables, where."""
    tables = ", ".join(f"{t['op']} at {t['world_size']} ranks" for t in imported.facts["tables"])
    return f"imported {plural(len(imported.rows), 'row')} ({tables}) into {run_dir}/results.csv"
