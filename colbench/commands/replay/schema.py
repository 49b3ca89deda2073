"""What each field replay reads from a trace may hold, declared once, and the check that
applies it before anything is planned.

A trace comes from another machine and may hold anything. Each reader (formats.py) checks
an event's or entry's fields against its schema here *before* it reads them, so every such
fault is one line naming the trace, the call and the field, instead of an exception deep in
a reader or a plan that sweep's options refuse later. A field that is absent (or null) is
left to the reader: the call is then listed as not measurable. Only what replay reads is
checked (docs/replay.md, "Refusals", states the rule).
"""

from __future__ import annotations

import ast
import math
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from colbench.commands.replay.calls import BadTrace, Trace
from colbench.config.validate import MAX_COUNT
from colbench.errors import UsageError

#: torch counts a tensor's elements in int64: more is no tensor.
MAX_ELEMENTS = 2**63 - 1
#: Ranks of a group or a world: colbench's own bound on a rank count (``--nprocs``).
MAX_RANKS = MAX_COUNT

_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = (
    40, 40, 4, 4, 2,
)  # fmt: skip


def shown(text: str) -> str:
    """A name or path from a trace as one printable line: control characters (a newline,
    a terminal escape) and what a narrow terminal encoding cannot print are escaped."""
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def short(value: Any) -> str:
    """A found value for a message: bounded in length and depth (the value may be nested
    100,000 deep), and an integer past str()'s digit limit by its size instead."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"(an integer of {value.bit_length()} bits)"
    try:
        return shown(_SHORT.repr(value))
    except ValueError:  # an integer past the digit limit inside a list
        return f"(a {type(value).__name__} holding an integer too long to print)"


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> str | None:
    if not _integer(value):
        return "is not an integer"
    if value < 0:
        return "is negative"
    return "is more elements than a tensor holds (2^63)" if value > MAX_ELEMENTS else None


def _ranks(value: Any) -> str | None:
    if not _integer(value):
        return "is not an integer"
    if value < 1:
        return "is not a group size: a group has at least 1 rank"
    return f"is more ranks than colbench runs ({MAX_RANKS})" if value > MAX_RANKS else None


def _rank(value: Any) -> str | None:
    if not _integer(value):
        return "is not an integer"
    return None if 0 <= value < MAX_RANKS else f"is not a rank (0 to {MAX_RANKS - 1})"


def _time(value: Any) -> str | None:
    if not (_integer(value) or isinstance(value, float)):
        return "is not a number"
    return None if math.isfinite(value) else "is not a finite number"


def _duration(value: Any) -> str | None:
    return _time(value) or ("is negative" if value < 0 else None)


def _of_type(kind: type, what: str) -> Callable[[Any], str | None]:
    return lambda value: None if isinstance(value, kind) else f"is not {what}"


def _texts(value: Any) -> str | None:
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return None if ok else "is not a list of strings"


def _shape(value: Any) -> str | None:
    """One tensor's dims: [4, 8]."""
    if not isinstance(value, list) or not all(_integer(d) for d in value):
        return "is not a tensor's dims (a list of integers)"
    if any(d < 0 for d in value):
        return "holds a negative dimension"
    return "is more elements than a tensor holds (2^63)" if numel(value) > MAX_ELEMENTS else None


def _shapes(value: Any) -> str | None:
    """Several tensors' dims: [[4], [4, 2]] (the flight recorder's sizes)."""
    if not isinstance(value, list):
        return "is not a list of tensors' dims"
    return next((p for p in map(_shape, value) if p), None)


def _arg_shapes(value: Any) -> str | None:
    """The profiler's Input Dims: per argument a tensor's dims, a tensor list's, or []."""
    if not isinstance(value, list):
        return "is not a list of arguments' dims"
    for arg in value:
        nested = isinstance(arg, list) and any(isinstance(d, list) for d in arg)
        problem = _shapes(arg) if nested else _shape(arg)
        if problem:
            return problem
    return None


def _group_ref(value: Any) -> str | None:
    """The flight recorder's process_group: (name, description), a tuple in torch's
    pickle and a list in its JSON."""
    ok = isinstance(value, list | tuple) and (not value or isinstance(value[0], str | int))
    return None if ok else "is not a process group's [name, description]"


def _splits(value: Any) -> str | None:
    parsed = splits(value, cut=True)
    if parsed is None and value not in ("", None):
        return "is not a list of split sizes"
    return next((f"holds one that {p}" for p in map(_count, parsed or ()) if p), None)


@dataclass(frozen=True)
class Field:
    """What one field may hold: ``check`` says what is wrong with a value, else None."""

    check: Callable[[Any], str | None]
    required: bool = False


def check(fields: Mapping[Any, Any], schema: Mapping[str, Field], at: str = "") -> None:
    """Refuse the first field of ``fields`` that ``schema`` does not allow: one line
    naming the field and the value found (``at`` names the call for the caller)."""
    for key, field in schema.items():
        value = fields.get(key)
        if value is None:
            if field.required:
                raise BadTrace(f"{key} is missing", at)
            continue
        problem = field.check(value)
        if problem:
            raise BadTrace(f"{key} {short(value)} {problem}", at)


