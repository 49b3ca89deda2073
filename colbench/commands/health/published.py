"""Health's figures placed against the published results: each node's own ranks (the
median over nodes) and the whole world's all_reduce, each beside the references for as
many GPUs (:mod:`colbench.commands.references.place` does the placing)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from colbench.commands.references.place import as_number, lines, place
from colbench.commands.references.table import load

#: Health's checks that are a collective of their own over a node or the world:
#: check -> (op, whether it spans one node).
HEALTH_CHECKS = {
    "intra_all_reduce": ("all_reduce", True),
    "intra_all_gather": ("all_gather", True),
    "world": ("all_reduce", False),
}


def place_health(
    findings: Iterable[Mapping[str, Any]],
    meta: Mapping[str, Any],
    references: str | Path | None = None,
) -> dict[str, Any]:
    """Health's node checks (each node's own ranks; the median over nodes) and its whole-
    world all_reduce, each beside the references for as many GPUs: one placement per
    span, ``{"table", "node": ..., "world": ...}``."""
    refs = load(references)
    local = meta.get("local_world_size")
    if isinstance(local, dict) and len(set(local.values())) == 1:
        local = next(iter(local.values()))
    per_node = local if isinstance(local, int) and not isinstance(local, bool) else None
    nodes = meta.get("nnodes") if isinstance(meta.get("nnodes"), int) else None
    world = meta.get("world_size") if isinstance(meta.get("world_size"), int) else None
    device = next((d for d in meta.get("devices") or [] if isinstance(d, str)), "")
    figures: dict[tuple[bool, str, int], list[float]] = defaultdict(list)
    for f in findings:
        check = HEALTH_CHECKS.get(str(f.get("check")))
        busbw = as_number(f.get("busbw_gbps"))
        if check is None or busbw is None or busbw <= 0:
            continue
        op, one_node = check
        figures[(one_node, op, int(f["size_bytes"]))].append(busbw)
    out: dict[str, Any] = {"table": "published" if references is None else str(references)}
    for one_node, span in ((True, "node"), (False, "world")):
        rows = [
            {
                "device": device,
                "op": op,
                "size_bytes": size,
                "busbw_gbps": statistics.median(values),
                "world_size": per_node if one_node else world,
                "nnodes": 1 if one_node else nodes,
                "status": "ok",
            }
            for (node_span, op, size), values in sorted(figures.items())
            if node_span == one_node
        ]
        if rows:
            out[span] = place(rows, meta, refs, out["table"])
    return out


def health_lines(placement: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for span, what in (("node", "each node's own ranks"), ("world", "the whole world")):
        if span in placement:
            out += [f"{what}: {line}" for line in lines(placement[span])]
    return out
