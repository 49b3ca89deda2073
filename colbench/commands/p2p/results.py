"""The p2p result file, ``p2p.csv``: one row per ordered pair and pass, and its reader.

:class:`P2PRow` is declared once: the column list, the CSV header, the writer's checks
(colbench.results.tables) and docs/schema.md come from its fields. ``P2P.history`` says what
each version changed; bump P2P_SCHEMA_VERSION on any change of columns or their meaning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.results.tables import Table, TableRow, TableWriter, column, read_cells, register

P2P_SCHEMA_VERSION = 2


# kw_only: fields keep the file's column order, whichever have defaults.
@dataclass(frozen=True, kw_only=True)
class P2PRow(TableRow):
    """One ordered pair (src -> dst) in one pass of the matrix: a line of p2p.csv."""

    schema_version: int = column("version of this column list (see below)", "", P2P_SCHEMA_VERSION)
    run_id: str = column("identifier of the run (the run directory's name)")
    backend: str = column("torch.distributed backend: gloo or nccl")
    device: str = column("cpu, or the GPU model")
    world_size: int = column("ranks in the whole job (not all take part with --per-node)", "ranks")
    nnodes: int = column("distinct nodes the ranks ran on", "nodes")
    mode: str = column("uni: one direction at a time; bi: both directions of the pair at once")
    src_rank: int = column("sending rank", "rank")
    dst_rank: int = column("receiving rank", "rank")
    src_node: str = column("node label of the sending rank (hostname, or COLBENCH_NODE_LABEL)")
    dst_node: str = column("node label of the receiving rank")
    size_bytes: int = column("bandwidth message size (1K = 1024)", "B")
    warmup: int = column("untimed messages before timing", "messages")
    iters: int = column("timed messages", "messages")
    time_us: float = column(
        "mean one-way time of one message (to the receiver's acknowledgement)", "us"
    )
    time_min_us: float = column("fastest message", "us")
    time_p50_us: float = column("median message", "us")
    time_p99_us: float = column("99th-percentile message", "us")
    time_max_us: float = column("slowest message", "us")
    bw_gbps: float = column("bandwidth: size_bytes / time_us", "GB/s")
    latency_bytes: int = column("latency message size", "B")
    latency_us: float = column("half the mean ping-pong round trip (osu_latency)", "us")
    latency_p50_us: float = column("half the median round trip", "us")
    latency_p99_us: float = column("half the 99th-percentile round trip", "us")
    repeat: int = column("pass 0..R-1 of p2p --repeat R (each pass measures the whole matrix)")
    link_verdict: str = column(
        "what the verdict says of this pair's link (both directions, every pass): slow link, "
        "slow node (the link goes through a named node's NIC), ok, or not judged (too few "
        "ranks or passes)",
        default="",
    )
    link_p_value: float | None = column(
        "Holm-adjusted p-value behind link_verdict: the named node's or link's test; for ok, "
        "the link's closest test (empty: not judged); see docs/p2p.md#verdict",
        default=None,
    )


P2P = Table(
    "p2p.csv",
    P2PRow,
    P2P_SCHEMA_VERSION,
    {1: "first release.", 2: "link_verdict and link_p_value: the verdict on each link."},
    "`colbench p2p`: one row per ordered pair of ranks measured (per pass of --repeat).",
    added_in={"link_verdict": 2, "link_p_value": 2},
)
register(P2P)
FILE_NAME = P2P.file_name
#: Column name -> meaning. The CSV always has exactly these columns, in this order.
COLUMNS: dict[str, str] = P2P.columns


def load(path: str | os.PathLike[str]) -> Any:
    """A run's p2p rows as a pandas DataFrame; a run directory or the CSV itself.

    Files of earlier versions are read, the columns they lack left empty; a file of a
    newer version, or one that is not a p2p file, is refused by name.
    """
    import pandas as pd

    file = Path(path)
    file = file / FILE_NAME if file.is_dir() else file
    if not file.exists():
        raise UsageError(f"no p2p results at {file}")
    header, cells = read_cells(file, "colbench p2p CSV")
    raw = pd.DataFrame(cells, columns=header, dtype=str)
    # Every version's columns first: a file without them is no p2p file at all.
    missing = [c for c in COLUMNS if c not in raw.columns and c not in P2P.added_in]
    if missing:
        raise UsageError(f"{file} is not a colbench p2p CSV: it lacks {', '.join(missing[:4])}")
    versions = {int(v) for v in raw["schema_version"] if v.isascii() and v.isdigit()}
    if (
        len(versions) != len(set(raw["schema_version"]))
        or max(versions, default=1) > P2P_SCHEMA_VERSION
    ):
        raise UsageError(
            f"{file} has p2p schema version {', '.join(sorted(set(raw['schema_version'])))}; "
            f"this colbench reads 1 to {P2P_SCHEMA_VERSION}"
        )
    # Columns added after the file's version are empty (version 1 recorded no verdict).
    newest = max(versions, default=1)
    for name, added in P2P.added_in.items():
        if name not in raw.columns and added > newest:
            raw[name] = ""
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise UsageError(f"{file} says p2p schema version {newest} but lacks {', '.join(missing)}")
    return _typed(file, raw)


def _typed(file: Path, raw: Any) -> Any:
    import pandas as pd

    frame = raw[list(COLUMNS)].copy()
    for name in COLUMNS:
        if name in P2P.text_columns:
            frame[name] = raw[name].astype("string")
            continue
        try:
            if name in P2P.float_columns:
                # An empty cell is a missing number (link_p_value of an unjudged link).
                numbers = pd.to_numeric(raw[name].replace("", float("nan")))
                frame[name] = numbers.astype("float64")
            else:
                numbers = pd.to_numeric(raw[name])
                # astype truncates 1.5 to 1 without a word: a count must be whole.
                whole = numbers.astype("int64")
                if (whole != numbers).any():
                    raise ValueError(name)
                frame[name] = whole
        except (ValueError, TypeError, OverflowError):
            raise UsageError(f"{file}: column {name} holds a value that is not a number") from None
    return frame


def record_verdicts(
    path: str | os.PathLike[str], per_link: Mapping[tuple[int, int], tuple[str, float | None]]
) -> None:
    """Fill each row's link_verdict and link_p_value (``(low, high)`` -> verdict and
    p-value) in a run's p2p.csv. The file is written beside and moved over the old one,
    so a reader never sees half a file and the measured rows survive any failure."""
    file = Path(path)
    file = file / FILE_NAME if file.is_dir() else file
    frame = load(file)
    rows = []
    for record in frame.to_dict("records"):
        src, dst = int(record["src_rank"]), int(record["dst_rank"])
        verdict, p_value = per_link.get((min(src, dst), max(src, dst)), ("", None))
        cells = {"link_verdict": verdict, "link_p_value": p_value}
        rows.append(P2PRow(**{**record, **cells, "schema_version": P2P_SCHEMA_VERSION}))
    beside = file.with_name(f".{file.name}.verdict")
    beside.unlink(missing_ok=True)
    with TableWriter(beside, P2P) as writer:
        writer.write_all(rows)
    os.replace(beside, file)
