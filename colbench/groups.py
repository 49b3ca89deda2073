"""Process subgroups: the world split into contiguous groups that run each collective
at the same time, like nccl-tests' NCCL_TESTS_SPLIT.

Each group is a real ``torch.distributed`` process group made with ``new_group``;
ops receive it, with its members' global ranks, through their Context. Timing and
wrong-count reductions stay on the world group, so rank 0 sees every rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def split_world(group_size: int, world_size: int, rank: int) -> Subgroup:
    """Make every group (a collective call: all ranks, same order) and return ours."""
    import torch.distributed as dist

    mine: Subgroup | None = None
    layout = contiguous(world_size, group_size)
    for ranks in layout:
        # new_group must be called by every rank for every group, in the same order.
        group = dist.new_group(list(ranks))
        if rank in ranks:
            mine = Subgroup(group, ranks, ranks.index(rank), len(layout))
    assert mine is not None
    return mine
