"""Which NCCL algorithms a collective may use under ``NCCL_ALGO``.

NCCL implements each collective with a fixed set of algorithms (AllReduce: Ring,
Tree, CollNet, NVLS...; AllGather and ReduceScatter: no Tree; Broadcast and Reduce:
Ring only). When ``NCCL_ALGO`` leaves a collective none of its algorithms, NCCL
refuses the call ("no algorithm/protocol available"), so a ring-vs-tree sweep would
stop at its first all_gather. colbench predicts that from the variable and reports
those rows as ``unsupported`` instead of calling NCCL.

Accepted forms, as NCCL reads them (not case sensitive):
``Ring,Tree`` (allow these), ``^Tree`` (allow all but these), and the per-collective
form ``allreduce:tree;allgather:ring`` (collectives not named keep every algorithm).
"""

from __future__ import annotations

from collections.abc import Sequence


def _allowed(spec: str, available: Sequence[str]) -> list[str]:
    names = [n.strip().lower() for n in spec.split(",") if n.strip()]
    exclude = bool(names) and names[0].startswith("^")
    if exclude:
        names[0] = names[0][1:]
    return [a for a in available if (a.lower() in names) != exclude]


def selection_for(value: str, nccl_name: str) -> str | None:
    """The part of ``NCCL_ALGO`` that governs collective ``nccl_name``; None: no limit."""
    value = value.strip()
    if not value:
        return None
    if ":" not in value:
        return value
    for part in value.split(";"):
        coll, sep, spec = part.partition(":")
        if sep and coll.strip().lower() == nccl_name.lower():
            return spec
    return None


def unsupported_reason(value: str | None, nccl_name: str, available: Sequence[str]) -> str | None:
    """Why NCCL cannot run ``nccl_name`` under ``NCCL_ALGO=value``, or None if it can."""
    if value is None:
        return None
    spec = selection_for(value, nccl_name)
    if spec is None or _allowed(spec, available):
        return None
    return (
        f"NCCL has no algorithm for {nccl_name} allowed by NCCL_ALGO={value} "
        f"(its algorithms: {', '.join(available)})"
    )
