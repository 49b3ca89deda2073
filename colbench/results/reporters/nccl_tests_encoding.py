"""nccl-tests' JSON report, value by value: the encodings ``src/util.cu`` writes by hand
(strings cut at what it cannot escape, doubles with six decimals, booleans as strings) and
its per-iteration summary (``computeIterStats``), kept to the quirk so that fleet tools
read colbench's report as nccl-tests'. The report itself is
:mod:`colbench.results.reporters.nccl_tests_json`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile_index(n: int, percentile: int) -> int:
    """nccl-tests' ``percentileIndex``: the nearest-rank index of a percentile of n
    sorted values (ceil(n * p / 100) - 1, at most n - 1)."""
    return min(n - 1, (n * percentile + 99) // 100 - 1)


@dataclass(frozen=True)
class IterStats:
    """One placement's per-iteration summary, as nccl-tests' ``computeIterStats``."""

    min_us: float
    max_us: float
    avg_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    stdev_us: float
    cv_pct: float


def iter_stats(times_us: Sequence[float]) -> IterStats:
    """The summary of ``times_us``: p50 = sorted[n // 2] (the upper median of an even
    count), p95/p99 by :func:`percentile_index`, the population stdev, cv = stdev / avg
    in percent (0 when avg is 0); sums taken over the sorted values, as nccl-tests does."""
    if not times_us:
        raise ValueError("no iteration times to summarise")
    ordered = sorted(times_us)
    n = len(ordered)
    total = 0.0
    for value in ordered:
        total += value
    avg = total / n
    var = 0.0
    for value in ordered:
        var += (value - avg) ** 2
    stdev = math.sqrt(var / n)
    return IterStats(
        min_us=ordered[0],
        max_us=ordered[-1],
        avg_us=avg,
        p50_us=ordered[n // 2],
        p95_us=ordered[percentile_index(n, 95)],
        p99_us=ordered[percentile_index(n, 99)],
        stdev_us=stdev,
        cv_pct=stdev / avg * 100.0 if avg > 0 else 0.0,
    )


def as_written(value_us: float) -> float:
    """A time as the report holds it (six decimals): summaries are computed from these,
    so a reader recomputing them from ``times_us`` finds the same figures."""
    return float(f"{value_us:f}")


def text(value: str) -> str:
    """A JSON string as util.cu's ``sanitizeJson`` writes it: ", \\, /, tab and newline
    escaped; cut at the first other control or non-ASCII character."""
    out = []
    for char in value:
        if char in '"\\/':
            out.append("\\" + char)
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif ord(char) <= 0x1F or ord(char) >= 0x7F:
            break
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def double(value: float | None) -> str:
    """``jsonDouble``: six decimals (%lf), NaN as the string "nan"; None as null."""
    if value is None:
        return "null"
    if value != value:
        return '"nan"'
    return f"{value:f}"


def boolean(value: bool) -> str:
    """``jsonBool``: the strings "true" and "false"."""
    return text("true" if value else "false")


def obj(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{text(key)}:{value}" for key, value in pairs) + "}"


def array(items: Sequence[str]) -> str:
    return "[" + ",".join(items) + "]"


def root_text(root: int) -> str:
    """The ``root`` cell: nccl-tests' table text, ``%6i``."""
    return text(f"{root:6d}")
