"""The checks, as every rank runs them: each node alone, every node's own ranks at once,
disjoint pairs of nodes (sendrecv rail by rail, then all_reduce over both nodes' ranks),
the whole world.

Every rank walks the same steps (:class:`Walker`), each a sweep's timed batch
(colbench.bench.timing.timed_batch): a barrier over the side group, the step's ranks
make one call untimed for the samples (connections, caches), all ranks agree on the
iterations from the slowest first call so that the batch fits the level's budget, and
after another barrier the step's ranks time the batch. A rank not in a step only takes
part in its barriers and agreement. Each timed batch gives one sample (:class:`Sample`);
the passes of a level repeat every check, so a node is judged on samples that hold, not
on one.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from colbench.bench.ops import get as get_op
from colbench.bench.timing import timed_batch
from colbench.commands.health.config import INTRA_OPS, MAX_ITERS, MIN_ITERS, Level
from colbench.commands.p2p.measure import Buffers, Transport, bandwidth_call
from colbench.commands.p2p.schedule import Selection, pair_steps, role


@dataclass(frozen=True)
class Sample:
    """One timed batch's figure: ``where`` is a rank (node, intra, world) or the pair of
    ranks of an inter-node link (its lower rank first)."""

    check: str
    size_bytes: int
    where: tuple[int, ...]
    pass_index: int
    busbw_gbps: float
    #: world only: how long this rank waited for the others before each timed call, us.
    waits_us: tuple[float, ...] = ()
    times_us: tuple[float, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Who is where: every rank's node index, and each node's ranks."""

    node_of: tuple[int, ...]

    @property
    def nodes(self) -> list[tuple[int, ...]]:
        count = max(self.node_of) + 1
        return [tuple(r for r, n in enumerate(self.node_of) if n == k) for k in range(count)]

    @property
    def leaders(self) -> tuple[int, ...]:
        """Each node's first rank: its row in the pair matrix."""
        return tuple(ranks[0] for ranks in self.nodes)

    def node_rounds(self) -> list[list[tuple[int, int]]]:
        """Rounds of disjoint pairs of node indices (p2p's tournament over the nodes):
        both pair checks walk these."""
        nodes = tuple(range(len(self.nodes)))
        return [list(rnd) for rnd in pair_steps(Selection((nodes,)))] if len(nodes) > 1 else []

    def rails(self, pair: tuple[int, int]) -> list[tuple[int, int]]:
        """Local rank k of one node with local rank k of the other, for every k both
        have (rail k), lower rank first."""
        a, b = self.nodes[pair[0]], self.nodes[pair[1]]
        return [(min(x, y), max(x, y)) for x, y in zip(a, b, strict=False)]


@dataclass
class Walker:
    """Walks every rank through the same steps (see the module's docstring), pass after
    pass of the level on the run's placement and device."""

    rank: int
    side: Any
    timer: Any
    level: Level
    place: Placement
    device: Any
    on_step: Callable[[str], None]
    pass_index: int = 0
    samples: list[Sample] = field(default_factory=list)
    #: COLBENCH_FAULT's hook (colbench.host.job): its WHEN counts steps here.
    fault: Any = None

    def _begin(self, what: str) -> None:
        self.on_step(what)
        if self.fault is not None:
            self.fault.tick()

    def step(self, what: str, call: Callable[[], object] | None) -> list[float]:
        """One step: this rank's per-iteration times (empty when it takes no part)."""
        self._begin(what)
        # The first call is untimed for the samples; its time, the slowest rank's, sizes
        # the batch timed in its place (the sweep's --time-budget).
        (batch,) = timed_batch(self.side, self.timer, call, 1, longer=self._iters, gather=False)
        return batch.times_us

    def world_step(self, what: str, call: Callable[[], object]) -> tuple[list[float], list[float]]:
        """Every rank times each call alone after a barrier, and says how long it waited
        in it: the rank the others waited for is the straggler of that call."""
        self._begin(what)
        (first,) = timed_batch(self.side, self.timer, call, 1, gather=False)
        batches = [
            timed_batch(self.side, self.timer, call, 1, gather=False)[0]
            for _ in range(self._iters(first.times_us))
        ]
        return [b.times_us[0] for b in batches], [b.wait_us for b in batches]

    def _iters(self, first_us: list[float]) -> int:
        """Iterations that fill the step's budget at the slowest first call's pace
        (agreed by every rank; one that takes no part has none)."""
        slowest_us = self.side.max_float(sum(first_us))
        if slowest_us <= 0:
            return MAX_ITERS
        return max(MIN_ITERS, min(MAX_ITERS, int(self.level.step_s * 1e6 / slowest_us)))

    def keep(
        self, check: str, size_bytes: int, where: tuple[int, ...], times: Sequence[float],
        factor: float = 1.0, **evidence: tuple[float, ...],
    ) -> None:  # fmt: skip
        """A batch's sample: its bus bandwidth (``factor``: the op's) from its mean time."""
        gbps = size_bytes / statistics.fmean(times) / 1e3 * factor
        self.samples.append(Sample(check, size_bytes, where, self.pass_index, gbps, **evidence))


