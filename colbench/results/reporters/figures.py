"""Figure primitives every figure of colbench shares: the metrics, the headless pyplot, the
log2 size axis labelled as sizes are typed (1K, 1M, 1G), and saving.

A leaf: it knows matplotlib and sizes, nothing of runs or analyses, so the analyses that draw
(compare, plot, predict, p2p's heatmap, crosscheck) import it and it imports none of them.

A metric is spelled as its column (``busbw_gbps``, ``time_p50_us``) everywhere: plot's
and compare's ``--metric``, gate's ``--check``. Its name without the unit (``busbw``,
``time_p50``) is accepted everywhere too, so a user need not remember which command
wanted which.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results import tables

#: Short alias -> column.
ALIASES: dict[str, str] = {
    "busbw": "busbw_gbps",
    "algbw": "algbw_gbps",
    "time": "time_us",
    "time_min": "time_min_us",
    "time_p50": "time_p50_us",
    "time_p99": "time_p99_us",
    "time_max": "time_max_us",
}


def column(name: str) -> str:
    """The column a metric's name means: itself, or the column its short alias stands for."""
    key = name.strip()
    return ALIASES.get(key, key)


@dataclass(frozen=True)
class Metric:
    column: str
    axis_label: str
    title: str
    log_y: bool


METRICS: dict[str, Metric] = {
    "busbw": Metric("busbw_gbps", "bus bandwidth (GB/s)", "Bus bandwidth", False),
    "algbw": Metric("algbw_gbps", "algorithm bandwidth (GB/s)", "Algorithm bandwidth", False),
    "time": Metric("time_us", "time per call (µs)", "Time per call", True),
}


#: Most labelled ticks on the size axis before they are thinned to every 2nd, 5th... power.
_MAX_SIZE_TICKS = 11


def metric_key(name: str) -> str:
    """The key of :data:`METRICS` a ``--metric`` names, by its short alias (``busbw``) or
    its column (``busbw_gbps``), as every command accepts metrics."""
    wanted = column(name)
    for key, known in METRICS.items():
        if known.column == wanted:
            return key
    choices = ", ".join(f"{key} ({m.column})" for key, m in METRICS.items())
    raise UsageError(f"bad --metric {name!r}: choose {choices}")


def metric(name: str) -> Metric:
    return METRICS[metric_key(name)]


def out_dir(out: str | os.PathLike[str] | None, default: Path) -> Path:
    """The directory a figure goes into: ``--out`` (a directory, as for every command;
    made if missing), else ``default`` (the run's own folder): never the current
    directory unless asked."""
    if out is None:
        return default
    path = Path(out)
    if path.suffix.lower() in (".png", ".svg", ".pdf"):
        raise UsageError(
            f"--out {out}: --out is a directory (for every command); the figure is written "
            f"into it, e.g. --out {path.parent}"
        )
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out}: not a directory; give a directory for the figure")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make --out {out}: {exc.strerror}") from None
    return path


def run_folder(path: str | os.PathLike[str]) -> Path:
    """The folder of a run given as its directory or its results.csv."""
    given = Path(path)
    return given if given.is_dir() else given.parent


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def size_ticks(
    low_bytes: float, high_bytes: float, max_ticks: int = _MAX_SIZE_TICKS
) -> list[float]:
    """Powers of two spanning [low, high], at most ~``max_ticks`` of them.

    When they must be thinned, every 2nd, 5th or 10th power is kept: those steps divide
    10, so the labels still land on 1K, 1M and 1G.
    """
    first = math.floor(math.log2(max(low_bytes, 1)))
    last = math.ceil(math.log2(max(high_bytes, 1)))
    step = next((s for s in (1, 2, 5, 10) if (last - first) // s + 1 <= max_ticks), 20)
    start = first - first % step
    return [2.0**e for e in range(start, last + 1, step)]


def format_size_tick(value: float, _pos: Any = None) -> str:
    size = round(value)
    return format_size(size) if size >= 1 and abs(value - size) < 1e-6 * value else ""


def size_axis(
    ax: Any, low_bytes: float, high_bytes: float, max_ticks: int = _MAX_SIZE_TICKS
) -> None:
    """A log2 x-axis labelled 1K, 4K, 1M... from low to high (fewer labels on a small
    panel: ``max_ticks``)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(size_ticks(low_bytes, high_bytes, max_ticks)))
    ax.xaxis.set_major_formatter(FuncFormatter(format_size_tick))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(low_bytes / 1.25, high_bytes * 1.25)
    ax.set_xlabel("message size (binary units, 1K = 1024 B)")


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"{out}: use a .png, .svg or .pdf file name")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tables.checked(out):
            fig.savefig(out, dpi=110)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
    finally:
        pyplot().close(fig)
    return out


def unused_path(kind: str, labels: Sequence[str], directory: Path) -> Path:
    """``<kind>-<A>-vs-<B>.png`` in ``directory`` (``<A>-and-N-more`` for many), stepping
    aside to ``-2``, ``-3``... from a file already there: a figure never overwrites an
    earlier one."""
    safe = [re.sub(r"[^A-Za-z0-9._+=-]+", "_", label).strip("_") or "run" for label in labels]
    named = "-vs-".join(safe) if len(safe) <= 2 else f"{safe[0]}-and-{len(safe) - 1}-more"
    stem = f"{kind}-{named}"[:120]
    for attempt in range(1, 1000):
        path = directory / f"{stem}{'' if attempt == 1 else f'-{attempt}'}.png"
        if not path.exists():
            return path
    raise UsageError(f"no free file name like {stem}.png in {directory}: give --out")
