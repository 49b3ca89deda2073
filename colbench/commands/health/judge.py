"""The verdict on a health run's samples: WARN and CRITICAL nodes, with their evidence.

**Against the fleet** (no floors), by p2p's rules (colbench.commands.p2p.link_tests): for
every check, a node's samples (one per pass) are asked the gate's question against the
other nodes' samples: is its median more than the tier's threshold below theirs, and do
its samples lie below theirs moved by that threshold (the exact one-sided rank test)?
For the pair checks, a node's samples are those of its links and the others' are the
links that do not touch it: p2p's node question. The rail-by-rail sendrecv asks it of
each rank's links (one slow NIC of eight would hide in its node's pooled links) and
keeps the node's worst rank, its p multiplied by the node's ranks (Bonferroni within the
node). Each tier is one family over every node and check, Holm at ``alpha``: the chance
that noise alone names any node is at most ``alpha`` per tier. WARN at p2p's threshold
(25% below), CRITICAL at 50% below. Fewer than 3 nodes cannot tell a slow node from the
others: nothing is judged.

**Which GPU or NIC.** A finding's ``rank`` is the rank its figure came from (the node's
worst); ``singled_out`` says the run can tell that it is that rank's GPU (and, for the
pair checks, the NIC nearest it), not the whole node's: the node has one rank, or that
rank's samples lie significantly below its node-mates' (the same test at the WARN
threshold, Holm over the node's ranks). A collective on the node's ranks (the
intra-node checks, the pair all_reduce) waits for its slowest rank: it tells no rank.

**Against floors** (``--floors``, colbench.commands.health.floors): a node's figure of a check
(the median of its samples) below the CRITICAL floor is CRITICAL, below the WARN floor
WARN, each at the false-alarm rate the floors state.

**The straggler** of the whole-world check is results/reporters/stragglers.py's: the rank the
others waited for in significantly more calls than chance (a binomial test); its node
is a WARN, never a CRITICAL: the calls say who was late, not by how much.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from colbench.commands.gate.checks import DEFAULT_ALPHA
from colbench.commands.p2p.link_tests import (
    MIN_NODES,
    Matrix,
    Metric,
    Question,
    ask,
    ask_nodes,
    settle,
)
from colbench.commands.p2p.links import DEFAULT_BW_PCT
from colbench.results.reporters.stragglers import SlowestCounter

OK, WARN, CRITICAL, NOT_JUDGED = "OK", "WARN", "CRITICAL", "not judged"
#: Severity for the Prometheus gauge and for sorting.
SEVERITY = {OK: 0, WARN: 1, CRITICAL: 2, NOT_JUDGED: -1}
WARN_PCT = DEFAULT_BW_PCT
CRITICAL_PCT = 50.0
#: The whole world has no node: its figure is the fleet's.
FLEET = "fleet"
#: Checks whose samples are links between two nodes' ranks (their lower rank first).
LINK_CHECKS = ("pair", "pair_all_reduce")
#: Checks each rank measures on its own: a rank's samples are its GPU's (or NIC's).
RANK_CHECKS = ("node", "pair")
TIERS = (Metric("busbw", -1, WARN_PCT / 100), Metric("busbw", -1, CRITICAL_PCT / 100))
#: One check's samples: a rank (or a link's two ranks) -> one value per pass.
Values = Mapping[tuple[int, ...], list[float]]


@dataclass(frozen=True)
class Finding:
    """What the run says of one node's check: one line of health.jsonl."""

    node: str
    check: str
    size_bytes: int
    busbw_gbps: float
    fleet_gbps: float | None = None
    floor_gbps: float | None = None
    verdict: str = NOT_JUDGED
    #: Holm-adjusted p of the gravest tier's test (fleet judging); None otherwise.
    p_value: float | None = None
    evidence: str = ""
    #: The rank whose samples were the node's worst (which GPU, where a node has several).
    rank: int | None = None
    #: The run can tell that it is ``rank``'s GPU or NIC, not the whole node's.
    singled_out: bool = False
    #: ``rank``'s GPU and the NIC nearest it, where singled out (colbench.commands.health.report).
    gpu: str | None = None
    nic: str | None = None


