"""The questions the p2p verdict asks (colbench.commands.p2p.links): each node's and each
link's samples against the others', by the gate's rank test, Holm over the family."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from colbench.commands.gate.verdict import Verdict as RowVerdict
from colbench.commands.gate.verdict import judge as judge_samples
from colbench.stats import rank_tests
from colbench.stats.holm import holm

#: Nodes needed to ask a node's links against links that do not touch it.
MIN_NODES = 3

Pair = tuple[int, int]
#: (src, dst) -> one value per pass, in pass order.
Samples = Mapping[Pair, Sequence[float]]


@dataclass(frozen=True)
class Metric:
    name: str
    #: -1: lower is worse (bandwidth); +1: higher is worse (latency).
    worse_when: int
    #: How far beyond the others' median a link must be to count as slow, as a fraction.
    threshold: float

    def worse(self, a: float, b: float) -> float:
        return min(a, b) if self.worse_when < 0 else max(a, b)

    def shown(self, change: float) -> str:
        side = "below" if self.worse_when < 0 else "above"
        return f"{self.name} {abs(change):.0%} {side} the others' median"


@dataclass(frozen=True)
class Question:
    """One question asked of a node's or a link's samples, and the answer."""

    metric: Metric
    #: Relative change of the median against the others' median.
    change: float
    others_median: float
    #: One-sided rank test p-value; 1.0 when the medians are within the threshold.
    p_value: float
    #: Holm-adjusted over the family (filled in once every test is asked).
    adjusted: float = 1.0
    slow: bool = False

    def shown(self) -> str:
        return f"{self.metric.shown(self.change)} (p = {self.adjusted:.2g})"


@dataclass(frozen=True)
class Link:
    low: int
    high: int
    #: The worse direction's median over the passes.
    bw_gbps: float
    latency_us: float
    tests: tuple[Question, ...] = ()
    #: Judged against the fail-below limit (None: not asked).
    fail: Question | None = None

    @property
    def slow(self) -> bool:
        return any(t.slow for t in self.tests)

    @property
    def bw_below_pct(self) -> float:
        """How far below the others' median bandwidth in the fail-below test, in percent."""
        return -100.0 * self.fail.change if self.fail is not None else 0.0


def link_samples(samples: Samples, metric: Metric) -> dict[Pair, list[float]]:
    """(low, high) -> the worse direction's value in each pass."""
    out: dict[Pair, list[float]] = {}
    for (src, dst), values in samples.items():
        key = (min(src, dst), max(src, dst))
        other = samples.get((dst, src), values)
        out[key] = [metric.worse(a, b) for a, b in zip(values, other, strict=False)]
    return dict(sorted(out.items()))


def ask(others: Sequence[float], mine: Sequence[float], metric: Metric) -> Question:
    """The gate's question of ``mine`` against ``others`` moved by the threshold."""
    j = judge_samples(others, mine, metric.worse_when, metric.threshold, alpha=1.0)
    p = j.p_value if j.verdict is RowVerdict.WORSE and j.p_value is not None else 1.0
    return Question(metric, j.change, j.baseline_median, p)


def settle(tests: Sequence[Question], alpha: float) -> list[Question]:
    """The family's tests with their Holm-adjusted p-values and decisions."""
    p_values = [t.p_value for t in tests]
    family = holm(p_values, alpha)
    return [
        replace(t, adjusted=a, slow=k)
        for t, a, k in zip(tests, family.adjusted, family.rejected, strict=True)
    ]


def passes_needed(n_links: int, family: int, alpha: float) -> int:
    """The fewest passes with which a link's test can reach Holm's strictest level."""
    passes = 1
    while (
        n_links > 1
        and rank_tests.smallest_one_sided_p((n_links - 1) * passes, passes) > alpha / family
    ):
        passes += 1
    return passes


def metrics(bw_pct: float, latency_pct: float) -> tuple[Metric, Metric]:
    return Metric("bandwidth", -1, bw_pct / 100), Metric("latency", +1, latency_pct / 100)


def testable_nodes(ranks: Sequence[int], nodes: Mapping[int, str]) -> list[str]:
    """The nodes whose links can be asked against links that do not touch them."""
    labels = list(dict.fromkeys(nodes[r] for r in ranks))
    return labels if len(labels) >= MIN_NODES else []


