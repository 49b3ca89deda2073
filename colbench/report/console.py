"""The nccl-tests style console table, fed row by row as rank 0 measures them.

Column layout follows nccl-tests (size, count, type, redop, root, then time, algbw,
busbw and #wrong for out-of-place and in-place side by side) so that people who read
nccl-tests output read this without thinking.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from colbench import __version__
from colbench.dtypes import DTYPES

_HEAD = (("size", 12), ("count", 14), ("type", 10), ("redop", 8), ("root", 8))
_PER_PLACEMENT = (("time", 9), ("algbw", 8), ("busbw", 8), ("#wrong", 7))
_UNITS_HEAD = ("(B)", "(elements)", "", "", "")
_UNITS_PLACEMENT = ("(us)", "(GB/s)", "(GB/s)", "")
PLACEMENT_TITLES = {0: "out-of-place", 1: "in-place"}
UNITS_NOTE = "sizes in bytes, binary units (1K = 1024 B); bandwidth in GB/s (1 GB/s = 1e9 B/s)"


def _cells(values: Sequence[str], widths: Sequence[tuple[str, int]]) -> str:
    return "".join(f"{v:>{w}}" for v, (_, w) in zip(values, widths, strict=True))


def _commented(line: str) -> str:
    return "#" + line[1:] if line.startswith(" ") else "#" + line


def format_time_us(time_us: float) -> str:
    # nccl-tests' precision: fewer decimals as the number grows, same column width.
    if time_us >= 10000:
        return f"{time_us:.0f}"
    if time_us >= 100:
        return f"{time_us:.1f}"
    return f"{time_us:.2f}"


def type_name(dtype: str) -> str:
    return DTYPES[dtype].nccl_name if dtype in DTYPES else dtype


def column_header() -> list[str]:
    width_head = sum(w for _, w in _HEAD)
    width_block = sum(w for _, w in _PER_PLACEMENT)
    titles = " " * width_head + "".join(
        f"{PLACEMENT_TITLES[i]:>{width_block - 2}}  " for i in (0, 1)
    )
    names = _cells([n for n, _ in _HEAD], _HEAD) + 2 * _cells(
        [n for n, _ in _PER_PLACEMENT], _PER_PLACEMENT
    )
    units = _cells(_UNITS_HEAD, _HEAD) + 2 * _cells(_UNITS_PLACEMENT, _PER_PLACEMENT)
    return [_commented(titles.rstrip()), _commented(names), _commented(units.rstrip())]


def format_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """One table line from the rows of one size (one per placement measured)."""
    first = rows[0]
    head = _cells(
        [
            str(first["size_bytes"]),
            str(first["count"]),
            type_name(str(first["dtype"])),
            str(first["redop"]),
            str(first["root"]),
        ],
        _HEAD,
    )
    by_place = {int(r["in_place"]): r for r in rows}
    blocks = []
    for in_place in (0, 1):
        row = by_place.get(in_place)
        if row is None:
            blocks.append(_cells(["n/a"] * 4, _PER_PLACEMENT))
            continue
        if row.get("status", "ok") != "ok":
            blocks.append(_cells([str(row["status"])] * 3 + ["N/A"], _PER_PLACEMENT))
            continue
        wrong = row.get("wrong")
        blocks.append(
            _cells(
                [
                    format_time_us(float(row["time_us"])),
                    f"{float(row['algbw_gbps']):.2f}",
                    f"{float(row['busbw_gbps']):.2f}",
                    "N/A" if wrong is None else str(wrong),
                ],
                _PER_PLACEMENT,
            )
        )
    return head + "".join(blocks)


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
    check: bool,
    seed: int,
    ranks: Sequence[tuple[int, str, int, str]] = (),
    groups: int = 1,
) -> list[str]:
    split = f" in {groups} groups of {world_size // groups}" if groups > 1 else ""
    lines = [
        f"# colbench {__version__}: {', '.join(ops)} on {backend}, {world_size} rank(s){split} "
        f"on {nnodes} host(s), device {device}",
        f"# warmup {warmup}, iters {iters}, average {average}, check {'on' if check else 'off'}, "
        f"seed {seed}",
        f"# {UNITS_NOTE}",
        "#",
    ]
    lines += [
        f"#  Rank {r:3d} Pid {pid:7d} on {host:>12} device {dev}" for r, host, pid, dev in ranks
    ]
    return lines


class TableSink:
    """Rank 0's row sink: CSV first (so nothing measured is lost), then table and progress."""

    def __init__(
        self,
        write_row: Callable[[Mapping[str, Any]], None],
        show_table: bool = True,
        echo: Callable[[str], None] | None = None,
        warn: Callable[[str], None] | None = None,
        advance: Callable[[int], None] | None = None,
    ) -> None:
        self._write_row = write_row
        self._show = show_table
        self._echo = echo or (lambda line: print(line, file=sys.stdout, flush=True))
        self._warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._advance = advance or (lambda n: None)
        self._op: str | None = None
        self._repeat = 0
        self._busbw: list[float] = []
        self.rows_written = 0
        self.wrong_total = 0
        self.status_counts: dict[str, int] = {}

    def note(self, message: str) -> None:
        self._warn(f"colbench: note: {message}")

    def header(self, lines: Sequence[str]) -> None:
        if self._show:
            for line in lines:
                self._echo(line)

    def rows(self, coll: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in rows:
            self._write_row(row)
            self.rows_written += 1
            self.wrong_total += int(row.get("wrong") or 0)
            status = str(row.get("status", "ok"))
            self.status_counts[status] = self.status_counts.get(status, 0) + 1
        self._advance(len(rows))
        if not self._show:
            return
        # Each repeat of --repeat gets its own sections, so an op's average is per sample.
        repeat = int(rows[0].get("repeat") or 0)
        if coll.name != self._op or repeat != self._repeat:
            self._footer()
            self._op, self._repeat = coll.name, repeat
            self._echo(f"# {coll.name}" + (f"  (repeat {repeat})" if repeat else ""))
            for line in column_header():
                self._echo(line)
        self._busbw.extend(float(r["busbw_gbps"]) for r in rows if r.get("busbw_gbps") is not None)
        self._echo(format_line(rows))

    def _footer(self) -> None:
        if self._op is not None and self._busbw:
            avg = sum(self._busbw) / len(self._busbw)
            self._echo(f"# Avg bus bandwidth    : {avg:.4g} GB/s  ({self._op})")
            self._echo("#")
        self._busbw = []

    def close(self) -> None:
        if not self._show:
            return
        self._footer()
        verdict = "OK" if self.wrong_total == 0 else "FAILED"
        self._echo(f"# Wrong elements       : {self.wrong_total} {verdict}")
