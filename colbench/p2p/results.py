"""The p2p result file, ``p2p.csv``: one row per ordered pair, versioned, and its reader.

History of P2P_SCHEMA_VERSION (bump on any change of columns or their meaning):
  1 - first release.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from colbench.bench import percentile
from colbench.errors import UsageError

P2P_SCHEMA_VERSION = 1
FILE_NAME = "p2p.csv"

COLUMNS: dict[str, str] = {
    "schema_version": "version of this column list (see colbench.p2p.results)",
    "run_id": "identifier of the run (the run directory's name)",
    "backend": "torch.distributed backend: gloo or nccl",
    "device": "cpu, or the GPU model",
    "world_size": "ranks in the whole job (not all take part with --per-node)",
    "nnodes": "distinct nodes the ranks ran on",
    "mode": "uni: one direction at a time; bi: both directions of the pair at once",
    "src_rank": "sending rank",
    "dst_rank": "receiving rank",
    "src_node": "node label of the sending rank (hostname, or COLBENCH_NODE_LABEL)",
    "dst_node": "node label of the receiving rank",
    "size_bytes": "bandwidth message size in bytes (1K = 1024)",
    "warmup": "untimed messages before timing",
    "iters": "timed messages",
    "time_us": "mean one-way time of one message (to the receiver's acknowledgement), us",
    "time_min_us": "fastest message",
    "time_p50_us": "median message",
    "time_p99_us": "99th-percentile message",
    "time_max_us": "slowest message",
    "bw_gbps": "bandwidth: size_bytes / time_us, in GB/s (1e9 bytes/s)",
    "latency_bytes": "latency message size in bytes",
    "latency_us": "half the mean ping-pong round trip (osu_latency), microseconds",
    "latency_p50_us": "half the median round trip",
    "latency_p99_us": "half the 99th-percentile round trip",
    "repeat": "pass 0..R-1 of p2p --repeat R (each pass measures the whole matrix)",
}
TEXT_COLUMNS = ("run_id", "backend", "device", "mode", "src_node", "dst_node")


def time_columns(times_us: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times_us)
    return {
        "time_us": sum(ordered) / len(ordered),
        "time_min_us": ordered[0],
        "time_p50_us": percentile(ordered, 50),
        "time_p99_us": percentile(ordered, 99),
        "time_max_us": ordered[-1],
    }


def latency_columns(round_trips_us: Sequence[float]) -> dict[str, float]:
    ordered = sorted(round_trips_us)
    return {
        "latency_us": sum(ordered) / len(ordered) / 2,
        "latency_p50_us": percentile(ordered, 50) / 2,
        "latency_p99_us": percentile(ordered, 99) / 2,
    }


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(_cell(row[c]) for c in COLUMNS)


def load(path: str | os.PathLike[str]) -> Any:
    """A run's p2p rows as a pandas DataFrame; a run directory or the CSV itself.

    A file of a newer version, or one that is not a p2p file, is refused by name.
    """
    import pandas as pd

    file = Path(path)
    file = file / FILE_NAME if file.is_dir() else file
    if not file.is_file():
        raise UsageError(f"no p2p results at {file}")
    try:
        raw = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file} is not a p2p CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise UsageError(f"{file} is not a colbench p2p CSV: it lacks {', '.join(missing[:4])}")
    versions = {int(v) for v in raw["schema_version"] if v.isdigit()}
    if (
        len(versions) != len(set(raw["schema_version"]))
        or max(versions, default=1) > P2P_SCHEMA_VERSION
    ):
        raise UsageError(
            f"{file} has p2p schema version {', '.join(sorted(set(raw['schema_version'])))}; "
            f"this colbench reads 1 to {P2P_SCHEMA_VERSION}"
        )
    frame = raw[list(COLUMNS)].copy()
    for column in COLUMNS:
        if column in TEXT_COLUMNS:
            frame[column] = raw[column].astype("string")
        elif column.endswith(("_us", "_gbps")):
            frame[column] = pd.to_numeric(raw[column]).astype("float64")
        else:
            frame[column] = pd.to_numeric(raw[column]).astype("int64")
    return frame
