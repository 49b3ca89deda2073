"""Rank skew: which rank the others waited for, and whether one does so too often.

Every rank times how long it waited for the others inside the side group's barrier
before a timed batch, on its own host clock (``time.perf_counter_ns``), less the time it
was itself starved of CPU in there (:func:`wait_in`). Durations on one host need no
agreement between hosts' clocks, so the measure holds on a multi-node job whose clocks
are not synchronised. Everyone leaves a barrier when the last rank has entered it, so:

- the **straggler** of a row (``slowest_rank``) is the rank that waited least: the one
  that arrived last, for which the others waited (ties: the lowest rank);
- the **skew** (``skew_us``) is the longest wait minus the shortest: how long the first
  rank to arrive waited for the last one, less the barrier's own latency.

Arrival, not finish time: ranks of a ring finish a collective together whoever was late,
and a rooted op's root finishes early by design (see docs/semantics.md).

Some rank always arrives last: one is named the run's straggler only on the evidence of
many rows (:func:`straggler`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colbench.results.tables import Table, TableRow, column, register
from colbench.results.validity import STATUS_OK
from colbench.stats.holm import holm

#: Significance level of the straggler test, kept over the ranks by Holm's procedure: the
#: test is asked of each rank, so the chance that any rank of a uniform run is named is at
#: most this.
STRAGGLER_ALPHA = 0.001
#: Fewer counted rows than this name no straggler, however lopsided (at 2 ranks, 7 of 7
#: happens by chance 1 time in 128).
STRAGGLER_MIN_ROWS = 10


def min_share(ranks: int) -> float:
    """The share of the counted rows a straggler needs besides significance: two thirds
    of the way from chance to all of them (5/6 at 2 ranks, 3/4 at 4). With many rows the
    test alone names a rank for a bias too small to matter: rank 0 hosts the store the
    others report progress to, and on a loaded 2-core machine it arrived last in up to
    72% of the late-arrival rows of a run where no rank was held back."""
    return 1 / ranks + 2 / 3 * (1 - 1 / ranks)


#: A row counts toward the straggler test only when the others waited at least this
#: share of the row's time per call for its straggler: smaller spreads are within the
#: barrier's own latency and the machine's jitter, and cost the measurement little.
STRAGGLER_MIN_SKEW = 0.10
#: A row's time is marked as rank-skewed when ``-a max`` exceeds ``-a avg`` by more than
#: this share: which combination was chosen then changes the answer.
RANK_SKEW_RATIO = 0.05


@dataclass(frozen=True)
class RankTimes:
    """Every rank's share of one row, in rank order."""

    batch_us: tuple[float, ...]
    """Each rank's batch mean time per call."""
    wait_us: tuple[float, ...]
    """How long each rank waited for the others in the barrier before its timed batch."""
    starved_us: tuple[float, ...] = ()
    """Time each rank was starved of CPU inside that barrier (left out of wait_us)."""
    iters_us: tuple[tuple[float, ...], ...] = ()
    """Each rank's time of every timed call, in call order (the -J report's per-iteration
    blocks); empty where not kept."""

    @property
    def slowest_rank(self) -> int:
        """The rank that waited least: the last to arrive (lowest rank on a tie)."""
        return min(range(len(self.wait_us)), key=lambda r: (self.wait_us[r], r))

    @property
    def skew_us(self) -> float:
        """Longest wait minus shortest: how long the first rank waited for the last."""
        return max(self.wait_us) - min(self.wait_us)

    @property
    def avg_us(self) -> float:
        """What ``-a avg`` reports: the mean of the ranks' batch means."""
        return sum(self.batch_us) / len(self.batch_us)

    @property
    def max_us(self) -> float:
        """What ``-a max`` reports: the slowest rank's batch mean."""
        return max(self.batch_us)


def rank_skewed(avg_us: float | None, max_us: float | None) -> bool:
    """True when ``-a avg`` and ``-a max`` differ by more than RANK_SKEW_RATIO."""
    if avg_us is None or max_us is None or math.isnan(avg_us) or math.isnan(max_us):
        return False
    return avg_us > 0 and (max_us - avg_us) > RANK_SKEW_RATIO * avg_us


def _log_pmf(k: int, trials: int, p: float) -> float:
    """log P(X = k) for X ~ Binomial(trials, p), 0 < p < 1."""
    log_comb = math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1)
    return log_comb + k * math.log(p) + (trials - k) * math.log1p(-p)


