"""One found nccl-tests table -> colbench Rows, with what looks doubtful about it.

Every data line becomes one Row per placement (in-place columns -> in_place=1).
algbw and busbw are recomputed with colbench's formulas from size, time and world size;
where the log disagrees by more than its printing precision explains, the row is warned
about, except when one constant factor explains a whole column (an older nccl-tests
definition), which is stated once.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import NO_REDOP, REDOPS
from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_EMULATED, FABRIC_REAL
from colbench.importers import nccl_infer as infer
from colbench.importers.nccl_scan import RawTable
from colbench.results.rows import STATUS_INVALID, STATUS_OK, Row

#: nccl-tests' DeltaMaxValue: an old ``error`` above this failed the check. Half uses the
#: larger of the two values releases used, so nothing passing there is called wrong here.
_ERROR_TOLERANCE = {"float16": 5e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}
_PLACEMENTS = ("out-of-place", "in-place")


@dataclass(frozen=True)
class ImportOptions:
    """What the user said about a log; None where the log itself must tell."""

    source: str = "log"
    world_size: int | None = None
    op: str | None = None
    variant: str = ""
    run_id: str = "imported"


@dataclass
class Findings:
    """What was learnt and doubted while reading a log's tables."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: One dict per table: its op, world size and where each came from (meta.json).
    tables: list[dict[str, Any]] = field(default_factory=list)


class _Check(NamedTuple):
    """A bandwidth as printed and as colbench computes it, for the rounding check."""

    line_no: int
    placement: int
    column: str
    printed: str
    size_bytes: int
    time_text: str
    recomputed_gbps: float


@dataclass(frozen=True)
class _Meaning:
    """What a table measured, as far as the log and the options tell."""

    table: RawTable
    source: str
    cols: infer.Columns
    coll: Collective
    found_by: str
    n: int
    #: Where the world size was found (meta.json's world_size_from).
    n_from: str
    hosts: list[str]
    devices: list[str]
    #: the most ranks on one GPU (one host, one bus id): above 1, ranks shared a GPU, each
    #: its own NCCL node (NCCL_HOSTID), so the times measure that emulation, as colbench's
    #: --ranks-per-gpu rows do; the rows say so and comparisons treat them alike.
    ranks_per_gpu: int
    requested: list[int] | None
    #: size_bytes / (count * element size): 1, or n for ops whose size is per rank.
    ratio: int

    @property
    def factor(self) -> float:
        return self.coll.busbw_factor(self.n)

    @property
    def where(self) -> str:
        return f"{self.source} table at line {self.table.header_line}"


@dataclass
class _Tally:
    """What the lines of one table left to check once all are read."""

    checks: list[_Check] = field(default_factory=list)
    misfits: list[int] = field(default_factory=list)
    flagged_errors: int = 0
    #: Lines whose time no measurement can have (inf, nan, negative).
    impossible: list[int] = field(default_factory=list)


def table_rows(table: RawTable, options: ImportOptions, found: Findings) -> list[Row]:
    """The rows of one table; its warnings, notes and facts go to ``found``."""
    meaning = _meaning(table, options)
    tally = _Tally()
    rows: list[Row] = []
    for index, (line_no, tokens) in enumerate(table.lines):
        checked = len(tally.checks)
        try:
            rows += _line_rows(meaning, options, tally, index, (line_no, tokens))
        except ValueError as exc:
            if isinstance(exc, UsageError):
                raise
            # A line garbled in the log (a cut copy, a stray byte): skipped like one of
            # the wrong width, and said.
            del tally.checks[checked:]
            found.warnings.append(
                f"{options.source} line {line_no}: a cell is not a number ({exc}); row skipped"
            )
    _warn_about(meaning, tally, found)
    found.tables.append(_facts(meaning, len(rows)))
    return rows


def _meaning(table: RawTable, options: ImportOptions) -> _Meaning:
    source, given = options.source, options.world_size
    cols = infer.columns(table, source)
    inferred = table.world.infer()
    resolved = infer.resolve_op(
        table, options.op, source, len(table.ranks) or (inferred[0] if inferred else given)
    )
    n, n_from = infer.world_size(table, given, source, resolved[0] if resolved else None)
    if resolved is None:
        raise UsageError(
            f"{source}: cannot tell which collective the table at line {table.header_line} "
            "measured (no *_perf name in the log); give --op, e.g. --op all_reduce"
        )
    ranked = [table.ranks[r] for r in sorted(table.ranks)]
    return _Meaning(
        table=table,
        source=source,
        cols=cols,
        coll=resolved[0],
        found_by=resolved[1],
        n=n,
        n_from=n_from,
        hosts=[host for host, _, _ in ranked],
        devices=[dev for _, dev, _ in ranked],
        ranks_per_gpu=_ranks_per_gpu(ranked),
        requested=infer.requested_sizes(table),
        ratio=infer.size_ratio(resolved[0], n),
    )


