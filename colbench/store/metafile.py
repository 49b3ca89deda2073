"""Reading one run's meta.json: parsed, bounded, and refused when a newer colbench wrote it.

Apart from :mod:`colbench.store.rundir` so that results.csv's loader can check its row count
against meta.json without importing the run directory that imports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.errors import UsageError

META_FILE = "meta.json"


def read(path: Path, newest: int) -> dict[str, Any]:
    """meta.json; raises FileNotFoundError when it is missing, ValueError when it is not a
    JSON object, and UsageError when it is no file to read (a device, too large, binary) or
    a colbench newer than schema version ``newest`` wrote it."""
    if not path.exists():
        raise FileNotFoundError(f"no {path}")
    meta = _parse(path, reading.read_text(path, reading.META))
    check_version(path, meta.get("schema_version"), newest)
    return meta


def read_or_none(path: Path, newest: int) -> dict[str, Any] | None:
    """meta.json, or None when it is missing (a CSV copied alone) or unreadable (cut short,
    not JSON, not a file), which is said; one a newer colbench wrote is refused: its fields
    may mean what this one cannot tell."""
    if not path.exists():
        return None
    try:
        meta = _parse(path, reading.read_text(path, reading.META))
    except ValueError as exc:  # UsageError is one too
        reading.warn(f"{exc}; read without it")
        return None
    check_version(path, meta.get("schema_version"), newest)
    return meta


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except RecursionError:
        raise ValueError(f"{path} nests deeper than any meta.json") from None
    except json.JSONDecodeError as exc:
        where = f"{exc.msg}, line {exc.lineno}"
        raise ValueError(f"{path} is not JSON ({where})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is not a JSON object")
    return meta


def check_version(source: Path, version: Any, newest: int) -> None:
    """Refuse a file a newer colbench wrote: its fields may mean what this one cannot tell."""
    if version is None:
        return
    try:
        number = int(version)
    except (TypeError, ValueError):
        raise UsageError(f"{source}: schema_version {version!r} is not a version number") from None
    if number > newest:
        raise UsageError(
            f"{source} has schema version {number}, newer than this colbench reads "
            f"(1 to {newest}): upgrade colbench to read it"
        )
