"""Reading one run's meta.json: parsed, bounded, and refused when a newer colbench wrote it;
and the machine fingerprint it records, which a baseline is tied to.

Apart from :mod:`colbench.results.rundir` so that results.csv's loader can check its row count
against meta.json without importing the run directory that imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
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
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ValueError(f"{path} is not a meta.json colbench wrote ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is not a JSON object")
    for name, value in meta.items():
        problem = shape_problem(name, value)
        if problem:
            raise ValueError(f"{path}: field {name!r} {problem}")
    return meta


#: JSON's names for Python's types, for messages.
_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a whole number",
               float: "a number", bool: "true or false", type(None): "null"}  # fmt: skip


@dataclass(frozen=True)
class Field:
    """One field of meta.json: the JSON types it may hold, which kinds of run write it
    (sweep, p2p, health, import; every kind where empty), and what it means."""

    types: tuple[type, ...]
    meaning: str
    kinds: tuple[str, ...] = ()
    #: For an object, the JSON types of its values.
    values: tuple[type, ...] = ()


_TEXT, _WHOLE, _NUMBER = (str,), (int,), (int, float)
_OBJECT, _LIST, _NONE = (dict,), (list,), (type(None),)
#: The fields colbench writes and reads back, declared once: every reader checks a
#: meta.json against this before using it (a field not declared here is kept unchecked,
#: so a newer colbench's additions still read). docs/output.md describes them in prose.
FIELDS: dict[str, Field] = {
    "schema_version": Field((*_WHOLE, str), "the results schema version of the run"),
    "run_id": Field(_TEXT, "the run directory's name"),
    "status": Field(_TEXT, "running, complete, failed, interrupted, refused or imported"),
    "command_line": Field((*_LIST, str), "the command that made the run"),
    "versions": Field(_OBJECT, "colbench, torch, CUDA, NCCL, Python", values=(str, *_NONE)),
    "backend": Field(_TEXT, "gloo or nccl"),
    "launcher": Field(_TEXT, "how the ranks were started", ("sweep", "p2p", "health")),
    "world_size": Field((*_WHOLE, *_LIST), "ranks (an import of several tables: each)"),
    "hosts": Field(_LIST, "the node labels"),
    "rank_hosts": Field(_LIST, "each rank's node label", ("sweep", "p2p", "health")),
    "nnodes": Field((*_WHOLE, *_NONE), "distinct nodes"),
    "local_world_size": Field((*_WHOLE, *_OBJECT), "ranks per node (or per node label)"),
    "group_size": Field(_WHOLE, "ranks per measured group", ("sweep", "p2p", "health")),
    "groups": Field(_WHOLE, "measured groups", ("sweep", "p2p", "health")),
    "devices": Field(_LIST, "each rank's device (cpu, or the GPU model)"),
    "cpu": Field(_OBJECT, "CPU model and cores", ("sweep", "p2p", "health")),
    "machine": Field(_OBJECT, "the fingerprint a baseline is tied to", ("sweep", "p2p", "health")),
    "env": Field(_OBJECT, "allow-listed environment variables", values=(str,)),
    "torch_per_call": Field(
        _OBJECT,
        "torch's settings that change its cost per NCCL call (null: torch's default)",
        ("sweep", "p2p", "health"),
        values=(str, *_NONE),
    ),
    "config": Field(_OBJECT, "the run's options", ("sweep", "p2p", "health")),
    "fabric": Field(_OBJECT, "real, or emulated with ranks per GPU", ("sweep",)),
    "hardware": Field(_OBJECT, "each node's GPUs, links and NICs", ("sweep",)),
    "ceiling": Field(_OBJECT, "the bounding link's rate and its source", ("sweep",)),
    "rows_planned": Field(_WHOLE, "rows the plan holds (after any planned cut)", ("sweep",)),
    "rows": Field(_WHOLE, "rows written"),
    "rows_oom": Field(_WHOLE, "rows that could not allocate their buffers", ("sweep",)),
    "wrong_total": Field(_WHOLE, "wrong elements over all rows", ("sweep", "import")),
    "busbw_avg_gbps": Field(
        (*_NUMBER, *_NONE), "mean busbw over the measured rows (NCCL_TESTS_MIN_BW's)", ("sweep",)
    ),
    "duration_s": Field(_NUMBER, "seconds the run took"),
    "warnings": Field(_LIST, "what the run warned about"),
    "verdicts": Field(_LIST, "what the run's evidence says (docs/explain.md)"),
    "nccl": Field(_OBJECT, "what NCCL's own logs say", ("sweep", "p2p", "health")),
    "pooled_runs": Field(_LIST, "the runs a baseline pools", ("sweep",)),
    "source": Field(_OBJECT, "the imported file: format, path, sha256", ("import",)),
    "tables": Field(_LIST, "what each imported table says", ("import",)),
    "nccl_tests": Field(
        _OBJECT, "an imported nccl-tests JSON report's summaries, as written", ("import",)
    ),
    "verdict": Field(_OBJECT, "the p2p verdict", ("p2p",)),
    "communicators": Field(
        _LIST, "an Inspector import's communicators, ranks and times", ("import",)
    ),
    "references": Field(
        _OBJECT,
        "the large rows beside published results for the hardware, with their sources",
        ("sweep", "import", "health"),
    ),
}


def _json_name(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def shape_problem(name: str, value: Any) -> str:
    """What is wrong with a declared field's value ("is a string, not an object"); ""
    when nothing is, or the field is not declared."""
    field = FIELDS.get(name)
    if field is None:
        return ""
    # JSON's true is a whole number to Python: a count that is true is no count.
    fits = isinstance(value, field.types) and not (
        isinstance(value, bool) and bool not in field.types
    )
    if not fits:
        wanted = " or ".join(_JSON_NAMES.get(t, t.__name__) for t in field.types)
        return f"is {_json_name(value)}, not {wanted}"
    if field.values and isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(item, field.values):
                wanted = " or ".join(_JSON_NAMES.get(t, t.__name__) for t in field.values)
                return f"holds {key!r}: {_json_name(item)}, not {wanted}"
    return ""


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


#: Fingerprint entries that must agree for performance to be comparable; the others
#: (memory, kernel) are shown when they differ, not required to match.
MUST_MATCH = ("cpu_model", "cpu_id", "cpu_cores", "gpus", "torch", "cuda", "nccl")
SHOWN = ("memory_bytes", "kernel")


def fingerprint(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A run's fingerprint from its meta.json; runs recorded before fingerprints existed
    give what they have (CPU model and cores, versions), the rest is left unknown."""
    recorded = meta.get("machine")
    if isinstance(recorded, Mapping):
        return dict(recorded)
    cpu, vers = meta.get("cpu") or {}, meta.get("versions") or {}
    known = {
        "cpu_model": cpu.get("model"),
        "cpu_cores": cpu.get("cores"),
        "torch": vers.get("torch"),
        "cuda": vers.get("cuda"),
        "nccl": vers.get("nccl"),
    }
    return {k: v for k, v in known.items() if v is not None}


