"""A job's calls -> colbench's plan: (op, size_bytes, dtype, group_size) with how often
the job made each, and the calls colbench cannot measure with the reason (docs/replay.md,
"The plan"). ``calls``: the most calls of that kind any one rank made (every rank of a
group makes each collective once, so ranks' traces are not added up). An uneven
all_to_allv's traffic matrix, row r = what rank r sent each peer, comes from the k-th
uneven all_to_all of every rank's trace.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from colbench.bench import ops
from colbench.bench.ops.data import DTYPES
from colbench.commands.replay.calls import OTHER_ELEM_BYTES, Trace, TracedCall
from colbench.commands.replay.schema import shown
from colbench.commands.replay.traces import found_ranks, missing
from colbench.config.sizes import MAX_SIZE_BYTES, format_size
from colbench.errors import UsageError

Matrix = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Key:
    """What one plan entry is; equal keys are one entry."""

    op: str
    """colbench's op, or the trace's name when colbench cannot measure the call."""
    size_bytes: int | None
    dtype: str | None
    group_size: int | None
    reason: str = ""
    matrix: Matrix | None = None
    """all_to_allv: bytes rank i sent rank j."""


@dataclass
class Entry:
    key: Key
    calls: int
    steps: int
    recorded_us: float | None = None
    """The job's mean time per call, over the ranks whose trace times it."""
    measured_us: float | None = None
    """colbench's time per call here (command.py)."""

    @property
    def requested_bytes(self) -> int | None:
        """The size the sweep asks for: all_to_allv scales its matrix so that the mean
        rank sends this many bytes, every other op reports what it is asked."""
        matrix = self.key.matrix
        if matrix is None:
            return self.key.size_bytes
        return round(sum(map(sum, matrix)) / len(matrix))

    def as_json(self) -> dict[str, Any]:
        key = self.key
        out: dict[str, Any] = {
            "op": key.op,
            "size_bytes": key.size_bytes,
            "dtype": key.dtype,
            "group_size": key.group_size,
            "calls": self.calls,
            "calls_per_step": self.calls / self.steps,
        }
        if key.reason:
            out["reason"] = key.reason
        if key.matrix is not None:
            out["requested_bytes"] = self.requested_bytes
            out["matrix_bytes"] = [list(row) for row in key.matrix]
        timed = {"recorded_us": self.recorded_us, "measured_us": self.measured_us}
        return out | {k: v for k, v in timed.items() if v is not None}


@dataclass
class Plan:
    entries: list[Entry]
    steps: int
    ranks: list[int] = field(default_factory=list)
    formats: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    """The job's backends where its traces say them (``nccl``)."""

    @property
    def measurable(self) -> list[Entry]:
        return [e for e in self.entries if not e.key.reason]


#: Why a call on an unknown group is not measured (gloo's events do not name the group).
UNKNOWN_GROUP = "group size unknown: the trace does not say which of its process groups it used"
#: Why a call past the largest size sweep takes is not measured.
TOO_LARGE = f"larger than the {format_size(MAX_SIZE_BYTES)} colbench measures"


def _elem_bytes(dtype: str | None) -> int | None:
    if dtype in DTYPES:
        return DTYPES[dtype].elem_bytes
    return OTHER_ELEM_BYTES.get(dtype or "")


def _bytes(call: TracedCall, op: str | None, n: int | None) -> int | None:
    """The call's size in colbench's terms where the trace tells it, else None."""
    elem_bytes = _elem_bytes(call.dtype)
    if elem_bytes is None:
        return None
    numel = call.size_numel(op, n or 0) if op else max(call.in_numel, call.out_numel)
    return numel * elem_bytes if numel else None


def _key(call: TracedCall) -> Key:
    op, reason = call.op()
    n, dtype = call.group_size, call.dtype
    if op is None:
        return Key(call.name, _bytes(call, op, n), dtype, n, reason)
    if op == "barrier":
        return Key(op, 0, "float32", n) if n else Key(op, 0, "float32", n, UNKNOWN_GROUP)
    if n is None:
        return Key(call.name, _bytes(call, op, n), dtype, n, UNKNOWN_GROUP)
    if dtype is None:
        return Key(call.name, None, dtype, n, "dtype not recorded")
    if dtype not in DTYPES:
        why = f"a dtype colbench does not measure ({shown(dtype)})"
        return Key(call.name, _bytes(call, op, n), dtype, n, why)
    size = call.size_numel(op, n) * DTYPES[dtype].elem_bytes
    if size > MAX_SIZE_BYTES:
        return Key(call.name, size, dtype, n, TOO_LARGE)
    if ops.BY_NAME[op].uneven_splits:
        return Key(op, size, dtype, n)
    laid = ops.BY_NAME[op].layout(size, DTYPES[dtype].elem_bytes, n).size_bytes
    if laid == 0 and size:
        return Key(
            call.name, size, dtype, n,
            f"{size} B over {n} ranks is less than one 16-byte chunk per rank, the least "
            f"colbench (like nccl-tests) lays {op} out",
        )  # fmt: skip
    if laid != size:
        return Key(
            call.name, size, dtype, n,
            f"{size} B over {n} ranks is not whole 16-byte chunks per rank, as colbench "
            f"(like nccl-tests) lays {op} out; nearest it measures: {laid} B",
        )  # fmt: skip
    return Key(op, size, dtype, n)