@dataclass(frozen=True)
class Samples:
    """A run's samples by check: (check, size) -> key -> one value per pass."""

    names: list[str]
    node_of: list[int]
    by_check: Mapping[tuple[str, int], Values]
    waits: Mapping[int, list[list[float]]]
    times: Mapping[int, list[list[float]]]
    #: Each rank's GPU by PCI address (None on CPU, and in version 1 files).
    gpu_bus_ids: list[str | None] = field(default_factory=list)

    def ranks_of(self, node: str) -> list[int]:
        return [r for r, name in enumerate(self.names) if name == node]


def samples_of(doc: Mapping[str, Any]) -> Samples:
    """health.samples.json, grouped: one value per pass for each place. Version 1 files
    hold a link's sample from both of its ranks (one exchange, timed at each end): they
    count as one, their mean, or a link would weigh twice in the rank tests."""
    per_pass: dict[tuple[str, int], dict[tuple[int, ...], dict[int, list[float]]]] = defaultdict(
        dict
    )
    waits: dict[int, list[list[float]]] = defaultdict(list)
    times: dict[int, list[list[float]]] = defaultdict(list)
    for s in sorted(doc["samples"], key=lambda s: s["pass_index"]):
        where = tuple(s["where"])
        passes = per_pass[(s["check"], s["size_bytes"])].setdefault(where, {})
        passes.setdefault(s["pass_index"], []).append(s["busbw_gbps"])
        if s["waits_us"]:
            waits[where[0]].append(list(s["waits_us"]))
            times[where[0]].append(list(s["times_us"]))
    by_check = {
        key: {where: [statistics.fmean(v) for v in passes.values()] for where, passes in d.items()}
        for key, d in per_pass.items()
    }
    names = list(doc["names"])
    buses = list(doc.get("gpu_bus_ids") or [None] * len(names))
    return Samples(names, list(doc["node_of"]), by_check, waits, times, buses)


def link_medians(
    samples: Samples, links: Values, by_node: bool = False
) -> dict[tuple[int, int], float]:
    """Each link's median over the passes, both ways round (the pair matrices); by node,
    each pair of nodes' slowest link, under the nodes' first ranks."""
    first = {name: samples.names.index(name) for name in samples.names}
    out: dict[tuple[int, int], float] = {}
    for (a, b), vals in links.items():
        if by_node:
            a, b = first[samples.names[a]], first[samples.names[b]]
        median = statistics.median(vals)
        out[(a, b)] = out[(b, a)] = min(median, out.get((a, b), median))
    return out


def _rank_links(values: Values) -> dict[tuple[int, ...], list[float]]:
    """The link samples of every rank (each link under both its ranks), as if measured
    by the rank alone: the rank-by-rank form of a link check."""
    mine: dict[tuple[int, ...], list[float]] = defaultdict(list)
    for (a, b), vals in values.items():
        for r in (a, b):
            mine[(r,)].extend(vals)
    return mine


#: The gate's question of a node's samples at each tier (WARN, CRITICAL).
Asked = tuple[Question, Question]
#: Per node of one check: the rank that answers for it (None: no rank's own), its
#: samples, and its questions against the other nodes (None: not asked).
NodeFigure = tuple[int | None, list[float], Asked | None]