def node_alone(walker: Walker) -> None:
    """Each node in turn, alone: its ranks copy ``node_bytes`` in their own memory.

    Alone, so that a node's figure is its own: at once, nodes that share a host (or a
    switch) would be timed against each other's load."""
    import torch

    size_bytes, place = walker.level.node_bytes, walker.place
    src = torch.ones(size_bytes, dtype=torch.uint8, device=walker.device)
    dst = torch.empty_like(src)
    # Each pass starts one node further on: a slow spell of the host (or of whatever
    # ran just before) meets a different node each pass, not the same one every time.
    count = len(place.nodes)
    for turn in range(count):
        index = (turn + walker.pass_index) % count
        mine = walker.rank in place.nodes[index]
        copy = functools.partial(dst.copy_, src)
        times = walker.step(f"node {index} alone", copy if mine else None)
        if times:
            walker.keep("node", size_bytes, (walker.rank,), times)


def node_groups(place: Placement) -> dict[int, Any]:
    """Each node's own process group (every rank creates every group, in one order)."""
    import torch.distributed as dist

    return {k: dist.new_group(list(ranks)) for k, ranks in enumerate(place.nodes) if len(ranks) > 1}


def intra_node(walker: Walker, groups: dict[int, Any]) -> None:
    """all_reduce and all_gather on every node's own ranks, all nodes at once."""
    import torch
    import torch.distributed as dist

    if not groups:
        return
    node = walker.place.node_of[walker.rank]
    group = groups.get(node)
    n = len(walker.place.nodes[node])
    size_bytes, device = walker.level.intra_bytes, walker.device
    elems = size_bytes // 4
    chunk = max(1, elems // n)
    send = torch.ones(elems, dtype=torch.float32, device=device)
    part = torch.ones(chunk, dtype=torch.float32, device=device)
    whole = torch.empty(chunk * n, dtype=torch.float32, device=device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    calls = {
        "all_reduce": lambda: dist.all_reduce(send, group=group),
        "all_gather": lambda: gather(whole, part, group=group),
    }
    for op in INTRA_OPS:
        call = calls[op] if group is not None else None
        times = walker.step(f"intra-node {op}", call)
        if times:
            walker.keep(
                f"intra_{op}", size_bytes, (walker.rank,), times, get_op(op).busbw_factor(n)
            )


def pairs(walker: Walker, backend: str) -> None:
    """sendrecv both ways at once between two nodes' ranks of one local index (rail k:
    local rank k of each node, as p2p's ``--rail``), every rail of a pair of nodes at
    once, in rounds of disjoint pairs of nodes: every node meets every other once a
    pass. Rail by rail, so that a slow NIC (the one nearest a GPU) shows in its own
    rank's links, not spread over its node's. One sample per link, from its lower rank
    (both ends time the same exchange)."""
    place, size_bytes = walker.place, walker.level.pair_bytes
    rounds = place.node_rounds()
    if not rounds:
        return
    link = Transport(backend)
    bufs = Buffers.allocate(size_bytes, 1, walker.device)
    for index, rnd in enumerate(rounds):
        step = tuple(rail for pair in rnd for rail in place.rails(pair))
        where = role(step, walker.rank)
        call = None if where is None else bandwidth_call(link, *where, bufs, bidirectional=True)
        times = walker.step(f"pairs round {index + 1}", call)
        if times and where is not None and walker.rank < where[1]:
            walker.keep("pair", size_bytes, (walker.rank, where[1]), times)


@dataclass
class PairGroups:
    """The process groups of pairs of nodes (all ranks of both), made a round at a time
    as the first pass needs them and kept for the later passes; each rank holds its N-1
    pairs' groups until :meth:`destroy` (on NCCL, each a communicator with GPU buffers
    of its own).

    Every rank makes every round's groups, in one order. On a world whose NCCL
    communicator started eagerly (colbench binds each rank's device), torch makes each
    ``new_group`` an ncclCommSplit of the whole world, every rank taking part: N(N-1)/2
    of them for N nodes, 120 for 16. One ``split_group`` per round makes all of that
    round's pairs in one split, N-1 in all. Elsewhere (gloo, or a lazily started NCCL)
    a group per pair, which only its members connect."""

    place: Placement
    backend: str
    made: dict[tuple[int, int], Any] = field(default_factory=dict)
    #: torch.distributed, or a stand-in that records what was asked (tests).
    dist: Any = None

    def __post_init__(self) -> None:
        if self.dist is None:
            import torch.distributed as dist

            self.dist = dist

    def ranks(self, pair: tuple[int, int]) -> list[int]:
        nodes = self.place.nodes
        return sorted(nodes[pair[0]] + nodes[pair[1]])

    def _one_split(self) -> bool:
        dist = self.dist
        bound = getattr(dist.group.WORLD, "bound_device_id", None)
        return self.backend == "nccl" and bound is not None and hasattr(dist, "split_group")

    def make_round(self, rnd: Sequence[tuple[int, int]]) -> None:
        """The round's groups, if not made yet (every rank calls this, in round order)."""
        if all(pair in self.made for pair in rnd):
            return
        if self._one_split():
            group = self.dist.split_group(split_ranks=[self.ranks(pair) for pair in rnd])
            rank = self.dist.get_rank()
            for pair in rnd:
                self.made[pair] = group if rank in self.ranks(pair) else None
            return
        for pair in rnd:
            self.made[pair] = self.dist.new_group(self.ranks(pair))

    def destroy(self) -> None:
        """Free the pairs' communicators, in the order they were made (every rank's)."""
        dist, outside = self.dist, (None, self.dist.GroupMember.NON_GROUP_MEMBER)
        # One split's group serves all of a round's pairs: destroyed once.
        made = {id(group): group for group in self.made.values() if group not in outside}
        for group in made.values():
            dist.destroy_process_group(group)
        self.made.clear()


def pair_all_reduce(walker: Walker, pairs_of: PairGroups) -> None:
    """all_reduce of ``pair_bytes`` over all the ranks of two nodes, in the pair check's
    rounds: every GPU and NIC of both nodes at once, as a job across them would use
    them. One sample per pair, from its lowest rank, keyed by the two nodes' first
    ranks (the pair matrix's rows)."""
    import torch
    import torch.distributed as dist

    place, size_bytes = pairs_of.place, walker.level.pair_bytes
    tensor = torch.ones(size_bytes // 4, dtype=torch.float32, device=walker.device)
    node = place.node_of[walker.rank]
    for index, rnd in enumerate(place.node_rounds()):
        if any(pair not in pairs_of.made for pair in rnd):
            # Said before the groups are made: a rank stuck making them is named there.
            walker.on_step(f"pair all_reduce round {index + 1}: making its groups")
        pairs_of.make_round(rnd)
        mine = next((pair for pair in rnd if node in pair), None)
        call = None
        if mine is not None:
            call = functools.partial(dist.all_reduce, tensor, group=pairs_of.made[mine])
        times = walker.step(f"pair all_reduce round {index + 1}", call)
        if times and mine is not None and walker.rank == pairs_of.ranks(mine)[0]:
            factor = get_op("all_reduce").busbw_factor(len(pairs_of.ranks(mine)))
            key = (place.leaders[mine[0]], place.leaders[mine[1]])
            walker.keep("pair_all_reduce", size_bytes, key, times, factor)


def whole_world(walker: Walker, world_size: int) -> None:
    """all_reduce over every rank at the level's sizes; each call after a barrier whose
    waits name the rank the others waited for (results/reporters/stragglers.py's question)."""
    import torch
    import torch.distributed as dist

    factor = get_op("all_reduce").busbw_factor(world_size)
    for size_bytes in walker.level.world_bytes:
        tensor = torch.ones(size_bytes // 4, dtype=torch.float32, device=walker.device)
        call = functools.partial(dist.all_reduce, tensor)
        times, waits = walker.world_step(f"world all_reduce {size_bytes} B", call)
        evidence = {"waits_us": tuple(waits), "times_us": tuple(times)}
        walker.keep("world", size_bytes, (walker.rank,), times, factor, **evidence)
