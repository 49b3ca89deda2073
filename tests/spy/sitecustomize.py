"""A spy on torch.distributed for tests: records which process group every call used.

Put this directory first on PYTHONPATH and set COLBENCH_SPY_DIR: every Python process
of the run (the colbench parent, forked and spawned ranks, torchrun's workers) then
wraps the public torch.distributed collectives before colbench imports them, and
appends one JSON line per call to ``$COLBENCH_SPY_DIR/<pid>.jsonl``:

    {"fn": "all_reduce", "group": "<group name>", "backend": "gloo", "op": "all_reduce"}

``op`` is the collective colbench has in flight when the call is made (the nearest
caller frame holding a colbench Collective as ``coll`` or ``self``), or null during
start-up. ``new_group`` lines record the group made, its ranks, backend and timeout.
The calls themselves go through unchanged: this records, it does not fake.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from typing import Any

_SPY_DIR = os.environ.get("COLBENCH_SPY_DIR")

_COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single",
    "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "broadcast",
    "reduce", "all_to_all", "all_to_all_single",
    "gather", "scatter", "barrier", "monitored_barrier", "all_gather_object",
    "gather_object", "broadcast_object_list", "scatter_object_list", "send", "recv",
    "batch_isend_irecv",
)  # fmt: skip
# isend and irecv stay unwrapped: P2POp accepts only torch's own functions (by identity),
# and batch_isend_irecv, which is wrapped, reports every P2POp's group.


def _write(record: dict[str, Any]) -> None:
    assert _SPY_DIR is not None
    record["pid"] = os.getpid()
    with open(os.path.join(_SPY_DIR, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _group_name(dist: Any, group: Any) -> tuple[str, str]:
    """The group's name, ``WORLD`` for the default group (``group=None`` means it)."""
    pg = group if group is not None else dist.group.WORLD
    name = "WORLD" if pg is dist.group.WORLD else str(pg.group_name)
    return name, str(dist.get_backend(pg))


def _op_in_flight() -> str | None:
    from colbench.bench.ops.base import Collective

    frame = sys._getframe(2)
    while frame is not None:
        for name in ("coll", "self"):
            value = frame.f_locals.get(name)
            if isinstance(value, Collective):
                return value.name
            # Test wrappers around an op (a corrupting op) keep it as .inner.
            inner = getattr(value, "inner", None)
            if isinstance(inner, Collective):
                return inner.name
        frame = frame.f_back
    return None


def _groups_of(fn_name: str, bound: inspect.BoundArguments) -> list[Any]:
    if fn_name == "batch_isend_irecv":
        return [p2p.group for p2p in bound.arguments["p2p_op_list"]]
    return [bound.arguments.get("group")]


def _wrap(dist: Any, fn_name: str) -> None:
    real = getattr(dist, fn_name)
    signature = inspect.signature(real)

    @functools.wraps(real)
    def spy(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        op = _op_in_flight()
        for group in _groups_of(fn_name, bound):
            name, backend = _group_name(dist, group)
            _write({"fn": fn_name, "group": name, "backend": backend, "op": op})
        return real(*args, **kwargs)

    setattr(dist, fn_name, spy)


def _wrap_new_group(dist: Any) -> None:
    real = dist.new_group

    @functools.wraps(real)
    def spy(*args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(real).bind(*args, **kwargs)
        group = real(*args, **kwargs)
        timeout = bound.arguments.get("timeout")
        ranks = bound.arguments.get("ranks")
        _write(
            {
                "fn": "new_group",
                # Ranks outside the new group get a marker, not a group.
                "group": str(group.group_name) if hasattr(group, "group_name") else None,
                "ranks": None if ranks is None else list(ranks),
                "backend": bound.arguments.get("backend"),
                "timeout_s": None if timeout is None else timeout.total_seconds(),
            }
        )
        return group

    dist.new_group = spy


def _install() -> None:
    import torch.distributed as dist

    for fn_name in _COLLECTIVES:
        if hasattr(dist, fn_name):
            _wrap(dist, fn_name)
    _wrap_new_group(dist)


if _SPY_DIR:
    _install()
