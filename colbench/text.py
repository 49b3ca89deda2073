"""The one fixed-width table formatter: every table colbench prints is laid out here.

A table is a tuple of :class:`Column`; the titles are a comment line (``#``) over their
columns, so a reader of the text, like one of nccl-tests', skips them. Cells are strings:
units and precision are the caller's business, the layout is this module's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal


@dataclass(frozen=True)
class Column:
    title: str
    width: int = 0
    """Cells are padded to this many characters; 0: free text, never padded."""
    align: Literal["<", ">"] = ">"
    gap: str = " "
    """What stands before the cell (nothing before a line's first)."""


def line(
    cells: Sequence[object], columns: Sequence[Column], lead: str = "  ", apart: bool = False
) -> str:
    """One row: ``lead``, then each cell padded into its column after its gap; trailing
    blanks dropped. With ``apart``, a cell that fills its column keeps a space before it
    even where its gap is empty (the line shifts, but two values never read as one)."""
    parts = []
    for i, (cell, column) in enumerate(zip(cells, columns, strict=False)):
        text = str(cell)
        gap = column.gap if i else ""
        if apart and not gap and len(text) >= column.width:
            parts.append(" " + text)
        else:
            parts.append(
                gap + (format(text, f"{column.align}{column.width}") if column.width else text)
            )
    return (lead + "".join(parts)).rstrip()


def header(columns: Sequence[Column], lead: str = "  ", apart: bool = False) -> str:
    """The titles, laid out as a row would be, as a comment line."""
    return "#" + line([c.title for c in columns], columns, lead, apart)[1:]


def fit(columns: Sequence[Column], rows: Sequence[Sequence[object]]) -> tuple[Column, ...]:
    """``columns`` at least as wide as their title and every cell of ``rows``."""
    return tuple(
        replace(
            c, width=max([c.width, len(c.title)] + [len(str(r[i])) for r in rows if i < len(r)])
        )
        for i, c in enumerate(columns)
    )


def number(value: float | None) -> str:
    """A measured value in 4 significant digits; ``-`` where there is none (None, NaN)."""
    if value is None or value != value:  # NaN is the only value unequal to itself
        return "-"
    return f"{float(value):.4g}"


def markdown(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table (job summaries, generated docs): the head, its rule, a line per row.
    An untitled column's head is one blank. Cells go in as they are: a caller whose text
    may hold ``|`` passes it through :func:`escape`."""
    return [
        "|" + "|".join(f" {title} " if title else " " for title in head) + "|",
        "|" + "---|" * len(head),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]


def escape(cell: str) -> str:
    """``cell`` safe inside a Markdown table: its pipes escaped, its line breaks blanks."""
    return cell.replace("|", "\\|").replace("\n", " ")