def build(traces: list[Trace]) -> Plan:
    counts: dict[Key, list[int]] = defaultdict(list)
    times: dict[Key, list[float]] = defaultdict(list)
    uneven: dict[int, list[TracedCall]] = {}
    for index, trace in enumerate(traces):
        per_rank: Counter[Key] = Counter()
        timed: dict[Key, list[float]] = defaultdict(list)
        rank = trace.rank if trace.rank is not None else index
        uneven[rank] = []
        for call in trace.calls:
            key = _key(call)
            if not key.reason and ops.BY_NAME[key.op].uneven_splits:
                uneven[rank].append(call)
                continue
            per_rank[key] += 1
            if call.duration_us is not None:
                timed[key].append(call.duration_us)
        for key, count in per_rank.items():
            counts[key].append(count)
            if timed[key]:
                times[key].append(sum(timed[key]) / len(timed[key]))
    for key, count, recorded in _matrices(traces, uneven):
        counts[key].append(count)
        if recorded:
            times[key].append(sum(recorded) / len(recorded))
    steps = max(t.steps for t in traces)
    entries = [
        Entry(key, max(count), steps, sum(times[key]) / len(times[key]) if times[key] else None)
        for key, count in counts.items()
    ]
    entries.sort(
        key=lambda e: (bool(e.key.reason), e.key.op, e.key.dtype or "", e.key.size_bytes or 0)
    )
    formats = tuple(sorted({t.format for t in traces}))
    backends = tuple(sorted({t.backend for t in traces if t.backend}))
    return Plan(entries, steps, found_ranks(traces), formats, backends)


def _matrices(
    traces: list[Trace], uneven: dict[int, list[TracedCall]]
) -> list[tuple[Key, int, list[float]]]:
    """The uneven all_to_allv calls, as one traffic matrix per k-th call of every rank."""
    if not any(uneven.values()):
        return []
    first = next(c for calls in uneven.values() for c in calls)
    n = first.group_size or 0
    found = found_ranks(traces)
    world = next((t.world_size for t in traces if t.world_size), None)
    lacking = (missing(found, world) if world else "") or missing(uneven, n)
    if lacking or len(uneven) < n:
        names = ", ".join(t.path for t in traces)
        have = ", ".join(map(str, found)) or "none named"
        raise UsageError(
            f"{names}: all_to_allv with uneven splits needs every rank's trace: found rank "
            f"{have}, missing rank {lacking}"
        )
    lengths = {r: len(c) for r, c in uneven.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"rank {r}: {k}" for r, k in sorted(lengths.items()))
        raise UsageError(
            f"the traces hold different numbers of uneven all_to_allv calls ({shown}): "
            "traces of different spans of the job"
        )
    grouped: Counter[Key] = Counter()
    recorded: dict[Key, list[float]] = defaultdict(list)
    for k in range(lengths[found[0] if found else 0]):
        column = [uneven[r][k] for r in sorted(uneven)]
        elem = DTYPES[column[0].dtype or "float32"].elem_bytes
        rows = tuple(tuple(s * elem for s in (c.in_splits or ())) for c in column)
        if any(len(row) != len(rows) for row in rows):
            raise UsageError(
                f"uneven all_to_allv call {k + 1}: split lists of {len(rows[0])} peers on "
                f"{len(rows)} ranks' traces: a subgroup's all_to_allv is not replayed"
            )
        busiest = max(max(map(sum, rows)), max(sum(col) for col in zip(*rows, strict=True)))
        key = Key("all_to_allv", busiest, column[0].dtype, len(rows), matrix=rows)
        if busiest > MAX_SIZE_BYTES:
            key = Key(column[0].name, busiest, column[0].dtype, len(rows), TOO_LARGE)
        grouped[key] += 1
        recorded[key] += [c.duration_us for c in column if c.duration_us is not None]
    return [(key, count, recorded[key]) for key, count in grouped.items()]
