"""nccl-tests (and rccl-tests) stdout -> colbench rows, so their runs plot and compare like ours.

What real logs look like, and what this reader accepts:

- the table: ``size count type [redop] [root]`` then, per placement (out-of-place, then
  in-place), ``time algbw busbw`` and ``#wrong`` (nccl-tests 2.x, a count or N/A) or
  ``error`` (older releases: the largest absolute error, not a count);
- ``# Using devices`` followed by one ``Rank`` line per GPU: the world size and hosts;
- noise: ``NCCL INFO`` lines anywhere (even inside the header), mpirun ``--tag-output``
  prefixes (``[1,0]<stdout>:``) and ``srun --label`` prefixes (``0: ``), shell trace,
  launcher warnings, version blocks.

Every table row becomes one colbench row per placement (in-place columns -> in_place=1).
algbw and busbw are recomputed with colbench's formulas from size, time and world size;
where the log disagrees by more than its printing precision explains, the row is warned
about, except when one constant factor explains a whole column (an older nccl-tests
definition), which is stated once.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench import ops
from colbench.dtypes import DTYPES, NO_REDOP, REDOPS
from colbench.errors import UsageError
from colbench.importers.nccl_world import WorldEvidence
from colbench.ops.base import Collective
from colbench.results import SCHEMA_VERSION, STATUS_OK, RowWriter

#: ``mpirun --tag-output`` puts ``[jobid,rank]<stdout>:`` before every line.
_TAG_OUTPUT = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
#: ``srun --label`` puts the task number, a colon and a space before every line.
_SRUN_LABEL = re.compile(r"^\s*\d+: ?")
_RANK = re.compile(
    r"^Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$"
)
_PARAMS = re.compile(
    r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)"
    r"\s+warmup iters:\s*(\d+)\s+iters:\s*(\d+)"
)
_REDUCED_MAX = re.compile(r"Reducing maxBytes to (\d+)")
_PERF_NAME = re.compile(r"(?:^|[\s/])([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
_VERSIONS = (
    ("nccl-tests", re.compile(r"nccl-tests version (\S+)")),
    ("rccl-tests", re.compile(r"rccl-tests version (\S+)")),
    ("nccl", re.compile(r"^NCCL version (\S+)")),
    ("rccl", re.compile(r"^RCCL version\s*:\s*(\S+)")),
)
_OUT_OF_BOUNDS = re.compile(r"^Out of bounds values\s*:\s*(\d+)")
_INT = re.compile(r"^\d+$")
_VARIANT = re.compile(r"^[A-Za-z_]\w*=[^,=\s]+(?:,[A-Za-z_]\w*=[^,=\s]+)*$")

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
#: nccl-tests' DeltaMaxValue: an old ``error`` above this failed the check. Half uses the
#: larger of the two values releases used, so nothing passing there is called wrong here.
_ERROR_TOLERANCE = {"float16": 5e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}
_PLACEMENTS = ("out-of-place", "in-place")


@dataclass
class _Table:
    """One table as found in the log, before interpretation."""

    header_line: int
    columns: list[str]
    op_hint: str | None
    ranks: dict[int, tuple[str, str]]
    params: dict[str, int | str]
    world: WorldEvidence
    lines: list[tuple[int, list[str]]] = field(default_factory=list)
    out_of_bounds: int | None = None


@dataclass
class Imported:
    """The rows of one log and what was learnt and doubted while reading it."""

    rows: list[dict[str, Any]]
    warnings: list[str]
    notes: list[str]
    facts: dict[str, Any]


@dataclass(frozen=True)
class _Columns:
    size: int
    count: int
    type: int
    redop: int | None
    root: int | None
    #: Per placement: indices of time, algbw, busbw, wrong; and whether wrong is ``error``.
    blocks: tuple[tuple[int, int, int, int, bool], ...]


def strip_prefix(line: str) -> str:
    """A log line without mpirun's ``--tag-output`` or srun's ``--label`` prefix."""
    tagged = _TAG_OUTPUT.match(line)
    if tagged:
        return line[tagged.end() :]
    return _SRUN_LABEL.sub("", line, count=1)


def _scan(text: str, source: str) -> tuple[list[_Table], dict[str, str], list[str]]:
    """Find the tables, the versions and the rows that look broken."""
    tables: list[_Table] = []
    versions: dict[str, str] = {}
    warnings: list[str] = []
    ranks: dict[int, tuple[str, str]] = {}
    params: dict[str, int | str] = {}
    op_hint: str | None = None
    table: _Table | None = None
    world = WorldEvidence()
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = strip_prefix(raw).strip()
        if line:
            world.observe(line)
        if not line or "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            tokens = body.split()
            if body.startswith("Using devices"):
                ranks = {}
            elif match := _RANK.match(body):
                ranks[int(match.group(1))] = (match.group(2), match.group(3).strip())
            elif match := _PARAMS.search(body):
                params = {
                    "min_bytes": int(match.group(1)),
                    "max_bytes": int(match.group(2)),
                    "step": int(match.group(3)),
                    "step_kind": match.group(4),
                    "warmup": int(match.group(5)),
                    "iters": int(match.group(6)),
                }
            elif match := _REDUCED_MAX.search(body):
                params = {**params, "max_bytes": int(match.group(1))}
            elif tokens[:3] == ["size", "count", "type"]:
                table = _Table(line_no, tokens, op_hint, dict(ranks), dict(params), world)
                tables.append(table)
                world = WorldEvidence()
            elif match := _OUT_OF_BOUNDS.match(body):
                if table is not None:
                    table.out_of_bounds = int(match.group(1))
                table = None
            elif body.startswith(("Avg bus bandwidth", "Collective test concluded")):
                table = None
            _note_names(body, versions)
            if match := _PERF_NAME.search(body):
                op_hint = match.group(1)
            continue
        tokens = line.split()
        if (
            table is not None
            and _INT.match(tokens[0])
            and len(tokens) > 1
            and _INT.match(tokens[1])
        ):
            if len(tokens) == len(table.columns):
                table.lines.append((line_no, tokens))
            else:
                warnings.append(
                    f"{source} line {line_no}: {len(tokens)} fields where the header has "
                    f"{len(table.columns)}; row skipped"
                )
            continue
        _note_names(line, versions)
        if match := _PERF_NAME.search(line):
            op_hint = match.group(1)
    return tables, versions, warnings


def _note_names(text: str, versions: dict[str, str]) -> None:
    for name, pattern in _VERSIONS:
        if match := pattern.search(text):
            versions.setdefault(name, match.group(1))


def _columns(table: _Table, source: str) -> _Columns:
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
    return _Columns(
        size=0,
        count=1,
        type=2,
        redop=names.index("redop") if "redop" in names else None,
        root=names.index("root") if "root" in names else None,
        blocks=tuple(blocks),
    )


def _dtype(name: str, source: str, line_no: int) -> tuple[str, int]:
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


def _bandwidth_agrees(size: int, time_text: str, printed: str, factor: float) -> bool:
    """Whether ``printed`` can be size/time*factor for some time that prints as time_text."""
    t_low, t_high = _interval(time_text)
    t_low = max(t_low, 1e-12)
    low, high = size / t_high / 1e3 * factor, size / t_low / 1e3 * factor
    p_low, p_high = _interval(printed)
    slack = 1e-9 * max(1.0, abs(p_high))
    return high >= p_low - slack and low <= p_high + slack


def _resolve_op(
    table: _Table, op: str | None, source: str, world_size: int | None
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
    matches += [
        ops.BY_NAME[target]
        for alias, target in ops.ALIASES.items()
        if stem.startswith(alias) and ops.BY_NAME[target] not in matches
    ]
    if matches:
        return max(matches, key=lambda c: len(c.name)), "the file name"
    return None


def _no_op(table: _Table, source: str) -> UsageError:
    return UsageError(
        f"{source}: cannot tell which collective the table at line {table.header_line} "
        "measured (no *_perf name in the log); give --op, e.g. --op all_reduce"
    )


def _size_ratio(coll: Collective, world_size: int) -> int:
    """size_bytes / (count * element size) for this op: 1 (whole buffer) or n (per rank)."""
    lay = coll.layout(1 << 20, 4, world_size)
    return lay.size_bytes // (lay.count * 4)


def _infer_op(table: _Table, world_size: int | None) -> Collective | None:
    """The one collective whose size/count rule, root use and busbw factor fit the rows."""
    if world_size is None or not table.lines:
        return None
    cols = _columns(table, "")
    candidates = []
    for coll in ops.REGISTRY:
        if not coll.sized:
            continue
        if cols.root is not None:
            rooted_rows = any(tokens[cols.root] != "-1" for _, tokens in table.lines)
            if rooted_rows != coll.rooted:
                continue
        if _fits(table, cols, coll, world_size):
            candidates.append(coll)
    return candidates[0] if len(candidates) == 1 else None


def _fits(table: _Table, cols: _Columns, coll: Collective, world_size: int) -> bool:
    """Sizes and counts follow the op's rule in every row, and the printed busbw/algbw
    ratio is its factor at this world size in most rows (a stray edited row may not)."""
    ratio = _size_ratio(coll, world_size)
    factor = coll.busbw_factor(world_size)
    tested = agreeing = 0
    for line_no, tokens in table.lines:
        _, elem = _dtype(tokens[cols.type], "", line_no)
        size, count = int(tokens[cols.size]), int(tokens[cols.count])
        if count and size != count * elem * ratio:
            return False
        for t, alg, bus, _, _ in cols.blocks:
            if tokens[t] == "N/A" or float(tokens[alg]) < 1.0:
                continue
            tested += 1
            agreeing += _bandwidth_agrees(size, tokens[t], tokens[bus], factor)
    return tested > 0 and agreeing * 2 > tested


def _world_size_hint(table: _Table, coll: Collective | None) -> str:
    """Which (op, world size) the log's sizes and busbw/algbw ratio allow, to help answer."""
    cols = _columns(table, "")
    candidates = [coll] if coll is not None else [c for c in ops.REGISTRY if c.sized]
    fitting = [(c, n) for c in candidates for n in range(2, 1025) if _fits(table, cols, c, n)]
    if len(fitting) == 1:
        fit_op, n = fitting[0]
        return f" (its sizes and busbw/algbw ratio fit {fit_op.name} at {n} ranks only)"
    return ""