def _per_node(samples: Samples, check: str, values: Values) -> dict[str, NodeFigure]:
    """Each node's :data:`NodeFigure` of one check."""
    if check == "pair":
        return _pair_ranks(samples, values)
    if check == "pair_all_reduce":
        # One sample per pair of nodes, keyed by their first ranks, all of their ranks at
        # once: the node's figure is no rank's own.
        judged = _pairs_asked(samples, values)
        named = {samples.names[r]: v for (r,), v in _rank_links(values).items()}
        return {node: (None, v, judged.get(node)) for node, v in named.items()}
    worst: dict[str, tuple[int, list[float]]] = {}  # each node's rank of the lowest median
    for (rank,), vals in values.items():
        node = samples.names[rank]
        if node not in worst or statistics.median(vals) < statistics.median(worst[node][1]):
            worst[node] = (rank, vals)
    out: dict[str, NodeFigure] = {}
    for node, (rank, mine) in worst.items():
        others = [v for n, (_, vals) in worst.items() if n != node for v in vals]
        asked = (ask(others, mine, TIERS[0]), ask(others, mine, TIERS[1])) if others else None
        out[node] = (rank, mine, asked)
    return out


def _pairs_asked(samples: Samples, values: Values) -> dict[str, Asked]:
    """p2p's node question of the pair all_reduce: a node's pairs against the others'."""
    if len({len(samples.ranks_of(n)) for n in samples.names}) > 1:
        # A pair's figure grows with its GPUs and NICs: nodes of different rank
        # counts are not alike, and the pair all_reduce is left unjudged.
        return {}
    links = {(k[0], k[1]): v for k, v in values.items()}
    passes = min(len(v) for v in values.values())
    matrix = Matrix({m: links for m in TIERS}, dict(enumerate(samples.names)), passes)
    found = ask_nodes(matrix, list(dict.fromkeys(samples.names)))
    return {n: (qs[0], qs[1]) for n, qs in found.items()}


def figures(samples: Samples) -> list[tuple[Finding, Asked | None]]:
    """Every node's figure per check, unjudged (the fleet's for the world check), and its
    questions against the other nodes (None: not asked)."""
    out: list[tuple[Finding, Asked | None]] = []
    for (check, size), values in samples.by_check.items():
        if check == "world":
            ranks0 = values.get((0,), next(iter(values.values())))
            out.append((Finding(FLEET, check, size, statistics.median(ranks0)), None))
            continue
        for node, (rank, vals, asked) in _per_node(samples, check, values).items():
            if rank is None and len(samples.ranks_of(node)) == 1:
                rank = samples.ranks_of(node)[0]
            told = rank is not None and _singled_out(samples, check, values, node, rank)
            median = statistics.median(vals)
            out.append((Finding(node, check, size, median, rank=rank, singled_out=told), asked))
    return out


def _singled_out(
    samples: Samples,
    check: str,
    values: Values,
    node: str,
    rank: int,
    alpha: float = DEFAULT_ALPHA,
) -> bool:
    """Can the run tell that a node's figure is ``rank``'s, not the whole node's? See
    the module's docstring."""
    ranks = samples.ranks_of(node)
    if len(ranks) == 1:
        return True
    if check not in RANK_CHECKS:
        return False
    per_rank = _rank_links(values) if check == "pair" else values
    asked = []
    for r in ranks:
        mates = [v for m in ranks if m != r for v in per_rank.get((m,), [])]
        if per_rank.get((r,)) and mates:
            asked.append((r, ask(mates, per_rank[(r,)], TIERS[0])))
    settled = settle([q for _, q in asked], alpha)
    return any(r == rank and q.slow for (r, _), q in zip(asked, settled, strict=True))


def against_fleet(samples: Samples, alpha: float = DEFAULT_ALPHA) -> list[Finding]:
    """Each node's checks against the other nodes' (see the module's docstring)."""
    found = figures(samples)
    findings = [f for f, _ in found]
    judging = len(set(samples.names)) >= MIN_NODES
    asked = [(i, q) for i, (_, q) in enumerate(found) if judging and q is not None]
    settled = [settle([q[tier] for _, q in asked], alpha) for tier in range(len(TIERS))]
    for (index, _), warn, crit in zip(asked, *settled, strict=True):
        gravest = crit if crit.slow else warn
        verdict = CRITICAL if crit.slow else WARN if warn.slow else OK
        findings[index] = replace(
            findings[index],
            fleet_gbps=gravest.others_median,
            verdict=verdict,
            p_value=gravest.adjusted,
            evidence=_evidence(gravest, verdict),
        )
    return findings + straggler_findings(samples)