@dataclass(frozen=True)
class Matrix:
    """Everything the questions are asked of: per metric, each link's samples by pass."""

    samples: Mapping[Metric, Mapping[Pair, Sequence[float]]]
    nodes: Mapping[int, str]
    passes: int

    @property
    def keys(self) -> list[Pair]:
        return list(next(iter(self.samples.values())))

    def crosses(self, key: Pair, node: str) -> bool:
        """A link from one of the node's ranks to another node's (through its NIC)."""
        return (self.nodes[key[0]] == node) != (self.nodes[key[1]] == node)

    def pooled(self, metric: Metric, keys: Sequence[Pair]) -> list[float]:
        return [v for key in keys for v in self.samples[metric][key]]

    def others(self, key: Pair, nodes_out: set[str], links_out: set[Pair]) -> list[Pair]:
        """The links a link is asked against: the rest, less the left-out ones and those
        through a left-out node; all the rest when that leaves none."""
        rest = [k for k in self.keys if k != key]
        kept = [
            k for k in rest if k not in links_out and not any(self.crosses(k, n) for n in nodes_out)
        ]
        return kept or rest


def ask_nodes(matrix: Matrix, labels: Sequence[str]) -> dict[str, tuple[Question, ...]]:
    """Each node's links to other nodes against the links among the other nodes."""
    out = {}
    ends = {k: (matrix.nodes[k[0]], matrix.nodes[k[1]]) for k in matrix.keys}
    for node in labels:
        mine = [k for k in matrix.keys if matrix.crosses(k, node)]
        theirs = [k for k, (a, b) in ends.items() if a != b and node not in (a, b)]
        if not mine or not theirs:
            continue
        out[node] = tuple(
            ask(matrix.pooled(metric, theirs), matrix.pooled(metric, mine), metric)
            for metric in matrix.samples
        )
    return out


def ask_links(
    matrix: Matrix, nodes_out: set[str], level: float, fail_pct: float | None, alpha: float
) -> list[Link]:
    """Every link asked against the others, per metric. The others leave out the links
    through left-out nodes and then, until no more are found, the links whose own test
    passes ``level`` (Holm's strictest step): two slow links would each hide in the
    other's spread."""
    limit = None if fail_pct is None else Metric("bandwidth", -1, fail_pct / 100)
    links_out: set[Pair] = set()
    while True:
        links = [
            _link(matrix, key, matrix.others(key, nodes_out, links_out), limit)
            for key in matrix.keys
        ]
        found = {(x.low, x.high) for x in links if min(t.p_value for t in x.tests) <= level}
        if found <= links_out:
            break
        links_out |= found
    if limit is not None:
        # --fail-below is a family of its own: one bandwidth question per link.
        settled = settle([link.fail for link in links if link.fail is not None], alpha)
        links = [replace(link, fail=f) for link, f in zip(links, settled, strict=True)]
    return links


def _link(matrix: Matrix, key: Pair, others: list[Pair], limit: Metric | None) -> Link:
    tests = tuple(
        ask(matrix.pooled(metric, others), values[key], metric)
        for metric, values in matrix.samples.items()
    )
    bw = next(iter(matrix.samples))
    fail = None
    if limit is not None:
        fail = ask(matrix.pooled(bw, others), matrix.samples[bw][key], limit)
    bw_median, latency_median = (statistics.median(v[key]) for v in matrix.samples.values())
    return Link(*key, bw_median, latency_median, tests, fail)


def settle_family(
    node_tests: dict[str, tuple[Question, ...]], links: list[Link], alpha: float
) -> tuple[dict[str, tuple[Question, ...]], list[Link]]:
    """Holm over every node's and link's questions at once."""
    family = [t for ts in node_tests.values() for t in ts] + [t for x in links for t in x.tests]
    settled = iter(settle(family, alpha))
    nodes_out = {n: tuple(next(settled) for _ in ts) for n, ts in node_tests.items()}
    links_out = [replace(x, tests=tuple(next(settled) for _ in x.tests)) for x in links]
    return nodes_out, links_out