def _requested_sizes(table: _Table) -> list[int] | None:
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


def parse_log(
    text: str,
    *,
    source: str = "log",
    world_size: int | None = None,
    op: str | None = None,
    variant: str = "",
    run_id: str = "imported",
) -> Imported:
    """Read nccl-tests stdout into colbench rows (raises UsageError on what it cannot read)."""
    if world_size is not None and world_size < 1:
        raise UsageError(f"--world-size must be at least 1, got {world_size}")
    if variant and not _VARIANT.match(variant):
        raise UsageError(
            f"bad --variant {variant!r}: use KEY=VALUE pairs joined by commas, e.g. NCCL_ALGO=Tree"
        )
    tables, versions, warnings = _scan(text, source)
    tables = [t for t in tables if t.lines]
    if not tables:
        raise UsageError(f"{source}: no nccl-tests result table found")
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    facts: dict[str, Any] = {"versions": versions, "tables": []}
    for table in tables:
        rows += _table_rows(
            table, source, world_size, op, variant, run_id, warnings, notes, facts["tables"]
        )
    return Imported(rows, warnings, notes, facts)


def _table_world_size(
    table: _Table, given: int | None, source: str, coll_for_hint: Collective | None
) -> int:
    if table.ranks:
        listed = len(table.ranks)
        if given is not None and given != listed:
            raise UsageError(
                f"{source}: the log lists {listed} ranks under '# Using devices' but "
                f"--world-size is {given}"
            )
        return listed
    inferred = table.world.infer()
    if inferred is not None:
        if given is not None and given != inferred[0]:
            raise UsageError(
                f"{source}: the log's {inferred[1]} say {inferred[0]} ranks but "
                f"--world-size is {given}"
            )
        return inferred[0]
    if given is not None:
        return given
    hint = _world_size_hint(table, coll_for_hint)
    raise UsageError(
        f"{source}: the log has no '# Using devices' rank lines and "
        f"{table.world.where_to_look()}, so its world size is unknown; "
        f"give --world-size N{hint}"
    )