def _ranks_per_gpu(ranked: list[tuple[str, str, str]]) -> int:
    """The most ranks sharing one GPU; 1 where the log names no full PCI address."""
    # Older nccl-tests print the bus number alone ("0x01"), which GPUs in different PCI
    # domains share (GH200 nodes: every GPU reads 0x01): only domain:bus:device tells.
    gpus = Counter((host, bus) for host, _, bus in ranked if bus.count(":") == 2)
    return max(gpus.values(), default=1)


def _line_rows(
    m: _Meaning, options: ImportOptions, tally: _Tally, index: int, line: tuple[int, list[str]]
) -> list[Row]:
    """One Row per placement the line measured (N/A: not measured)."""
    line_no, tokens = line
    cols, coll = m.cols, m.coll
    dtype, elem = infer.dtype_of(tokens[2], m.source, line_no)
    size, count = int(tokens[0]), int(tokens[1])
    if count and size != count * elem * m.ratio:
        tally.misfits.append(line_no)
    common: dict[str, Any] = {
        "run_id": options.run_id,
        "variant": options.variant,
        # nccl-tests calls NCCL itself, as colbench's direct engine does.
        "engine": "nccl",
        "backend": "nccl",
        "device": statistics.mode(m.devices) if m.devices else "",
        "world_size": m.n,
        "nnodes": len(set(m.hosts)) if m.hosts else None,
        "op": coll.name,
        "dtype": dtype,
        "redop": _redop(m, tokens, line_no),
        "root": (int(tokens[cols.root]) if cols.root is not None else 0) if coll.rooted else -1,
        "requested_bytes": m.requested[index] if m.requested else size,
        "size_bytes": size,
        "count": count,
        "warmup": m.table.params.get("warmup"),
        "iters": m.table.params.get("iters"),
        # nccl-tests' default -a 1: ranks' times averaged.
        "average": "avg",
        "fabric": FABRIC_EMULATED if m.ranks_per_gpu > 1 else FABRIC_REAL,
        "ranks_per_gpu": m.ranks_per_gpu,
    }
    rows = []
    for placement, (t, _, _, wrong_at, is_error) in enumerate(cols.blocks):
        if tokens[t] == "N/A":
            continue
        time_us = float(tokens[t])
        algbw, busbw = _bandwidths(m, tally, line_no, placement, tokens)
        wrong = _wrong(tokens[wrong_at], is_error, dtype)
        tally.flagged_errors += (wrong or 0) if is_error else 0
        rows.append(
            Row(
                **common,
                in_place=placement,
                time_us=time_us,
                algbw_gbps=algbw,
                busbw_gbps=busbw,
                wrong=wrong,
                status=STATUS_INVALID if algbw is None else STATUS_OK,
            )
        )
    return rows


def _bandwidths(
    m: _Meaning, tally: _Tally, line_no: int, placement: int, tokens: list[str]
) -> tuple[float | None, float | None]:
    """algbw and busbw recomputed from the placement's printed time, and queued for the
    check against the printed ones; none for a time no measurement can have (inf, nan,
    negative), which the row then keeps as invalid."""
    t, alg, bus, _, _ = m.cols.blocks[placement]
    time_text, size = tokens[t], int(tokens[0])
    time_us = float(time_text)
    if not (math.isfinite(time_us) and time_us >= 0):
        tally.impossible.append(line_no)
        return None, None
    algbw = m.coll.algbw_gbps(size, time_us)
    busbw = algbw * m.factor
    for name, column, value in (("algbw", alg, algbw), ("busbw", bus, busbw)):
        printed = tokens[column]
        tally.checks.append(_Check(line_no, placement, name, printed, size, time_text, value))
    return algbw, busbw


def _redop(m: _Meaning, tokens: list[str], line_no: int) -> str:
    if not m.coll.uses_redop:
        return NO_REDOP
    redop = tokens[m.cols.redop] if m.cols.redop is not None else "sum"
    if redop not in REDOPS:
        raise UsageError(f"{m.source} line {line_no}: unknown reduction {redop!r}")
    return redop


def _wrong(text: str, is_error: bool, dtype: str) -> int | None:
    if text == "N/A":
        return None
    if is_error:
        # The old column is the largest error, not a count: beyond nccl-tests'
        # tolerance at least one element was wrong, so 1 is the honest floor.
        return int(float(text) > _ERROR_TOLERANCE.get(dtype, 0.0))
    return int(text)