def machine_differences(
    base: Mapping[str, Any], cur: Mapping[str, Any], names: tuple[str, ...] = MUST_MATCH
) -> list[tuple[str, str, str]]:
    """(entry, baseline, current) for each of ``names`` both fingerprints record and
    that differs; an entry one side lacks is unknown, not a difference."""
    out = []
    for name in names:
        if name in base and name in cur and base[name] != cur[name]:
            out.append((name, _shown(base[name]), _shown(cur[name])))
    return out


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return "-" if value in (None, "") else str(value)


#: meta.json's status while a run measures: a run killed from outside (SIGKILL, a lost
#: node) never gets to change it.
RUNNING = "running"


def incomplete(meta: dict[str, Any], rows_held: int) -> str:
    """Why a run whose results file holds ``rows_held`` of its rows is not whole; "" when
    it is. A run that failed or was interrupted after its last planned row is whole."""
    status = meta.get("status")
    if status == RUNNING:
        return (
            f"its meta.json still says {RUNNING!r} (the run was killed from outside, or is "
            f"still measuring); {rows_held} row(s) were kept"
        )
    planned, written = meta.get("rows_planned"), meta.get("rows")
    if isinstance(planned, int) and not isinstance(planned, bool) and rows_held < planned:
        ended = f", status {status!r}" if status not in (None, "complete") else ""
        return f"{rows_held} of its {planned} planned row(s){ended}"
    if meta.get("rows_complete") is False:
        # Written at a failed or interrupted end (colbench.host.supervise.end_meta) where
        # the plan's count was unknown there, as at an interleaved run's top.
        return f"{rows_held} row(s) kept, status {status!r}, and not every planned row"
    if isinstance(written, int) and not isinstance(written, bool) and rows_held < written:
        return (
            f"it holds {rows_held} of the {written} row(s) its meta.json says were written "
            "(cut short or edited)"
        )
    return ""