def _world_size_from(table: _Table) -> str:
    if table.ranks:
        return "Rank lines"
    inferred = table.world.infer()
    return inferred[1] if inferred else "--world-size"


def _table_rows(
    table: _Table,
    source: str,
    given_world: int | None,
    op: str | None,
    variant: str,
    run_id: str,
    warnings: list[str],
    notes: list[str],
    table_facts: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    cols = _columns(table, source)
    inferred = table.world.infer()
    resolved = _resolve_op(
        table, op, source, len(table.ranks) or (inferred[0] if inferred else given_world)
    )
    n = _table_world_size(table, given_world, source, resolved[0] if resolved else None)
    if resolved is None:
        raise _no_op(table, source)
    coll, found_by = resolved
    factor = coll.busbw_factor(n)
    hosts = [host for host, _ in (table.ranks[r] for r in sorted(table.ranks))]
    devices = [dev for _, dev in (table.ranks[r] for r in sorted(table.ranks))]
    device = statistics.mode(devices) if devices else ""
    requested = _requested_sizes(table)
    ratio = _size_ratio(coll, n)

    rows: list[dict[str, Any]] = []
    # (line, placement, column, printed, size, time_text, recomputed) for the rounding check.
    checks: list[tuple[int, int, str, str, int, str, float]] = []
    misfits: list[int] = []
    flagged_errors = 0
    for index, (line_no, tokens) in enumerate(table.lines):
        dtype, elem = _dtype(tokens[cols.type], source, line_no)
        size, count = int(tokens[cols.size]), int(tokens[cols.count])
        if count and size != count * elem * ratio:
            misfits.append(line_no)
        redop = NO_REDOP
        if coll.uses_redop:
            redop = tokens[cols.redop] if cols.redop is not None else "sum"
            if redop not in REDOPS:
                raise UsageError(f"{source} line {line_no}: unknown reduction {redop!r}")
        root = -1
        if coll.rooted:
            root = int(tokens[cols.root]) if cols.root is not None else 0
        for placement, (t, alg, bus, wrong_at, is_error) in enumerate(cols.blocks):
            if tokens[t] == "N/A":
                continue
            time_us = float(tokens[t])
            algbw = coll.algbw_gbps(size, time_us)
            wrong_text = tokens[wrong_at]
            wrong: int | None
            if wrong_text == "N/A":
                wrong = None
            elif is_error:
                # The old column is the largest error, not a count: beyond nccl-tests'
                # tolerance at least one element was wrong, so 1 is the honest floor.
                wrong = int(float(wrong_text) > _ERROR_TOLERANCE.get(dtype, 0.0))
                flagged_errors += wrong
            else:
                wrong = int(wrong_text)
            checks.append((line_no, placement, "algbw", tokens[alg], size, tokens[t], algbw))
            checks.append(
                (line_no, placement, "busbw", tokens[bus], size, tokens[t], algbw * factor)
            )
            rows.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "run_id": run_id,
                    "variant": variant,
                    "backend": "nccl",
                    "device": device,
                    "world_size": n,
                    "nnodes": len(set(hosts)) if hosts else None,
                    "op": coll.name,
                    "dtype": dtype,
                    "redop": redop,
                    "root": root,
                    "in_place": placement,
                    "requested_bytes": requested[index] if requested else size,
                    "size_bytes": size,
                    "count": count,
                    "warmup": table.params.get("warmup"),
                    "iters": table.params.get("iters"),
                    # nccl-tests' default -a 1: ranks' times averaged.
                    "average": "avg",
                    "time_us": time_us,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * factor,
                    "wrong": wrong,
                    "status": STATUS_OK,
                }
            )
    where = f"{source} table at line {table.header_line}"
    if misfits:
        warnings.append(
            f"{where}: size and count do not fit {coll.name} at {n} ranks in {len(misfits)} "
            f"row(s) (first: line {misfits[0]}); check --op and --world-size"
        )
    _check_bandwidths(checks, coll, n, where, bool(misfits), warnings, notes)
    if flagged_errors:
        warnings.append(
            f"{where}: {flagged_errors} value(s) exceed nccl-tests' error tolerance"
            + (
                f" (the log reports {table.out_of_bounds} out of bounds)"
                if table.out_of_bounds is not None
                else ""
            )
            + "; imported with wrong=1, since the old error column is a maximum, not a count"
        )
    elif table.out_of_bounds and cols.blocks[0][4]:
        warnings.append(
            f"{where}: the log reports {table.out_of_bounds} out-of-bounds value(s) but no "
            "error above nccl-tests' tolerance is printed"
        )
    table_facts.append(
        {
            "header_line": table.header_line,
            "op": coll.name,
            "op_from": found_by,
            "world_size": n,
            "world_size_from": _world_size_from(table),
            "hosts": sorted(set(hosts)),
            "devices": sorted(set(devices)),
            "lines": len(table.lines),
            "rows": len(rows),
            "requested_bytes_from": "the -b/-e/-f header" if requested else "size_bytes",
            "wrong_from": "error column (max error vs nccl-tests' tolerance)"
            if cols.blocks[0][4]
            else "#wrong column",
            **{k: v for k, v in table.params.items() if k in ("warmup", "iters")},
        }
    )
    return rows