def _warn_about(m: _Meaning, tally: _Tally, found: Findings) -> None:
    where, table = m.where, m.table
    if m.ranks_per_gpu > 1:
        found.notes.append(
            f"{where}: up to {m.ranks_per_gpu} ranks share one GPU (same host and PCI address "
            "in the device table): rows imported as an emulated fabric, as sweep "
            "--ranks-per-gpu writes them"
        )
    if tally.misfits:
        found.warnings.append(
            f"{where}: size and count do not fit {m.coll.name} at {m.n} ranks in "
            f"{len(tally.misfits)} row(s) (first: line {tally.misfits[0]}); check --op and "
            "--world-size"
        )
    _check_bandwidths(m, tally, found)
    if tally.impossible:
        found.warnings.append(
            f"{where}: {len(tally.impossible)} time(s) no measurement can have (inf, nan or "
            f"negative; first: line {tally.impossible[0]}): imported with status invalid, "
            "never judged"
        )
    if tally.flagged_errors:
        reported = table.out_of_bounds is not None
        found.warnings.append(
            f"{where}: {tally.flagged_errors} value(s) exceed nccl-tests' error tolerance"
            + (f" (the log reports {table.out_of_bounds} out of bounds)" if reported else "")
            + "; imported with wrong=1, since the old error column is a maximum, not a count"
        )
    elif table.out_of_bounds and m.cols.old_error_column:
        found.warnings.append(
            f"{where}: the log reports {table.out_of_bounds} out-of-bounds value(s) but no "
            "error above nccl-tests' tolerance is printed"
        )


def _facts(m: _Meaning, rows: int) -> dict[str, Any]:
    return {
        "header_line": m.table.header_line,
        "op": m.coll.name,
        "op_from": m.found_by,
        "world_size": m.n,
        "world_size_from": m.n_from,
        "hosts": sorted(set(m.hosts)),
        "devices": sorted(set(m.devices)),
        "ranks_per_gpu": m.ranks_per_gpu,
        "lines": len(m.table.lines),
        "rows": rows,
        "requested_bytes_from": "the -b/-e/-f header" if m.requested else "size_bytes",
        "wrong_from": "error column (max error vs nccl-tests' tolerance)"
        if m.cols.old_error_column
        else "#wrong column",
        **{k: v for k, v in m.table.params.items() if k in ("warmup", "iters")},
    }


def _check_bandwidths(m: _Meaning, tally: _Tally, found: Findings) -> None:
    """Warn per row where the log's bandwidth is not colbench's, beyond print rounding."""
    factor = m.factor
    for column in ("algbw", "busbw"):
        mine = [c for c in tally.checks if c.column == column]
        col_factor = 1.0 if column == "algbw" else factor
        bad = [c for c in mine if not _agrees(c, col_factor)]
        if not bad:
            continue
        scale = _constant_scale(bad, factor)
        if not tally.misfits and all(_agrees(c, col_factor * scale) for c in mine):
            why = (
                f"older nccl-tests printed busbw as {m.coll.name}'s algbw"
                if column == "algbw" and math.isclose(scale, factor, rel_tol=1e-3)
                else "a different definition, not noise"
            )
            found.notes.append(
                f"{m.where}: the log's {column} is {scale:.4g} x colbench's in every row "
                f"({why}); colbench's {column} = "
                + ("size_bytes / time" if column == "algbw" else f"algbw * {factor:.4g}")
                + " is used"
            )
            continue
        for c in bad:
            found.warnings.append(
                f"{m.source} line {c.line_no} ({_PLACEMENTS[c.placement]}): "
                f"{column} {c.printed} GB/s in the log, but {c.size_bytes} B in {c.time_text} us "
                f"at {m.n} ranks is {c.recomputed_gbps:.4g} GB/s; colbench's value is used"
            )


def _agrees(check: _Check, factor: float) -> bool:
    return infer.bandwidth_agrees(check.size_bytes, check.time_text, check.printed, factor)


def _constant_scale(bad: list[_Check], factor: float) -> float:
    """The factor between the log's values and colbench's, NaN when too few tell.

    The largest printed value carries the most digits: take the factor from it,
    snapped to the op's busbw factor (or its inverse) when it is that.
    """
    sized = [c for c in bad if c.recomputed_gbps > 0 and float(c.printed) >= 0.1]
    if len(sized) < 3:
        return math.nan
    best = max(sized, key=lambda c: float(c.printed))
    scale = float(best.printed) / best.recomputed_gbps
    for known in (factor, 1 / factor if factor else math.nan):
        if math.isclose(scale, known, rel_tol=1e-3):
            scale = known
    return scale
