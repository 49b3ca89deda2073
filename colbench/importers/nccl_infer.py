"""What a found nccl-tests table means: its columns, types, collective and world size.

Where the log does not say (no *_perf name, no rank lines), the numbers do: each
collective has its own size/count rule and bus-bandwidth factor, so a table's sizes,
counts and busbw/algbw ratio name the op, or the op and world size that fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from colbench.bench import ops
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import DTYPES
from colbench.errors import UsageError
from colbench.importers.nccl_scan import RawTable

#: nccl-tests type names colbench's dtype table lacks -> (torch name, bytes per element).
_EXTRA_TYPES = {
    "int": ("int32", 4),
    "char": ("int8", 1),
    "uint32": ("uint32", 4),
    "uint64": ("uint64", 8),
    "fp8_e4m3": ("float8_e4m3fn", 1),
    "fp8_e5m2": ("float8_e5m2", 1),
    "f8e4m3": ("float8_e4m3fn", 1),
    "f8e5m2": ("float8_e5m2", 1),
}


@dataclass(frozen=True)
class Columns:
    """Where each value is on a table's data line past size, count and type, always the
    first three (nccl_scan knows a header by them)."""

    redop: int | None
    root: int | None
    #: Per placement: indices of time, algbw, busbw, wrong; and whether wrong is ``error``.
    blocks: tuple[tuple[int, int, int, int, bool], ...]

    @property
    def old_error_column(self) -> bool:
        """Whether the table prints the largest error (older releases), not #wrong."""
        return self.blocks[0][4]


def columns(table: RawTable, source: str) -> Columns:
    names = table.columns
    blocks = []
    for index, name in enumerate(names):
        if name != "time":
            continue
        tail = names[index + 1 : index + 4]
        if len(tail) < 3 or tail[:2] != ["algbw", "busbw"] or tail[2] not in ("#wrong", "error"):
            break
        blocks.append((index, index + 1, index + 2, index + 3, tail[2] == "error"))
    if not blocks or len(blocks) > 2:
        raise UsageError(
            f"{source} line {table.header_line}: unrecognised nccl-tests header "
            f"{' '.join(names)!r}: expected size count type ... time algbw busbw #wrong"
        )
    return Columns(
        redop=names.index("redop") if "redop" in names else None,
        root=names.index("root") if "root" in names else None,
        blocks=tuple(blocks),
    )


def dtype_of(name: str, source: str, line_no: int) -> tuple[str, int]:
    """A nccl-tests type name -> (torch dtype name, bytes per element)."""
    for dtype in DTYPES.values():
        if name in (dtype.nccl_name, dtype.name):
            return dtype.name, dtype.elem_bytes
    if name in _EXTRA_TYPES:
        return _EXTRA_TYPES[name]
    raise UsageError(f"{source} line {line_no}: unknown nccl-tests type {name!r}")


def _interval(text: str) -> tuple[float, float]:
    """The values a printed number stood for: nccl-tests rounds to the digits it shows."""
    value = float(text)
    decimals = len(text.partition(".")[2]) if "." in text else 0
    half = 0.5 * 10.0**-decimals
    return value - half, value + half


def bandwidth_agrees(size: int, time_text: str, printed: str, factor: float) -> bool:
    """Whether ``printed`` can be size/time*factor for some time that prints as time_text."""
    t_low, t_high = _interval(time_text)
    t_low = max(t_low, 1e-12)
    low, high = size / t_high / 1e3 * factor, size / t_low / 1e3 * factor
    p_low, p_high = _interval(printed)
    slack = 1e-9 * max(1.0, abs(p_high))
    return high >= p_low - slack and low <= p_high + slack


def resolve_op(
    table: RawTable, op: str | None, source: str, world_size: int | None
) -> tuple[Collective, str] | None:
    """The collective of a table: --op, else the log's *_perf name, else its numbers, else
    the file name; with how it was found. None when nothing tells."""
    if op is not None:
        return ops.get(op), "--op"
    if table.op_hint is not None:
        try:
            return ops.get(table.op_hint), f"{table.op_hint}_perf in the log"
        except UsageError:
            raise UsageError(
                f"{source}: {table.op_hint}_perf is not a collective colbench knows"
            ) from None
    inferred = _infer_op(table, world_size)
    if inferred is not None:
        return inferred, "its sizes, counts and bandwidth ratio"
    stem = Path(source).name.lower()
    matches = [c for c in ops.REGISTRY if stem.startswith(c.name)]
    matches += [ops.BY_NAME[op] for alias, op in ops.ALIASES.items() if stem.startswith(alias)]
    return (max(matches, key=lambda c: len(c.name)), "the file name") if matches else None