def _check_bandwidths(
    checks: Sequence[tuple[int, int, str, str, int, str, float]],
    coll: Collective,
    n: int,
    where: str,
    misfit: bool,
    warnings: list[str],
    notes: list[str],
) -> None:
    """Warn per row where the log's bandwidth is not colbench's, beyond print rounding."""
    factor = coll.busbw_factor(n)
    for column in ("algbw", "busbw"):
        mine = [c for c in checks if c[2] == column]
        col_factor = 1.0 if column == "algbw" else factor
        bad = [c for c in mine if not _bandwidth_agrees(c[4], c[5], c[3], col_factor)]
        if not bad:
            continue
        # The largest printed value carries the most digits: take the factor from it,
        # snapped to the op's busbw factor (or its inverse) when it is that.
        sized = [c for c in bad if c[6] > 0 and float(c[3]) >= 0.1]
        scale = math.nan
        if len(sized) >= 3:
            best = max(sized, key=lambda c: float(c[3]))
            scale = float(best[3]) / best[6]
            for known in (factor, 1 / factor if factor else math.nan):
                if math.isclose(scale, known, rel_tol=1e-3):
                    scale = known
        constant = not misfit and all(
            _bandwidth_agrees(c[4], c[5], c[3], col_factor * scale) for c in mine
        )
        if constant:
            why = (
                f"older nccl-tests printed busbw as {coll.name}'s algbw"
                if column == "algbw" and math.isclose(scale, factor, rel_tol=1e-3)
                else "a different definition, not noise"
            )
            notes.append(
                f"{where}: the log's {column} is {scale:.4g} x colbench's in every row ({why}); "
                f"colbench's {column} = "
                + ("size_bytes / time" if column == "algbw" else f"algbw * {factor:.4g}")
                + " is used"
            )
            continue
        for line_no, placement, _, printed, size, time_text, recomputed in bad:
            warnings.append(
                f"{where.split(' table')[0]} line {line_no} ({_PLACEMENTS[placement]}): "
                f"{column} {printed} GB/s in the log, but {size} B in {time_text} us at "
                f"{n} ranks is {recomputed:.4g} GB/s; colbench's value is used"
            )