def call_at(index: int | None, name: str, what: str = "call") -> str:
    """``call 17 (all_reduce)``: index is the position in the file's list, from 1."""
    return f"{what} {index} ({shown(name)})" if index is not None else f"{what} {shown(name)}"


TEXT, TEXTS = Field(_of_type(str, "a string")), Field(_texts)
OBJECT, LIST = Field(_of_type(dict, "an object")), Field(_of_type(list, "a list"))
COUNT, RANKS, RANK = Field(_count), Field(_ranks), Field(_rank)
TIME, DURATION, SPLITS = Field(_time), Field(_duration), Field(_splits)

#: A profiler event replay reads (record_param_comms, c10d::, gloo:, a kernel).
EVENT = {"ts": TIME, "dur": DURATION, "args": OBJECT}
#: record_param_comms' args (torch/csrc/profiler/util.h names them).
PARAM_COMMS = {
    "Collective name": replace(TEXT, required=True), "dtype": TEXT,
    "In msg nelems": Field(_count, required=True), "Out msg nelems": Field(_count, required=True),
    "Group size": RANKS, "In split size": SPLITS, "Out split size": SPLITS,
    "Process Group Name": TEXT, "Seq": COUNT,
}  # fmt: skip
#: A kernel event that carries its call's group and sequence number.
KERNEL = {"Process Group Name": TEXT, "Seq": COUNT}
#: A c10d:: call's or a backend work event's args (record_shapes=True).
C10D = {"Input Dims": Field(_arg_shapes), "Input type": TEXTS, "Concrete Inputs": LIST}
#: The profiler's distributedInfo and each of its pg_config's groups.
DISTRIBUTED_INFO = {"rank": RANK, "world_size": RANKS, "pg_config": LIST}
PROFILER_GROUP = {"pg_size": RANKS}
#: torch's flight-recorder dump, each of its pg_config's groups, and each entry.
FLIGHT_RECORDER = {"pg_config": OBJECT, "entries": replace(LIST, required=True)}
RECORDER_GROUP = {"ranks": SPLITS}
RECORDER_ENTRY = {
    "profiling_name": replace(TEXT, required=True), "input_sizes": Field(_shapes),
    "output_sizes": Field(_shapes), "input_dtypes": TEXTS, "output_dtypes": TEXTS,
    "process_group": Field(_group_ref), "duration_ms": DURATION,
}  # fmt: skip
#: One entry of PARAM's basic trace (commsTraceParser._parseBasicTrace's keys).
PARAM_ENTRY = {
    "comms": TEXT, "in_msg_size": COUNT, "out_msg_size": COUNT, "dtype": TEXT,
    "world_size": RANKS, "in_split": SPLITS, "out_split": SPLITS,
}  # fmt: skip


def numel(dims: Any) -> int:
    """Elements of a tensor's dims ([4, 8]) or a list's ([[4], [4]]); 0 when not recorded.
    Only on dims that passed the schema (two levels at most)."""
    if not isinstance(dims, list) or not dims:
        return 0
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    return sum(numel(d) for d in dims)


def splits(value: Any, cut: bool = False) -> tuple[int, ...] | None:
    """``[10, 20]`` or torch's ``"[10, 20]"`` -> (10, 20); None when absent or not a
    list of integers. ``cut``: keep the profiler's ``...`` of a list it cut short."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if value.strip() else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    if isinstance(value, list) and all(_integer(v) or (cut and v is ...) for v in value):
        return tuple(v for v in value if v is not ...)
    return None


def refusal(path: str, exc: BadTrace) -> str:
    """The one line a refused trace gets: ``trace PATH, call 17 (all_reduce): ...``."""
    at = f", {exc.at}" if exc.at else ""
    return f"trace {shown(path)}{at}: {exc}"


def check_job(traces: list[Trace]) -> None:
    """What one file cannot tell alone: each call's group against the job's world (from
    any trace that states it), and group sizes a reader derived from shapes rather than
    read. A rank taken from a file's name is no fault here: digits in a name may be
    anything (a run's number), and only an uneven all_to_allv needs them right."""
    stated = next((t for t in traces if t.world_size), None)
    for trace in traces:
        try:
            _check_in_world(trace, stated)
        except BadTrace as exc:
            raise UsageError(refusal(trace.path, exc)) from None


def _check_in_world(trace: Trace, stated: Trace | None) -> None:
    world = stated.world_size if stated else None
    said = f"the job's world of {world} ranks"
    if stated and stated.path != trace.path:
        said += f" ({shown(stated.path)} says)"
    for call in trace.calls:
        n = call.group_size
        if n is None:
            continue
        problem = _ranks(n) or (f"is larger than {said}" if world and n > world else None)
        if problem:
            raise BadTrace(f"group size {n} {problem}", call_at(call.index, call.name))
