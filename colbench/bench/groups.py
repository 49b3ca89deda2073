"""The process groups one rank talks over.

Two kinds, kept apart on every backend:

- the **measured** group carries the measured collective and its warm-up, nothing else:
  the world, or with ``--group-size``/``--split`` this rank's subgroup (:func:`members`),
  all groups running each collective at once (nccl-tests' NCCL_TESTS_SPLIT);
- the **side** group, a gloo group of the whole world, carries all bookkeeping: barriers,
  agreement on plans and budgets, gathering times and wrong-element counts.

Bookkeeping on the measured group would be measured too, and on NCCL would run under
the variant's settings (with ``NCCL_ALGO=Tree`` NCCL has no all_gather). What calls the
op on the measured group is an :class:`Engine`: torch.distributed's own calls
(:class:`TorchEngine`), or NCCL called directly (colbench.direct.engine).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from colbench.bench.ops.base import TORCH, Buffers, Collective, Context, Layout, Storage
from colbench.nccl.names import torch_version

if TYPE_CHECKING:
    from colbench.direct.knobs import Version


@dataclass(frozen=True)
class Subgroup:
    """The group this rank runs collectives in."""

    group: Any
    """torch ProcessGroup of the members."""
    ranks: tuple[int, ...]
    """Global rank of each member, in group-rank order."""
    rank: int
    """This process's rank within the group."""
    count: int
    """How many groups the world was split into."""

    @property
    def size(self) -> int:
        return len(self.ranks)


def contiguous(world_size: int, group_size: int) -> list[tuple[int, ...]]:
    """``[0..k-1], [k..2k-1], ...``: the ranks of each group, in group order."""
    if group_size < 1 or world_size % group_size:
        raise ValueError(f"group size {group_size} does not divide world size {world_size}")
    return [tuple(range(s, s + group_size)) for s in range(0, world_size, group_size)]


def strided(world_size: int, groups: int) -> list[tuple[int, ...]]:
    """``[0, k, 2k...], [1, k+1, ...], ...``: the ranks of equal rank mod ``groups``, the
    group of each ordered by rank (nccl-tests' NCCL_TESTS_SPLIT="MOD k")."""
    if groups < 1 or world_size % groups:
        raise ValueError(f"{groups} groups do not divide world size {world_size}")
    return [tuple(range(first, world_size, groups)) for first in range(groups)]


def members(
    group_size: int | None, group_mod: int | None, world_size: int
) -> list[tuple[int, ...]] | None:
    """Every group's ranks (--split mod:K, or --group-size / --split div:K); None: the
    world is one group and needs no subgroup."""
    if group_mod:
        return strided(world_size, group_mod)
    return contiguous(world_size, group_size) if group_size else None


def split_label(group_size: int | None, group_mod: int | None, world_size: int) -> str:
    """The rows' ``split`` column: ``div:K`` or ``mod:K``, empty for one group of all."""
    if group_mod:
        return f"mod:{group_mod}" if group_mod > 1 else ""
    return f"div:{group_size}" if group_size and group_size < world_size else ""


def split_world(
    layout: list[tuple[int, ...]],
    rank: int,
    timeout_s: float,
    new_group: Callable[..., Any] | None = None,
) -> Subgroup:
    """Make every group (a collective call: all ranks, same order) and return ours.

    The timeout is passed on: without it torch gives a subgroup its own default
    (10 minutes on NCCL), so ``--timeout`` would not reach the measured collective.
    """
    if new_group is None:
        import torch.distributed as dist

        new_group = dist.new_group
    timeout = _dt.timedelta(seconds=timeout_s)
    mine: Subgroup | None = None
    for ranks in layout:
        # new_group must be called by every rank for every group, in the same order.
        group = new_group(list(ranks), timeout=timeout)
        if rank in ranks:
            mine = Subgroup(group, ranks, ranks.index(rank), len(layout))
    assert mine is not None
    return mine


