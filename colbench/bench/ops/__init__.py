"""The collectives colbench measures: an explicit registry, one module per op."""

from __future__ import annotations

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
    if spec.strip() == "all":
        return REGISTRY
    names = [part for part in spec.split(",") if part.strip()]
    if not names:
        raise UsageError("empty --op: give e.g. all_reduce or all_reduce,all_gather or all")
    return tuple(dict.fromkeys(get(name) for name in names))
