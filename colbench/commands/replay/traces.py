"""Reading a job's trace files: which format each is, whose rank, and whether they belong
together. Each problem is one line naming the file, what was found and what is missing."""

from __future__ import annotations

import gzip
import itertools
import json
import sys
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from colbench import reading
from colbench.commands.replay import formats, schema
from colbench.commands.replay.calls import BadTrace, Trace
from colbench.errors import UsageError

#: A profiler trace of a long job runs to a few GiB of JSON; more is not a trace to replay.
TRACE = reading.Kind("trace", 4 * 1024**3)
FORMATS = "a torch profiler trace, a flight-recorder dump or a PARAM basic trace"
#: Missing ranks a message names before it says how many in all.
_LISTED = 8


def _decoded(data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    gunzip = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        # Bounded: a small .gz can hold far more than any trace.
        out = gunzip.decompress(data, TRACE.limit_bytes)
    except (zlib.error, gzip.BadGzipFile, EOFError) as exc:
        raise BadTrace(f"a gzip file that does not decompress ({exc})") from None
    if not gunzip.eof and len(out) < TRACE.limit_bytes:
        raise BadTrace(f"a gzip file cut short ({len(out)} bytes decompressed before its end)")
    return out


def _parsed(data: bytes) -> Any:
    if not data.strip():
        found = f"only white space ({len(data)} bytes)" if data else "an empty file"
        raise BadTrace(f"{found}, not {FORMATS}")
    if data[:1] == b"\x80":  # pickle's protocol opcode: torch's flight-recorder dump
        return formats.unpickle(data)
    if reading.is_binary(data):
        raise BadTrace(f"binary data, not {FORMATS}")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadTrace(f"not UTF-8 text (byte {exc.start}), not {FORMATS}") from None
    except json.JSONDecodeError as exc:
        ends = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated")
        cut = " (it ends early: a trace cut short?)" if ends else f"; expected {FORMATS}"
        raise BadTrace(
            f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{cut}"
        ) from None
    except ValueError:  # Python's int() limit: no trace holds such a number
        raise BadTrace(
            f"a number of more than {sys.get_int_max_str_digits()} digits, not {FORMATS}"
        ) from None
    except RecursionError:
        raise BadTrace(f"JSON nested deeper than Python's reader goes, not {FORMATS}") from None


def _key(key: Any) -> str:
    # A pickle's keys need not be strings (nor shallow): shown as short() bounds them.
    return schema.shown(key) if isinstance(key, str) else schema.short(key)


def read_one(path: str) -> Trace:
    data = _decoded(reading.read_bytes(path, TRACE))
    doc = _parsed(data)
    if isinstance(doc, dict) and "traceEvents" in doc:
        return formats.profiler_trace(doc, path)
    if isinstance(doc, dict) and "entries" in doc and "version" in doc:
        return formats.flight_recorder(doc, path)
    first = doc[0] if isinstance(doc, list) and doc and isinstance(doc[0], dict) else {}
    if "comms" in first or "compute" in first:
        return formats.param_basic(doc, path)
    if "ph" in first:
        return formats.profiler_trace({"traceEvents": doc}, path)
    found = (
        f"an object with keys {', '.join(map(_key, list(doc)[:6]))}"
        if isinstance(doc, dict)
        else f"a {type(doc).__name__}" + (" (empty)" if not doc else "")
    )
    raise BadTrace(f"{found}, not {FORMATS}")


def read(paths: Sequence[str]) -> list[Trace]:
    """Every file, checked to be one job's: one rank each, one world size."""
    if not paths:
        raise UsageError("give at least one trace file")
    traces = []
    for path in paths:
        try:
            traces.append(read_one(path))
        except BadTrace as exc:
            raise UsageError(schema.refusal(path, exc)) from None
    unranked = _unname_ranks(traces)
    _one_job(traces, unranked)
    schema.check_job(traces)
    return traces


def _unname_ranks(traces: list[Trace]) -> dict[str, str]:
    """Digits in a file's name that are no rank of the job's world are not read as one
    (``param_step10.json`` of a 4-rank job is a step's number); path -> why not."""
    world = next((t.world_size for t in traces if t.world_size), None)
    unranked = {}
    for trace in traces:
        if trace.named_rank and trace.rank is not None and world and trace.rank >= world:
            unranked[trace.path] = (
                f"the {trace.rank} in its name is not a rank of the job's world of {world}"
            )
            trace.rank = None
    return unranked


def _one_job(traces: list[Trace], unranked: dict[str, str]) -> None:
    by_rank: dict[int, str] = {}
    for trace in traces:
        if trace.rank is None:
            continue
        if trace.rank in by_rank:
            raise UsageError(
                f"{by_rank[trace.rank]} and {trace.path} are both rank {trace.rank}'s trace: "
                "give each rank's once"
            )
        by_rank[trace.rank] = trace.path
    worlds = {t.world_size for t in traces if t.world_size is not None}
    if len(worlds) > 1:
        shown = ", ".join(f"{t.path}: {t.world_size}" for t in traces)
        raise UsageError(f"the traces are of different jobs (world sizes {shown})")
    if len(traces) > 1 and len(by_rank) < len(traces):
        unnamed = next(t.path for t in traces if t.rank is None)
        why = unranked.get(unnamed, "no distributedInfo, no rank digits in its name")
        raise UsageError(
            f"{unnamed}: several traces given but this one does not say its rank ({why})"
        )


def found_ranks(traces: list[Trace]) -> list[int]:
    """The ranks whose traces were given, in order."""
    return sorted(t.rank for t in traces if t.rank is not None)


def missing(present: Iterable[int], size: int) -> str:
    """The ranks below ``size`` not in ``present``, as a message lists them ('' when
    none): the first few and how many in all, never the whole of a 2^31-rank world."""
    have = {r for r in present if 0 <= r < size}
    count = size - len(have)
    if count <= 0:
        return ""
    first = list(itertools.islice((r for r in range(size) if r not in have), _LISTED))
    more = f", ... ({count} in all)" if count > len(first) else ""
    return ", ".join(map(str, first)) + more
