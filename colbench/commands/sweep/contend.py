"""A ``--contend`` run read back: each row's collective alone and under load, and the
load's own rate alone and beside it ([contend.md](../docs/contend.md)).

The figures are medians over the run's repeats, a description; whether the difference
is real is the paired gate's to say (``colbench gate RUN --variant-a contend=none
--variant-b contend=LOAD``), and the summary ends by naming that command.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from colbench import text
from colbench.commands.gate.paired import ROW_KEYS
from colbench.results.rows import STATUS_OK
from colbench.text import Column

_COLUMNS = (
    Column("op", 14), Column("dtype", 9), Column("size_bytes", 12), Column("place", 5),
    Column("alone_us", 10), Column("loaded_us", 10), Column("change", 8),
    Column("load_alone", 11), Column("load_beside", 11),
)  # fmt: skip


def summary_lines(
    frame: Any, pairs: Sequence[tuple[str, str]], unit: str, run: str = "RUN"
) -> list[str]:
    """The summary of every (A without the load, B with it) pair of variants in ``frame``
    (run ``run``'s loaded results table); ``unit``: the load's rate's."""
    lines: list[str] = []
    for name_a, name_b in pairs:
        a, b = _medians(frame, name_a), _medians(frame, name_b)
        if not a or not b:
            continue
        repeats = int(frame["repeat"].max()) + 1
        lines.append(
            f"# under load: {name_b} (B) against {name_a} (A), medians of {repeats} "
            f"repeat(s); the load's rate in {unit}"
        )
        lines.append(text.header(_COLUMNS, lead=""))
        for key, (time_a, _, _) in a.items():
            if key not in b:
                continue
            time_b, alone, beside = b[key]
            change = f"{time_b / time_a - 1:+.1%}" if time_a > 0 else "n/a"
            row = dict(zip(ROW_KEYS, key, strict=True))
            place = "in" if row["in_place"] else "out"
            cells = (
                row["op"], row["dtype"], row["size_bytes"], place, f"{time_a:.1f}",
                f"{time_b:.1f}", change, text.number(alone), text.number(beside),
            )  # fmt: skip
            lines.append(text.line(cells, _COLUMNS, lead=""))
        lines.append(
            f"# is it real? colbench gate {run} --variant-a {name_a} --variant-b {name_b} "
            "--check time_us:+10%"
        )
    return lines


def _medians(frame: Any, variant: str) -> dict[tuple[Any, ...], tuple[float, Any, Any]]:
    """Per row key: the median time_us and the load's median rates (alone, beside)."""
    rows = frame[(frame["variant"] == variant) & (frame["status"] == STATUS_OK)]
    found: dict[tuple[Any, ...], tuple[float, Any, Any]] = {}
    for key, group in rows.groupby(list(ROW_KEYS), sort=False, dropna=False):
        alone, beside = (_median(group[c]) for c in _rate_columns(group))
        found[tuple(key)] = (float(group["time_us"].median()), alone, beside)
    return found


def _rate_columns(group: Any) -> tuple[str, str]:
    if group["load_alone_busbw_gbps"].notna().any():
        return ("load_alone_busbw_gbps", "load_beside_busbw_gbps")
    return ("load_alone_tflops", "load_beside_tflops")


def _median(values: Any) -> float | None:
    known = [float(v) for v in values.dropna()]
    return statistics.median(known) if known else None
