"""What a health run measures and how it judges: the levels, and one frozen config.

A level fixes how many repeated samples each check gets (``passes``) and how long one
timed batch may take (``step_s``): every batch's iterations are chosen from its untimed
first call (agreed by all ranks: the slowest), so a level's duration follows from the
number of steps the checks take for N nodes (:func:`estimate_s`), not from the links'
speed. That is the time each level says at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from colbench.commands.p2p.config import config_from
from colbench.config.model import BACKENDS, TaskRunFields
from colbench.config.validate import validate_launch
from colbench.errors import UsageError

RUN_LABEL = "health"
#: Every timed batch of a run, as rank 0 gathered them; judged after the ranks are done.
SAMPLES_FILE = "health.samples.json"
#: History: 1, the first; 2 adds ``gpu_bus_ids`` (each rank's GPU, null on CPU) and the
#: pair check's all_reduce (``pair_all_reduce``).
SAMPLES_VERSION = 2
MIB = 1024**2

#: A step's cost beyond its timed batch: the barrier, the untimed first call, the
#: agreement on iterations; measured at 60-90 ms on this 2-core machine with 6 ranks.
STEP_OVERHEAD_S = 0.1
#: Gathering the samples, judging, writing the files.
FIXED_S = 4.0
#: Fewest timed iterations in a batch, whatever its first call took: two, not one, since
#: a slow round's batch sets every concurrent pair's (the ranks agree on one count), and
#: one call per sample made the healthy pairs of that round too noisy to judge a slow
#: node at p < 0.01 on this machine; not three, which made a run with one slow node
#: overrun the level's stated time (20.4 s of 16 s at 6 nodes).
MIN_ITERS = 2
MAX_ITERS = 1000


@dataclass(frozen=True)
class Level:
    name: str
    #: Repeated samples of every check: a node is named only when they hold.
    passes: int
    #: Time budget of one timed batch.
    step_s: float
    #: The node-alone check's local copy.
    node_bytes: int
    #: Intra-node all_reduce and all_gather on each node's own ranks.
    intra_bytes: int
    #: Inter-node sendrecv rail by rail, and all_reduce over two nodes' ranks.
    pair_bytes: int
    #: all_reduce over the whole world.
    world_bytes: tuple[int, ...]


LEVELS = {
    "quick": Level("quick", 4, 0.15, 8 * MIB, 1 * MIB, 1 * MIB, (4 * MIB,)),
    "standard": Level("standard", 6, 0.9, 32 * MIB, 16 * MIB, 16 * MIB, (16 * MIB, 64 * MIB)),
    "long": Level("long", 10, 1.7, 64 * MIB, 64 * MIB, 64 * MIB, (64 * MIB, 256 * MIB)),
}

#: The ops of the intra-node check.
INTRA_OPS = ("all_reduce", "all_gather")


def steps(level: Level, nodes: int, ranks_per_node: int) -> dict[str, int]:
    """Timed batches per check for this shape of job."""
    intra = len(INTRA_OPS) if ranks_per_node > 1 else 0
    # A tournament's rounds of disjoint pairs: every node meets every other once.
    rounds = (nodes - 1 if nodes % 2 == 0 else nodes) * level.passes if nodes > 1 else 0
    return {
        "node": nodes * level.passes,
        "intra": intra * level.passes,
        "pair": rounds,
        "pair_all_reduce": rounds,
        "world": len(level.world_bytes) * level.passes,
    }


def estimate_s(level: Level, nodes: int, ranks_per_node: int) -> float:
    """How long the checks take, from the first check to the files written."""
    total = sum(steps(level, nodes, ranks_per_node).values())
    return total * (level.step_s + STEP_OVERHEAD_S) + FIXED_S


@dataclass(frozen=True)
class HealthConfig(TaskRunFields):
    """A complete health request: each field is the option of its name (``to``) in
    colbench.commands.health.options, whose help says what it means."""

    level: str = "quick"
    floors_path: str | None = None
    drain_list: str | None = None
    plot: bool = True

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise UsageError(f"bad --level {self.level!r}: use {', '.join(LEVELS)}")
        if self.backend not in BACKENDS:
            raise UsageError(f"bad --backend {self.backend!r}: use {', '.join(BACKENDS)}")
        validate_launch(self.launch)

    @property
    def plan(self) -> Level:
        return LEVELS[self.level]


def from_options(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> HealthConfig:
    """A config from the command line's values (colbench.commands.health.options)."""
    from colbench.commands.health.options import table

    return config_from(HealthConfig, table(), values, command_line)