def _pair_ranks(samples: Samples, values: Values) -> dict[str, NodeFigure]:
    """Per node, the rank that answers for it in the rail-by-rail sendrecv: its links'
    samples and p2p's node question asked of them (against the links that do not touch
    its node; None with too few nodes). The rank whose WARN-tier p is lowest answers
    (the lowest median among equals), its p times the node's ranks: a figure, its
    verdict and the GPU named are one rank's."""
    links = _rank_links(values)
    nodes, named = list(dict.fromkeys(samples.names)), samples.names
    out: dict[str, NodeFigure] = {}
    for node in nodes:
        others = [vals for (a, b), vals in values.items() if node not in (named[a], named[b])]
        theirs = [v for vals in others for v in vals]
        asked = []
        for r in samples.ranks_of(node):
            mine = links.get((r,))
            if not mine:
                continue
            # Two nodes' links all touch both: no others to ask against, nothing asked.
            judged: Asked | None = None
            if theirs and len(nodes) >= MIN_NODES:
                judged = (ask(theirs, mine, TIERS[0]), ask(theirs, mine, TIERS[1]))
            p = judged[0].p_value if judged else 1.0
            asked.append((p, statistics.median(mine), r, mine, judged))
        if asked:
            _, _, rank, mine, judged = min(asked, key=lambda a: (a[0], a[1], a[2]))
            if judged is not None:
                warn, crit = (replace(q, p_value=min(1.0, q.p_value * len(asked))) for q in judged)
                judged = (warn, crit)
            out[node] = (rank, mine, judged)
    return out


def _evidence(q: Question, verdict: str) -> str:
    if verdict == OK:
        return ""
    return f"{-q.change:.0%} below the fleet's median, p = {q.adjusted:.2g}"


def straggler_findings(samples: Samples) -> list[Finding]:
    """The world check's straggler, if the counts name one, as a WARN of its node."""
    ranks = sorted(samples.waits)
    if len(ranks) < 2:
        return []
    counter = SlowestCounter()
    world = len(ranks)
    for batch in range(min(len(samples.waits[r]) for r in ranks)):
        time_us = statistics.median(samples.times[ranks[0]][batch])
        per_rank = [samples.waits[r][batch] for r in ranks]
        for waits in zip(*per_rank, strict=False):
            slowest = min(range(world), key=lambda r: (waits[r], r))
            counter.add(ranks[slowest], world, max(waits) - min(waits), time_us)
    found = counter.verdict()
    if found is None:
        return []
    evidence = (
        f"the others waited for rank {found.rank} in {found.rows} of {found.of_rows} "
        f"calls (p = {found.p_value:.2g})"
    )
    rank = found.rank
    straggler = Finding(samples.names[rank], "world_straggler", 0, 0.0, verdict=WARN, rank=rank)
    return [replace(straggler, p_value=found.p_value, evidence=evidence, singled_out=True)]


def against_floors(samples: Samples, floors: Mapping[tuple[str, int], Any]) -> list[Finding]:
    """Each node's figures against the learned floors; checks without a floor are
    judged against the fleet."""
    out = []
    for f in against_fleet(samples):
        floor = floors.get((f.check, f.size_bytes))
        if floor is None:
            out.append(f)
            continue
        verdict = OK
        if f.busbw_gbps < floor.warn_gbps:
            verdict = CRITICAL if f.busbw_gbps < floor.critical_gbps else WARN
        if f.node == FLEET and verdict == CRITICAL:
            verdict = WARN  # the whole world names no node to drain
        below = floor.critical_gbps if verdict == CRITICAL else floor.warn_gbps
        evidence = ""
        if verdict != OK:
            rate = floor.rate(verdict)
            evidence = f"below the {verdict} floor {below:.4g} GB/s (false alarms {rate:.2g})"
        out.append(replace(f, floor_gbps=below, verdict=verdict, p_value=None, evidence=evidence))
    return out
