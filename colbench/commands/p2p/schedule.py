"""Which ranks take part in a p2p matrix, and in which order their pairs are measured.

All pairs are measured in rounds of disjoint pairs, a round-robin tournament (the
circle method): N-1 rounds for an even N, N rounds for an odd N where each round one
rank sits out (the bye). Each round runs once per direction, so every ordered pair is
measured exactly once in 2(N-1) (or 2N) steps instead of N(N-1) one after the other.
``serial`` runs one pair per step, for fabrics where concurrent pairs would contend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from colbench.errors import UsageError

#: One step: ordered (src, dst) pairs measured at the same time, no rank in two of them.
Step = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Selection:
    """The ranks that take part, as groups that each get their own tournament.

    Plain and ``--per-node`` runs have one group; ``--rail`` has one group per local
    rank index (rail k: local rank k of every node), whose tournaments run side by side.
    """

    groups: tuple[tuple[int, ...], ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(r for group in self.groups for r in group))


def local_indices(nodes: Sequence[str]) -> list[int]:
    """Each rank's index among the ranks of its node, in rank order (its local rank)."""
    seen: dict[str, int] = {}
    out = []
    for node in nodes:
        out.append(seen.get(node, 0))
        seen[node] = seen.get(node, 0) + 1
    return out


def select(nodes: Sequence[str], per_node: bool = False, rail: bool = False) -> Selection:
    """The ranks to pair, from each rank's node (one entry per rank, in rank order); a
    config asks for one of ``per_node`` and ``rail`` at most (P2PConfig refuses both)."""
    world = len(nodes)
    node_count = len(set(nodes))
    if per_node or rail:
        if node_count < 2:
            flag = "--per-node" if per_node else "--rail"
            raise UsageError(
                f"{flag} pairs ranks of different nodes, but all {world} ranks run on one node"
            )
        local = local_indices(nodes)
        if per_node:
            return Selection((tuple(r for r in range(world) if local[r] == 0),))
        rails = sorted(set(local))
        groups = tuple(tuple(r for r in range(world) if local[r] == k) for k in rails)
        # A rail only some nodes have (uneven ranks per node) still pairs those nodes.
        return Selection(tuple(g for g in groups if len(g) >= 2))
    if world < 2:
        raise UsageError("p2p measures pairs of ranks: it needs at least 2 ranks")
    return Selection((tuple(range(world)),))


def tournament(members: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint unordered pairs covering every pair of ``members`` once.

    The circle method: the first member stays put, the others rotate one place per
    round; an odd count gets a placeholder, and whoever meets it sits the round out.
    """
    people: list[int | None] = list(members)
    if len(people) % 2:
        people.append(None)
    n = len(people)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = people[i], people[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if a < b else (b, a))
        rounds.append(sorted(pairs))
        people = [people[0], people[-1], *people[1:-1]]
    return rounds


def _rounds(selection: Selection, serial: bool) -> list[list[tuple[int, int]]]:
    per_group = [tournament(group) for group in selection.groups]
    # Groups hold disjoint ranks, so round k of every group runs in one step.
    merged = [
        sorted(p for rounds in per_group if k < len(rounds) for p in rounds[k])
        for k in range(max((len(r) for r in per_group), default=0))
    ]
    if serial:
        return [[pair] for rnd in merged for pair in rnd]
    return merged


def directed_steps(selection: Selection, serial: bool = False) -> list[Step]:
    """Each round twice, once per direction: every ordered pair exactly once."""
    steps: list[Step] = []
    for rnd in _rounds(selection, serial):
        steps.append(tuple(rnd))
        steps.append(tuple((b, a) for a, b in rnd))
    return steps


def pair_steps(selection: Selection, serial: bool = False) -> list[Step]:
    """Each round once, pairs as (low, high): both directions run at once (bidirectional)."""
    return [tuple(rnd) for rnd in _rounds(selection, serial)]


def role(step: Step, rank: int) -> tuple[str, int] | None:
    """``("src", peer)`` or ``("dst", peer)`` for ``rank`` in ``step``; None when idle."""
    for src, dst in step:
        if rank == src:
            return "src", dst
        if rank == dst:
            return "dst", src
    return None
