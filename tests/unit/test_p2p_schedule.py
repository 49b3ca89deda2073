"""The p2p scheduler: every ordered pair once, disjoint rounds, odd N, node selections."""

from __future__ import annotations

import itertools

import pytest

from colbench.commands.p2p.schedule import (
    Selection,
    directed_steps,
    local_indices,
    pair_steps,
    role,
    select,
    tournament,
)
from colbench.errors import UsageError


def _every_ordered_pair(ranks: list[int]) -> list[tuple[int, int]]:
    return sorted(itertools.permutations(ranks, 2))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 16])
def test_every_ordered_pair_exactly_once_in_disjoint_steps(n: int) -> None:
    selection = select([f"node{r}" for r in range(n)])
    steps = directed_steps(selection)
    measured = sorted(p for step in steps for p in step)
    assert measured == _every_ordered_pair(list(range(n)))
    for step in steps:
        ranks = [r for pair in step for r in pair]
        assert len(ranks) == len(set(ranks)), step
    # N-1 rounds for even N, N for odd N; each round once per direction.
    assert len(steps) == 2 * (n - 1 if n % 2 == 0 else n)


@pytest.mark.parametrize("n", [3, 5, 7])
def test_odd_count_gives_each_rank_one_bye(n: int) -> None:
    rounds = tournament(list(range(n)))
    assert len(rounds) == n
    sitting_out = [set(range(n)) - {r for pair in rnd for r in pair} for rnd in rounds]
    assert all(len(s) == 1 for s in sitting_out)
    assert sorted(next(iter(s)) for s in sitting_out) == list(range(n))


def test_serial_runs_one_pair_per_step() -> None:
    steps = directed_steps(select(["a", "b", "c", "d", "e"]), serial=True)
    assert all(len(step) == 1 for step in steps)
    assert sorted(p for step in steps for p in step) == _every_ordered_pair([0, 1, 2, 3, 4])


def test_bidirectional_steps_hold_each_unordered_pair_once() -> None:
    steps = pair_steps(select(["a"] * 6))
    pairs = sorted(p for step in steps for p in step)
    assert pairs == sorted(itertools.combinations(range(6), 2))
    assert len(steps) == 5


def test_per_node_takes_the_first_rank_of_each_node() -> None:
    nodes = ["A", "A", "B", "B", "C", "C", "D", "D"]
    selection = select(nodes, per_node=True)
    assert selection.ranks == (0, 2, 4, 6)
    steps = directed_steps(selection)
    assert sorted(p for s in steps for p in s) == _every_ordered_pair([0, 2, 4, 6])
    assert all(role(s, r) is None for s in steps for r in (1, 3, 5, 7))


def test_rail_pairs_local_rank_k_with_local_rank_k_only() -> None:
    # Ranks interleaved across nodes: the local index is counted per node, in rank order.
    nodes = ["A", "B", "C", "A", "B", "C"]
    assert local_indices(nodes) == [0, 0, 0, 1, 1, 1]
    selection = select(nodes, rail=True)
    assert selection.groups == ((0, 1, 2), (3, 4, 5))
    steps = directed_steps(selection)
    measured = sorted(p for s in steps for p in s)
    assert measured == sorted(_every_ordered_pair([0, 1, 2]) + _every_ordered_pair([3, 4, 5]))
    # The two rails' rounds run side by side, still disjoint.
    assert len(steps) == 2 * 3
    for step in steps:
        ranks = [r for pair in step for r in pair]
        assert len(ranks) == len(set(ranks))
    assert all(nodes[a] != nodes[b] for s in steps for a, b in s)


def test_role_names_the_peer_and_the_direction() -> None:
    step = ((0, 3), (2, 1))
    assert role(step, 0) == ("src", 3)
    assert role(step, 1) == ("dst", 2)
    assert role(step, 4) is None


@pytest.mark.parametrize(
    ("nodes", "kwargs", "message"),
    [
        (["A"], {}, "at least 2 ranks"),
        (["A", "A"], {"per_node": True}, "all 2 ranks run on one node"),
    ],
)
def test_selections_that_cannot_pair_are_refused(
    nodes: list[str], kwargs: dict[str, bool], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        select(nodes, **kwargs)


def test_per_node_and_rail_together_are_refused_before_any_rank_starts() -> None:
    from colbench.commands.p2p.config import P2PConfig

    with pytest.raises(UsageError, match="choose one"):
        P2PConfig(per_node=True, rail=True)


def test_selection_ranks_are_sorted() -> None:
    assert Selection(((4, 2), (3,))).ranks == (2, 3, 4)
