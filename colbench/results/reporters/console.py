"""The nccl-tests style console table, fed row by row as rank 0 measures them.

Column layout follows nccl-tests (size, count, type, redop, root, then time, algbw,
busbw and #wrong for out-of-place and in-place side by side) so that people who read
nccl-tests output read this without thinking.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from colbench import __version__, text
from colbench.bench.ops.data import DTYPES
from colbench.results.reporters.stragglers import (
    RANK_SKEW_RATIO,
    SlowestCounter,
    rank_skewed,
    summary_line,
)
from colbench.results.rows import HOST_BOUND_RATIO, STATUS_OK
from colbench.text import Column

# A value that still fills its column (text; numbers are fitted first) keeps a space
# before it (text.line's ``apart``): the line shifts, but two values never read as one.
_HEAD = (
    Column("size", 12, gap=""), Column("count", 14, gap=""), Column("type", 10, gap=""),
    Column("redop", 8, gap=""), Column("root", 8, gap=""),
)  # fmt: skip
_PER_PLACEMENT = (
    Column("time", 9, gap=""), Column("algbw", 8, gap=""), Column("busbw", 8, gap=""),
    Column("#wrong", 7, gap=""),
)  # fmt: skip
_UNITS_HEAD = ("(B)", "(elements)", "", "", "")
_UNITS_PLACEMENT = ("(us)", "(GB/s)", "(GB/s)", "")
PLACEMENT_TITLES = {0: "out-of-place", 1: "in-place"}
UNITS_NOTE = "sizes in bytes, binary units (1K = 1024 B); bandwidth in GB/s (1 GB/s = 1e9 B/s)"
HOST_BOUND_MARK = "*"
HOST_BOUND_NOTE = (
    f"{HOST_BOUND_MARK} after a time: host-bound, the GPU waited on the host (enqueue time "
    f">= {HOST_BOUND_RATIO:g}x the time per call), so the time is torch's launch cost, not "
    "the network's latency; --cuda-graph measures small messages without it"
)
RANK_SKEW_MARK = "!"
#: nccl-tests' line per rank under the header: each value after its label, in nccl-tests' widths.
_RANK = tuple(Column("", w) for w in (0, 3, 0, 7, 0, 12, 0, 0))


def _marks(row: Mapping[str, Any]) -> str:
    """What follows a time: host-bound, then rank-skewed (-a avg and -a max disagree)."""
    skewed = rank_skewed(row.get("time_ranks_avg_us"), row.get("time_ranks_max_us"))
    return (HOST_BOUND_MARK if row.get("host_bound") else "") + (RANK_SKEW_MARK if skewed else "")


Block = tuple[list[str], tuple[Column, ...]]


def fit(value: float, text: str, width: int) -> str:
    """``text`` if it leaves a space in a column of ``width``, else ``value`` in the %g
    form with as many digits as leave one (like nccl-tests' switch to 1e+06)."""
    room = width - 1
    if len(text) <= room:
        return text
    for digits in range(6, 0, -1):
        short = f"{value:.{digits}g}"
        if len(short) <= room:
            return short
    return short


#: One spelling for a cell with nothing to show: a placement torch lacks (no out-of-place
#: all_reduce) and a #wrong not counted (--check 0), where nccl-tests prints N/A.
NOT_AVAILABLE = "n/a"


def format_time_us(time_us: float) -> str:
    # nccl-tests' precision: fewer decimals as the number grows, same column width.
    if time_us >= 10000:
        return f"{time_us:.0f}"
    if time_us >= 100:
        return f"{time_us:.1f}"
    return f"{time_us:.2f}"


def type_name(dtype: str) -> str:
    """nccl-tests' name of a dtype (``float`` for float32): the table lines up with
    nccl-tests' own, line for line; results.csv, compare and gate keep torch's names
    (docs/output.md says so, and --dtype takes both)."""
    return DTYPES[dtype].nccl_name if dtype in DTYPES else dtype


def column_header() -> list[str]:
    block = sum(c.width for c in _PER_PLACEMENT)
    places = (
        Column("", sum(c.width for c in _HEAD), gap=""),
        *(Column(PLACEMENT_TITLES[i], block - 2, gap="  " if i else "") for i in (0, 1)),
    )
    columns = _HEAD + 2 * _PER_PLACEMENT
    units = _UNITS_HEAD + 2 * _UNITS_PLACEMENT
    return [
        text.header(places, lead="", apart=True),
        text.header(columns, lead="", apart=True),
        "#" + text.line(units, columns, lead="", apart=True)[1:],
    ]


def _number(value: Any, width: int) -> str:
    return fit(float(value), str(value), width)


def _status_block(status: str) -> Block:
    """A placement without a measurement: its status where the numbers would be."""
    widths = [c.width for c in _PER_PLACEMENT]
    if len(status) < min(widths[:3]):
        return [status] * 3 + [NOT_AVAILABLE], _PER_PLACEMENT
    # Too long for one cell (unsupported): one span over time, algbw and busbw.
    return [status, NOT_AVAILABLE], (Column("", sum(widths[:3]), gap=""), _PER_PLACEMENT[3])


def _measured_block(row: Mapping[str, Any]) -> Block:
    time_w, algbw_w, busbw_w, wrong_w = (c.width for c in _PER_PLACEMENT)
    time_us = float(row["time_us"])
    mark = _marks(row)
    wrong = row.get("wrong")
    cells = [
        fit(time_us, format_time_us(time_us), time_w - len(mark)) + mark,
        fit(float(row["algbw_gbps"]), f"{float(row['algbw_gbps']):.2f}", algbw_w),
        fit(float(row["busbw_gbps"]), f"{float(row['busbw_gbps']):.2f}", busbw_w),
        NOT_AVAILABLE if wrong is None else _number(wrong, wrong_w),
    ]
    return cells, _PER_PLACEMENT


def format_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """One table line from the rows of one size (one per placement measured).

    Every value leaves at least one space before it: a number too long for its column
    switches to the %g form (1.2e+06), a host-bound time carries HOST_BOUND_MARK, a
    rank-skewed one RANK_SKEW_MARK.
    """
    first = rows[0]
    cells = [
        _number(first["size_bytes"], _HEAD[0].width),
        _number(first["count"], _HEAD[1].width),
        type_name(str(first["dtype"])),
        str(first["redop"]),
        str(first["root"]),
    ]
    columns: tuple[Column, ...] = _HEAD
    by_place = {int(r["in_place"]): r for r in rows}
    for in_place in (0, 1):
        row = by_place.get(in_place)
        if row is None:
            block: Block = ([NOT_AVAILABLE] * 4, _PER_PLACEMENT)
        elif row.get("status", STATUS_OK) != STATUS_OK:
            block = _status_block(str(row["status"]))
        else:
            block = _measured_block(row)
        cells += block[0]
        columns += block[1]
    return text.line(cells, columns, lead="", apart=True)


def _check_text(passes: int) -> str:
    """--check in the header: on/off, or nccl-tests' -c N as N passes."""
    return "off" if passes == 0 else "on" if passes == 1 else f"{passes} passes"


def run_header(
    *,
    ops: Sequence[str],
    backend: str,
    world_size: int,
    nnodes: int,
    device: str,
    warmup: int,
    iters: int,
    average: str,
    check: int,
    seed: int,
    ranks: Sequence[tuple[int, str, int, str]] = (),
    groups: int = 1,
    split_by: str = "",
) -> list[str]:
    split = f" in {groups} groups of {world_size // groups}" if groups > 1 else ""
    if split_by.startswith("mod:"):
        split += f" by rank mod {groups}"
    lines = [
        f"# colbench {__version__}: {', '.join(ops)} on {backend}, {world_size} rank(s){split} "
        f"on {nnodes} host(s), device {device}",
        f"# warmup {warmup}, iters {iters}, average {average}, check {_check_text(check)}, "
        f"seed {seed}",
        f"# {UNITS_NOTE}",
        # Only a GPU has a host to wait on: gloo's calls block the host until done.
        *([f"# {HOST_BOUND_NOTE}"] if backend == "nccl" else []),
        "#",
    ]
    return lines + [
        text.line(("Rank", r, "Pid", pid, "on", host, "device", dev), _RANK, lead="#  ")
        for r, host, pid, dev in ranks
    ]


class TableSink:
    """The table of rank 0's rows, printed as they come, and its closing summary.

    It only prints: the CSV, meta.json and the progress bar are other reporters of the
    same rows (colbench.results.reporters.stream), which also order them.
    """

    def __init__(self, echo: Callable[[str], None], repeats: int = 1) -> None:
        self._echo = echo
        self._op: str | None = None
        self._repeat = 0
        #: sweep --repeat R: each repeat is a section of its own, and the summary gives
        #: each op's median over them.
        self.repeats = repeats
        self._busbw: list[float] = []
        self._averages: dict[str, list[float]] = {}
        self.rows_shown = 0
        self.wrong_total = 0
        self.host_bound_rows = 0
        self.rank_skewed_rows = 0
        self.slowest = SlowestCounter()
        #: Node label of each rank, to name a straggler by.
        self.nodes: list[str] = []

    def header(self, lines: Sequence[str]) -> None:
        for line in lines:
            self._echo(line)

    def rows(self, coll: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in rows:
            self.rows_shown += 1
            self.wrong_total += int(row.get("wrong") or 0)
            self.host_bound_rows += int(bool(row.get("host_bound")))
            self.slowest.add_row(row)
            if row.get("status", STATUS_OK) == STATUS_OK:
                self.rank_skewed_rows += rank_skewed(
                    row.get("time_ranks_avg_us"), row.get("time_ranks_max_us")
                )
        # Each repeat of --repeat gets its own sections, so an op's average is per sample.
        repeat = int(rows[0].get("repeat") or 0)
        if coll.name != self._op or repeat != self._repeat:
            self._footer()
            self._op, self._repeat = coll.name, repeat
            self._echo(f"# {coll.name}{self._repeat_label(repeat)}")
            if coll.notes:
                self._echo(f"#   {coll.notes}")
            for line in column_header():
                self._echo(line)
        self._busbw.extend(float(r["busbw_gbps"]) for r in rows if r.get("busbw_gbps") is not None)
        self._echo(format_line(rows))

    def _repeat_label(self, repeat: int) -> str:
        """Which sample of --repeat a section shows (its ``repeat`` in results.csv)."""
        if self.repeats > 1:
            return f"  (repeat {repeat} of {self.repeats})"
        return f"  (repeat {repeat})" if repeat else ""

    def _footer(self) -> None:
        if self._op is not None and self._busbw:
            avg = sum(self._busbw) / len(self._busbw)
            self._averages.setdefault(self._op, []).append(avg)
            self._echo(f"# Avg bus bandwidth    : {avg:.4g} GB/s  ({self._op})")
            self._echo("#")
        self._busbw = []

    def _repeat_medians(self) -> None:
        """Each op's Avg bus bandwidth over the repeats: their median, and each one."""
        for op, averages in self._averages.items():
            if len(averages) < 2:
                continue
            each = ", ".join(f"{a:.4g}" for a in averages)
            self._echo(
                f"# Avg bus bandwidth    : {statistics.median(averages):.4g} GB/s  ({op}: "
                f"median of {len(averages)} repeats; each {each})"
            )

    def close(self) -> None:
        self._footer()
        self._repeat_medians()
        verdict = "OK" if self.wrong_total == 0 else "FAILED"
        self._echo(f"# Wrong elements       : {self.wrong_total} {verdict}")
        if self.host_bound_rows:
            self._echo(
                f"# Host-bound rows      : {self.host_bound_rows} (time marked "
                f"{HOST_BOUND_MARK}): torch's launch cost, not the network; see --cuda-graph"
            )
        # Printed whenever the ranks' times were known, so the table ends the same way
        # whatever the run's noise.
        if self.slowest.counts:
            self._echo(
                f"# Rank-skewed rows     : {self.rank_skewed_rows} (time marked "
                f"{RANK_SKEW_MARK}): -a max exceeds -a avg by more than {RANK_SKEW_RATIO:.0%}; "
                "see docs/semantics.md for which to trust"
            )
        straggler = summary_line(self.slowest.verdict(), self.slowest, self.nodes)
        if straggler:
            self._echo(f"# Straggler            : {straggler}")