def size_ratio(coll: Collective, world_size: int) -> int:
    """size_bytes / (count * element size) for this op: 1 (whole buffer) or n (per rank)."""
    lay = coll.layout(1 << 20, 4, world_size)
    return lay.size_bytes // (lay.count * 4)


def _infer_op(table: RawTable, world_size: int | None) -> Collective | None:
    """The one collective whose size/count rule, root use and busbw factor fit the rows."""
    if world_size is None or not table.lines:
        return None
    cols = columns(table, "")
    # A root column tells rooted ops from the others: some row's root is not -1.
    rooted = cols.root is not None and any(t[cols.root] != "-1" for _, t in table.lines)
    candidates = [
        coll
        for coll in ops.REGISTRY
        if coll.sized
        and (cols.root is None or rooted == coll.rooted)
        and _fits(table, cols, coll, world_size)
    ]
    return candidates[0] if len(candidates) == 1 else None


def _fits(table: RawTable, cols: Columns, coll: Collective, world_size: int) -> bool:
    """Sizes and counts follow the op's rule in every row, and the printed busbw/algbw
    ratio is its factor at this world size in most rows (a stray edited row may not)."""
    ratio = size_ratio(coll, world_size)
    factor = coll.busbw_factor(world_size)
    tested = agreeing = 0
    for line_no, tokens in table.lines:
        _, elem = dtype_of(tokens[2], "", line_no)
        size, count = int(tokens[0]), int(tokens[1])
        if count and size != count * elem * ratio:
            return False
        for t, alg, bus, _, _ in cols.blocks:
            if tokens[t] == "N/A" or float(tokens[alg]) < 1.0:
                continue
            tested += 1
            agreeing += bandwidth_agrees(size, tokens[t], tokens[bus], factor)
    return tested > 0 and agreeing * 2 > tested


def _world_size_hint(table: RawTable, coll: Collective | None) -> str:
    """Which (op, world size) the log's sizes and busbw/algbw ratio allow, to help answer."""
    cols = columns(table, "")
    candidates = [coll] if coll is not None else [c for c in ops.REGISTRY if c.sized]
    fitting = [(c, n) for c in candidates for n in range(2, 1025) if _fits(table, cols, c, n)]
    if len(fitting) == 1:
        fit_op, n = fitting[0]
        return f" (its sizes and busbw/algbw ratio fit {fit_op.name} at {n} ranks only)"
    return ""


def world_size(
    table: RawTable, given: int | None, source: str, coll_for_hint: Collective | None
) -> tuple[int, str]:
    """The table's world size: its rank lines, else other clues in the log, else
    --world-size; with where it was found."""
    if table.ranks:
        listed = len(table.ranks)
        if given is not None and given != listed:
            raise UsageError(
                f"{source}: the log lists {listed} ranks under '# Using devices' but "
                f"--world-size is {given}"
            )
        return listed, "Rank lines"
    inferred = table.world.infer()
    if inferred is not None:
        if given is not None and given != inferred[0]:
            raise UsageError(
                f"{source}: the log's {inferred[1]} say {inferred[0]} ranks but "
                f"--world-size is {given}"
            )
        return inferred
    if given is not None:
        return given, "--world-size"
    hint = _world_size_hint(table, coll_for_hint)
    raise UsageError(
        f"{source}: the log has no '# Using devices' rank lines and "
        f"{table.world.where_to_look()}, so its world size is unknown; "
        f"give --world-size N{hint}"
    )


def requested_sizes(table: RawTable) -> list[int] | None:
    """The sizes nccl-tests was asked for, one per table line, from its -b/-e/-f/-i header."""
    p = table.params
    if not p or not table.lines:
        return None
    size, high, step = int(p["min_bytes"]), int(p["max_bytes"]), int(p["step"])
    by_factor = p["step_kind"] == "factor"
    if step < (2 if by_factor else 1) or size < 1:
        return None
    sequence: list[int] = []
    while size <= high and len(sequence) <= len(table.lines):
        sequence.append(size)
        size = size * step if by_factor else size + step
    if not sequence or len(table.lines) % len(sequence):
        return None
    requested = [sequence[i % len(sequence)] for i in range(len(table.lines))]
    sizes = [int(tokens[0]) for _, tokens in table.lines]
    if any(s > r for s, r in zip(sizes, requested, strict=True)):
        return None
    return requested