def binomial_tail(successes: int, trials: int, p: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, p), 0 < p < 1: the one-sided p-value.

    Summed in log space (log-sum-exp): the terms' binomial coefficients alone pass any
    float at about a thousand trials (C(1100, 550) > 1e308), and a long sweep with
    --repeat counts more rows than that. A tail below the smallest float is 0.
    """
    if successes <= 0:
        return 1.0
    if successes > trials:
        return 0.0
    logs = [_log_pmf(k, trials, p) for k in range(successes, trials + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


@dataclass(frozen=True)
class Straggler:
    """The rank slowest in significantly many rows."""

    rank: int
    rows: int
    """Rows in which it was the slowest."""
    of_rows: int
    """Rows counted."""
    p_value: float
    """Chance of at least ``rows`` of ``of_rows`` if every rank were equally likely."""
    threshold: float
    """The significance level it passed (STRAGGLER_ALPHA over the ranks)."""


def straggler(slowest_counts: Sequence[int]) -> Straggler | None:
    """The straggler, if the counts say there is one; ``slowest_counts[r]`` is the rows in
    which rank r was the slowest.

    Under the null hypothesis every rank is equally likely to arrive last, so a rank's
    count is Binomial(rows, 1/N). The rank with the highest count is named when its
    one-sided p-value is rejected by Holm's procedure over the ranks at STRAGGLER_ALPHA
    (the first step: p <= STRAGGLER_ALPHA / N), its share is at least
    :func:`min_share` and at least STRAGGLER_MIN_ROWS rows were counted. "Most rows"
    would not do: at 2 ranks one of them always has most.
    """
    ranks = len(slowest_counts)
    rows = sum(slowest_counts)
    if ranks < 2 or rows < STRAGGLER_MIN_ROWS:
        return None
    worst = max(range(ranks), key=lambda r: (slowest_counts[r], -r))
    p_values = [binomial_tail(count, rows, 1 / ranks) for count in slowest_counts]
    named = holm(p_values, STRAGGLER_ALPHA).rejected[worst]
    if not named or slowest_counts[worst] < min_share(ranks) * rows:
        return None
    return Straggler(worst, slowest_counts[worst], rows, p_values[worst], STRAGGLER_ALPHA / ranks)


class SlowestCounter:
    """Counts, per rank, the measured rows in which it was the slowest by a margin that
    matters (skew at least STRAGGLER_MIN_SKEW of the time per call).

    Rows of rooted ops are not counted: their ranks leave the last warm-up call apart by
    design (a broadcast's root returns once its data is in the socket buffers, a
    gather's root last), so they reach the barrier apart whoever is slow.
    """

    def __init__(self) -> None:
        self.counts: list[int] = []

    def add(
        self,
        slowest_rank: int | None,
        world_size: int,
        skew_us: float | None,
        time_us: float,
        root: int = -1,
    ) -> None:
        if slowest_rank is None or skew_us is None or world_size < 2:
            return
        if len(self.counts) < world_size:
            self.counts += [0] * (world_size - len(self.counts))
        if root >= 0 or not skew_us >= STRAGGLER_MIN_SKEW * time_us:
            return
        self.counts[slowest_rank] += 1

    def add_row(self, row: Mapping[str, Any]) -> None:
        """A results row's straggler, when the row holds a measurement."""
        if row.get("status", STATUS_OK) == STATUS_OK:
            self.add(
                row.get("slowest_rank"),
                int(row.get("world_size") or 0),
                row.get("skew_us"),
                float(row.get("time_ranks_avg_us") or 0.0),
                int(row.get("root", -1)),
            )

    @property
    def rows(self) -> int:
        return sum(self.counts)

    def verdict(self) -> Straggler | None:
        return straggler(self.counts)


def summary_line(found: Straggler | None, counter: SlowestCounter, nodes: Sequence[str]) -> str:
    """The end-of-run sentence about stragglers (empty when no row knew its ranks).

    The rows it counts are *late-arrival rows*: those whose others waited for one rank
    at least STRAGGLER_MIN_SKEW of a call (:class:`SlowestCounter`)."""
    ranks = len(counter.counts)
    if not ranks:
        return ""
    # "Late-arrival rows", not "skewed rows": the line above the summary counts the
    # rank-skewed rows (-a avg against -a max), another thing.
    if found is None:
        return (
            f"none: no rank arrived last in significantly more of the {counter.rows} "
            f"late-arrival rows than chance (1 in {ranks}; p < {STRAGGLER_ALPHA:g}/{ranks}, "
            f"a share of {min_share(ranks):.0%} and {STRAGGLER_MIN_ROWS} rows needed)"
        )
    node = f" on {nodes[found.rank]}" if found.rank < len(nodes) else ""
    return (
        f"rank {found.rank}{node}, the last to arrive in {found.rows} of {found.of_rows} "
        f"late-arrival rows (binomial p = {found.p_value:.2g} < {STRAGGLER_ALPHA:g}/{ranks} "
        f"against chance 1 in {ranks})"
    )


PER_RANK_VERSION = 1
PER_RANK_HISTORY: dict[int, str] = {1: "first release (colbench results schema 4)."}


@dataclass(frozen=True, kw_only=True)
class RankRow(TableRow):
    """One rank's share of one row of results.csv: a line of per_rank.csv (--per-rank).

    Join with results.csv on run_id, variant, op, dtype, redop, in_place,
    requested_bytes and repeat.
    """

    schema_version: int = column("version of this column list (see below)", "", PER_RANK_VERSION)
    run_id: str = column("identifier of the run (the run directory's name)")
    variant: str = column("environment variant of the run (empty: none)")
    op: str = column("collective")
    dtype: str = column("element type (torch name)")
    redop: str = column("reduction operator, or none")
    in_place: int = column("1 for the in-place form, else 0")
    requested_bytes: int = column("size asked for on the command line", "B")
    size_bytes: int = column("bytes as nccl-tests reports them for this op", "B")
    repeat: int = column("sample index 0..R-1 of sweep --repeat R")
    rank: int = column("global rank", "rank")
    node: str = column("node label of the rank's host (as meta.json's rank_hosts)")
    time_us: float = column("this rank's batch mean time per call", "us")
    wait_us: float = column(
        "how long this rank waited inside the barrier before the timed batch (its own "
        "clock): the longest wait is the first to arrive, the shortest the straggler",
        "us",
    )
    starved_us: float = column(
        "time this rank was ready to run but had no CPU inside that barrier (throttled "
        "or preempted; Linux schedstat run delay), left out of wait_us",
        "us",
    )
    slowest: int = column("1 for the row's slowest_rank (the shortest wait), else 0")


PER_RANK = Table(
    "per_rank.csv",
    RankRow,
    PER_RANK_VERSION,
    PER_RANK_HISTORY,
    "With `sweep --per-rank`: one row per rank per row of results.csv.",
)
register(PER_RANK)
