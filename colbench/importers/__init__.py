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
#: NCCL's profiler plugin, the Inspector: a dump directory of JSON lines (importers.inspector).
INSPECTOR = ("inspector", "nccl-inspector")


def import_log(kind: str, log: str, **options: Any) -> tuple[Path, Imported]:
    """Read ``log``, written by the tool ``kind``, into a new run directory."""
    name = kind.strip().lower()
    if name in INSPECTOR:
        from colbench.importers import inspector

        for key in ("world_size", "op", "variant"):
            if options.pop(key, None):
                raise UsageError(f"--{key.replace('_', '-')} does not apply to Inspector output")
        return inspector.import_dir(log, **options)
    if name not in FORMATS:
        raise UsageError(
            f"unknown import format {kind!r}: colbench imports nccl-tests and inspector"
        )
    from colbench.importers import nccl_tests

    for key in ("dtype", "device"):
        if options.pop(key, None):
            raise UsageError(f"--{key} applies to Inspector output only (nccl-tests logs say it)")
    return nccl_tests.import_log(log, **options)


def summary(run_dir: Path, imported: Imported) -> str:
    """The last line ``colbench import`` prints: how many rows of which tables, where."""
    tables = ", ".join(f"{t['op']} at {t['world_size']} ranks" for t in imported.facts["tables"])
    return f"imported {plural(len(imported.rows), 'row')} ({tables}) into {run_dir}/results.csv"
