"""The collectives colbench measures: an explicit registry, one module per op, and
``colbench explain OP``: how one collective's size, count and bandwidths are defined."""

from __future__ import annotations

import textwrap

from colbench.bench.ops import (
    all_gather,
    all_reduce,
    all_to_all,
    all_to_allv,
    barrier,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    scatter,
    sendrecv,
)
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import names_of
from colbench.errors import UsageError

#: Every collective, in the order sweeps and tables use.
REGISTRY: tuple[Collective, ...] = (
    all_reduce.OP,
    all_gather.OP,
    reduce_scatter.OP,
    broadcast.OP,
    reduce.OP,
    all_to_all.OP,
    all_to_allv.OP,
    gather.OP,
    scatter.OP,
    sendrecv.OP,
    barrier.OP,
)
BY_NAME: dict[str, Collective] = {op.name: op for op in REGISTRY}
# Names nccl-tests binaries use (alltoall_perf, ...) map onto ours.
ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_allv",
    "send_recv": "sendrecv",
    "bcast": "broadcast",
}


def get(name: str) -> Collective:
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key.replace("_", ""), ALIASES.get(key, key))
    if key not in BY_NAME:
        raise UsageError(f"unknown op {name!r}: choose from {', '.join(BY_NAME)} or all")
    return BY_NAME[key]


def parse_ops(spec: str) -> tuple[Collective, ...]:
    """``"all_reduce,all_gather"`` or ``"all"`` -> ops in registry order as given."""
    names = names_of(spec, list(BY_NAME), "op", "all_reduce or all_reduce,all_gather")
    return tuple(dict.fromkeys(get(name) for name in names))


#: How ``explain`` names the placements.
FORMS = {"out": "out-of-place", "in": "in-place"}


def explain_text(coll: Collective) -> str:
    factor_doc = " ".join((coll.busbw_factor.__doc__ or "").split())
    lines = [
        f"{coll.name}: {coll.summary}",
        f"  timed call : {coll.torch_call}",
        f"  size       : {coll.size_rule}",
        f"  count      : {coll.count_rule}",
        "  algbw      : size_bytes / time, in GB/s (1 GB/s = 1e9 bytes/s)",
        f"  busbw      : {coll.busbw_rule}",
        f"  why        : {factor_doc}",
        f"  placements : {', '.join(FORMS[p] for p in coll.placements)}",
    ]
    if coll.sized:
        lines.append("  example    : a requested 1K of float32:")
        for n in (1, 2, 3, 8):
            lay = coll.layout(1024, 4, n)
            lines.append(
                f"               n={n}: count {lay.count}, size_bytes {lay.size_bytes}, "
                f"busbw factor {coll.busbw_factor(n):.4g}"
            )
    if coll.uses_redop:
        lines.append("  redop      : sum, prod, min, max, avg (avg on floating types only)")
    if coll.rooted:
        lines.append("  root       : --root (default 0)")
    if coll.notes:
        lines.append(f"  note       : {coll.notes}")
    for label, text in coll.details:
        lines.extend(
            textwrap.wrap(text, 92, initial_indent=f"  {label:<10} : ", subsequent_indent=" " * 15)
        )
    return "\n".join(lines)