class SideGroup:
    """Bookkeeping over the gloo group of the whole world, on CPU tensors."""

    def __init__(self, group: Any, world_size: int) -> None:
        self.group = group
        self.world_size = world_size

    @classmethod
    def create(cls, world_size: int, timeout_s: float, in_flight: Any = None) -> SideGroup:
        """The side group; with ``in_flight`` (a rank's InFlight), its start-up is watched
        as the communicator's is, within --init-timeout, and names itself if it hangs."""
        import torch.distributed as dist

        timeout = _dt.timedelta(seconds=timeout_s)
        if in_flight is None:
            return cls(dist.new_group(backend="gloo", timeout=timeout), world_size)
        import os

        from colbench.host.job import Fault
        from colbench.host.watchdog import SIDE_GROUP_STARTUP

        setup = in_flight.phase
        in_flight.phase = SIDE_GROUP_STARTUP
        Fault(in_flight.rank, os.environ.get("COLBENCH_FAULT")).at_side_group()
        group = dist.new_group(backend="gloo", timeout=timeout)
        in_flight.phase = setup
        return cls(group, world_size)

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier(group=self.group)

    def gather_objects(self, mine: Any) -> list[Any]:
        """Every rank's picklable ``mine``, in rank order."""
        import torch.distributed as dist

        every: list[Any] = [None] * self.world_size
        dist.all_gather_object(every, mine, group=self.group)
        return every

    def min_int(self, value: int) -> int:
        return int(self._all_reduce([value], "int64", "MIN")[0])

    def sum_int(self, value: int) -> int:
        return int(self._all_reduce([value], "int64", "SUM")[0])

    def max_float(self, value: float) -> float:
        return float(self._all_reduce([value], "float64", "MAX")[0])

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        """Every rank's equally long list of floats, in rank order."""
        import torch
        import torch.distributed as dist

        mine = torch.tensor(values, dtype=torch.float64)
        every = torch.empty(self.world_size * len(values), dtype=torch.float64)
        # torch 2.10 renamed all_gather_into_tensor (the old name warns); older torch
        # has only the old one.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(every, mine, group=self.group)
        return every.view(self.world_size, len(values)).tolist()

    def _all_reduce(self, values: list[Any], dtype: str, op: str) -> list[Any]:
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=getattr(torch, dtype))
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op), group=self.group)
        return list(tensor.tolist())


@dataclass(frozen=True)
class Groups:
    """What one rank talks over: the side group and, with --group-size, its subgroup."""

    side: SideGroup
    subgroup: Subgroup | None = None

    @property
    def measured(self) -> Any:
        """The measured collective's group; None is the default (world) group."""
        return None if self.subgroup is None else self.subgroup.group


class Engine(Protocol):
    """What the loop measures through."""

    name: str

    def unsupported(self, coll: Collective) -> str | None:
        """Why this engine cannot run ``coll`` (the rows then say ``unsupported``)."""
        ...

    def allocate(
        self, coll: Collective, layout: Layout, ctx: Context, in_place: bool
    ) -> Storage: ...

    def bind(self, coll: Collective, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        """The timed call, every argument resolved once, outside the timed region."""
        ...

    def close(self, abort: bool = False) -> None:
        """Release what the engine made; ``abort``: this rank failed, do not wait for peers."""
        ...


class TorchEngine:
    """torch.distributed: the op contract's own calls on the measured process group."""

    name = TORCH

    def unsupported(self, coll: Collective) -> str | None:
        return None

    def allocate(self, coll: Collective, layout: Layout, ctx: Context, in_place: bool) -> Storage:
        return coll.allocate(layout, ctx, in_place)

    def bind(self, coll: Collective, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        return coll.bind(bufs, ctx)

    def close(self, abort: bool = False) -> None:
        pass


class Refused(TorchEngine):
    """An engine whose every row is ``unsupported``, with the reason: a knob asked of it
    that it, or the NCCL under it, cannot honour (colbench.direct.knobs). Measuring anyway
    would put rows under a variant's name that ran without what the name says. The loop
    neither allocates nor binds for an unsupported row, so only closing is the wrapped
    engine's."""

    def __init__(self, engine: Engine, reason: str) -> None:
        self.engine = engine
        self.name = engine.name
        self.reason = reason

    def unsupported(self, coll: Collective) -> str | None:
        return self.reason

    def close(self, abort: bool = False) -> None:
        self.engine.close(abort)


def knobbed(engine: Engine, register: str, version: Version | None) -> Engine:
    """``engine``, or a refused one where NCCL's newer knobs cannot hold: a variant's
    NCCL_CTA_POLICY, which a release older than the policy ignores without a word, or
    ``--register``, the direct engine's alone (colbench.direct.knobs.refusal).
    ``register``: what this engine is asked to register that it has not already answered
    for itself (the direct engine answers in its own start-up: pass ``none``);
    ``version``: the libnccl its calls go to."""
    import os

    from colbench.direct.engine import DIRECT, TORCH_CANNOT_REGISTER
    from colbench.direct.knobs import refusal

    if register != "none" and engine.name != DIRECT:
        return Refused(engine, TORCH_CANNOT_REGISTER)
    why = refusal("none", os.environ, version)
    return engine if why is None else Refused(engine, why)


def torch_nccl_version(device: Any) -> Version | None:
    """The NCCL torch loaded, on a GPU (None on a CPU: no NCCL, no knob to refuse)."""
    if device.type != "cuda":
        return None
    return torch_version()
