"""How counts are said in the lines colbench prints: "1 row", "2 rows", never "1 rows".

A leaf: it imports nothing of colbench, so any module that words a count may use it.
"""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and its noun in the right number: ``plural(1, "row")`` is "1 row",
    ``plural(3, "row")`` "3 rows"; ``many`` for a noun whose plural is not noun + s."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