def default_out_dir(source: Path, results_root: str | Path) -> Path:
    return Path(results_root) / f"imported-{source.stem}"


def _prepare_out_dir(out: Path, explicit: bool) -> Path:
    """A new or empty directory; an automatic name steps aside from an existing one."""
    candidate = out
    for attempt in range(2, 1000):
        if not candidate.exists() or (candidate.is_dir() and not any(candidate.iterdir())):
            break
        if explicit:
            raise UsageError(f"output directory {out} already exists and is not empty")
        candidate = out.with_name(f"{out.name}-{attempt}")
    try:
        candidate.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {candidate}: {exc.strerror}") from None
    return candidate


def import_log(
    path: str | Path,
    *,
    out_dir: str | Path | None = None,
    results_root: str | Path = "results",
    world_size: int | None = None,
    op: str | None = None,
    variant: str = "",
) -> tuple[Path, Imported]:
    """``colbench import nccl-tests``: write results.csv and meta.json for one log."""
    from colbench import metadata

    source = Path(path)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror}") from None
    text = data.decode("utf-8", errors="replace")
    explicit = out_dir is not None
    target = Path(out_dir) if out_dir is not None else default_out_dir(source, results_root)
    # Parse before creating anything, so a bad log leaves no directory behind.
    imported = parse_log(
        text,
        source=source.name,
        world_size=world_size,
        op=op,
        variant=variant,
        run_id=target.name,
    )
    run_dir = _prepare_out_dir(target, explicit)
    if run_dir.name != target.name:
        for row in imported.rows:
            row["run_id"] = run_dir.name
    writer = RowWriter(run_dir / "results.csv")
    try:
        for row in imported.rows:
            writer.write(row)
    finally:
        writer.close()
    tables = imported.facts["tables"]
    worlds = sorted({t["world_size"] for t in tables})
    hosts = sorted({h for t in tables for h in t["hosts"]})
    metadata.write(
        run_dir,
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_dir.name,
            "status": "imported",
            "source": {
                "format": "nccl-tests",
                "file": str(source.resolve()),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
            "imported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command_line": list(sys.argv),
            "backend": "nccl",
            "world_size": worlds[0] if len(worlds) == 1 else worlds,
            "hosts": hosts,
            "nnodes": len(hosts) if hosts else None,
            "devices": sorted({d for t in tables for d in t["devices"]}),
            "variant": variant,
            "versions": imported.facts["versions"],
            "tables": tables,
            "rows": len(imported.rows),
            "wrong_total": sum(int(r["wrong"] or 0) for r in imported.rows),
            "warnings": imported.warnings,
            "notes": imported.notes,
        },
    )
    return run_dir, imported
