"""Naming the slow links and nodes of a p2p matrix: only what holds beyond the noise.

**Samples.** ``p2p --repeat R`` measures the whole matrix R times. Each pass gives every
link (an unordered pair of ranks) one sample per metric, from its worse direction: the
lower of its two bandwidths, the higher of its two latencies.

**The question** is the gate's (:func:`colbench.commands.gate.verdict.judge`), with the
other links in the baseline's place: is the median of these samples beyond the others'
median by more than the threshold (``bw_pct`` below in bandwidth, ``latency_pct``
above in latency), and do the samples lie beyond the others' samples moved by that
threshold, by an exact one-sided Mann-Whitney U test? A link whose one pass met a busy
host, or whose medians differ by the luck of one run, is not named: its samples are
not beyond the others' spread.

**Nodes first.** With 3 or more nodes, each node's links to other nodes are asked the
question against the links among the other nodes. A node whose test passes the
family's strictest level is left out of every link's "others": its slow links would
otherwise hide the slowness of the rest. Then every link is asked against the other
links that touch no such node.

**How sure.** The m questions (nodes and links, bandwidth and latency) are one family:
Holm's procedure at ``alpha`` (colbench.stats.holm) keeps the chance that
noise alone names anything at ``alpha``, and each named node or link carries its
Holm-adjusted p-value. A node is named when its test holds; its links are then not
listed one by one. A link is named when its test holds and neither of its nodes is.
Too few passes for any test to reach Holm's level judge nothing, and say how many
would. ``--fail-below PCT`` asks each link the same question at PCT, in bandwidth
only, as a family of its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from colbench.commands.gate.checks import DEFAULT_ALPHA, DEFAULT_POWER
from colbench.commands.p2p.link_tests import (
    Link,
    Matrix,
    Metric,
    Pair,
    Question,
    Samples,
    ask_links,
    ask_nodes,
    link_samples,
    metrics,
    passes_needed,
    settle_family,
    testable_nodes,
)
from colbench.commands.p2p.options import DEFAULT_BW_PCT, DEFAULT_LATENCY_PCT
from colbench.stats import power, rank_tests

__all__ = ["Samples", "judge", "passes_needed"]

#: Ranks (nodes with --per-node) needed to tell one link from the others.
MIN_RANKS = 4

#: What the verdict says of a link in p2p.csv's ``link_verdict``.
SLOW_LINK, SLOW_NODE, LINK_OK, NOT_JUDGED = "slow link", "slow node", "ok", "not judged"


@dataclass(frozen=True)
class Verdict:
    lines: tuple[str, ...]
    judged: bool
    #: Links whose bandwidth holds below --fail-below (empty when not asked or not judged).
    failing: tuple[Link, ...] = ()
    slow_nodes: tuple[str, ...] = ()
    slow_links: tuple[Pair, ...] = ()
    #: (low, high) -> what the verdict says of the link and the Holm-adjusted p-value
    #: behind it (None: not judged), for p2p.csv's link_verdict and link_p_value.
    per_link: Mapping[Pair, tuple[str, float | None]] = field(default_factory=dict)


def judge(
    bw_gbps: Samples,
    latency_us: Samples,
    nodes: Mapping[int, str],
    bw_pct: float = DEFAULT_BW_PCT,
    latency_pct: float = DEFAULT_LATENCY_PCT,
    fail_below_pct: float | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The verdict on the passes of one matrix: ``(src, dst)`` -> one value per pass, and
    each rank's node label."""
    ranks = sorted({r for pair in bw_gbps for r in pair})
    if len(ranks) < MIN_RANKS:
        why = (
            f"telling a slow link from the others needs at least {MIN_RANKS} ranks "
            f"(nodes with --per-node); this matrix has {len(ranks)}"
        )
        unjudged = {(min(p), max(p)): (NOT_JUDGED, None) for p in bw_gbps}
        return Verdict((f"verdict: not judged: {why}",), judged=False, per_link=unjudged)
    bw, lat = metrics(bw_pct, latency_pct)
    per_metric = {bw: link_samples(bw_gbps, bw), lat: link_samples(latency_us, lat)}
    passes = min(len(v) for v in per_metric[bw].values())
    matrix = Matrix(per_metric, nodes, passes)
    node_tests = ask_nodes(matrix, testable_nodes(ranks, nodes))
    m = 2 * (len(node_tests) + len(matrix.keys))
    # A node whose test passes Holm's strictest step is slow whatever else Holm finds:
    # its links leave the others that every link is asked against.
    nodes_out = {n for n, ts in node_tests.items() if min(t.p_value for t in ts) <= alpha / m}
    links = ask_links(matrix, nodes_out, alpha / m, fail_below_pct, alpha)
    failing = tuple(link for link in links if link.fail is not None and link.fail.slow)
    checkable = passes >= passes_needed(len(links), len(links), alpha)
    fail_lines = _fail_lines(failing, links, fail_below_pct, checkable)
    need = passes_needed(len(matrix.keys), m, alpha)
    if passes < need:
        best = rank_tests.smallest_one_sided_p((len(matrix.keys) - 1) * passes, passes)
        line = (
            f"verdict: not judged: {passes} pass(es) cannot show a link slower than the others "
            f"beyond their spread (the rank test's best p, {best:.2g}, is above the "
            f"{alpha / m:.2g} that Holm over {m} tests needs); measure with --repeat {need} "
            "or more"
        )
        per_link = dict.fromkeys(matrix.keys, (NOT_JUDGED, None))
        return Verdict((line, *fail_lines), False, failing, per_link=per_link)
    node_tests, links = settle_family(node_tests, links, alpha)
    blamed = [n for n, ts in node_tests.items() if any(t.slow for t in ts)]
    named = [link for link in links if link.slow and not _through(link, blamed, matrix)]
    lines = [_node_line(n, node_tests[n], matrix, links) for n in blamed]
    lines += [_link_line(link, nodes) for link in named]
    suffix = f"; {passes} passes, Holm over {m} tests"
    lines = [line + suffix for line in lines]
    if not lines:
        lines = _all_clear(matrix, links, node_tests, m, alpha, (bw_gbps, latency_us))
    return Verdict(
        (*lines, *fail_lines),
        judged=True,
        failing=failing,
        slow_nodes=tuple(blamed),
        slow_links=tuple((link.low, link.high) for link in named),
        per_link=_per_link(links, node_tests, blamed, matrix),
    )


def _through(link: Link, blamed: Sequence[str], matrix: Matrix) -> list[str]:
    """The named nodes whose NIC the link goes through (not a link inside one)."""
    return [n for n in blamed if matrix.crosses((link.low, link.high), n)]


def _node_line(node: str, tests: Sequence[Question], matrix: Matrix, links: list[Link]) -> str:
    slow = [t for t in tests if t.slow]
    mine = [x for x in links if matrix.crosses((x.low, x.high), node)]
    beyond = [x for x in mine if any(_beyond(x, t) for t in slow)]
    own = {r for x in mine for r in (x.low, x.high) if matrix.nodes[r] == node}
    ranks = ",".join(map(str, sorted(own)))
    shown = ", ".join(t.shown() for t in slow)
    return f"slow node {node} (ranks {ranks}): {len(beyond)} of {len(mine)} links slow, {shown}"


def _beyond(link: Link, test: Question) -> bool:
    """Whether the link's own median is beyond the node test's others by the threshold."""
    value = link.bw_gbps if test.metric.worse_when < 0 else link.latency_us
    change = (value - test.others_median) / test.others_median
    return change * test.metric.worse_when > test.metric.threshold


def _link_line(link: Link, nodes: Mapping[int, str]) -> str:
    where = f"{nodes[link.low]} <-> {nodes[link.high]}"
    shown = ", ".join(t.shown() for t in link.tests if t.slow)
    return f"slow link {link.low} <-> {link.high} ({where}): {shown}"


def _fail_lines(
    failing: Sequence[Link], links: Sequence[Link], fail_below_pct: float | None, checkable: bool
) -> list[str]:
    """--fail-below's one line: FAIL and the worst link, or that the check passed (or,
    where a cut left too few passes for any link to fail, that it could not be made)."""
    if fail_below_pct is None:
        return []
    holm = f"Holm over {len(links)} links"
    if not failing:
        if not checkable:
            return [
                f"verdict: --fail-below {fail_below_pct:g}: not checked: too few passes for "
                f"any link to fail ({holm})"
            ]
        lowest = min((x.fail.adjusted for x in links if x.fail is not None), default=1.0)
        return [
            f"verdict: PASS: no link more than {fail_below_pct:g}% below the others' bandwidth "
            f"beyond their spread (--fail-below {fail_below_pct:g}; lowest p = {lowest:.2g} "
            f"after {holm})"
        ]
    worst = max(failing, key=lambda x: x.bw_below_pct)
    return [
        f"verdict: FAIL: {len(failing)} link(s) more than {fail_below_pct:g}% below the "
        f"others' bandwidth (worst {worst.low} <-> {worst.high}, {worst.bw_below_pct:.0f}% "
        f"below; p = {worst.fail.adjusted if worst.fail else 1.0:.2g} after {holm})"
    ]


def _all_clear(
    matrix: Matrix,
    links: list[Link],
    node_tests: Mapping[str, Sequence[Question]],
    m: int,
    alpha: float,
    directions: tuple[Samples, Samples],
) -> list[str]:
    """The two lines of a verdict that names nothing: what was asked, then the fabric's
    medians and what the passes could have seen.

    The medians say which statistic they are: the verdict's (each link's worse direction,
    its median over the passes, then the median over the links) sits above the median
    of the printed matrices (every direction alone), by up to the spread between a
    link's two directions, and a reader comparing the two must not think one is wrong.
    """
    bw, lat = matrix.samples
    smallest = min([t.adjusted for ts in node_tests.values() for t in ts]
                   + [t.adjusted for x in links for t in x.tests])  # fmt: skip
    first = (
        f"verdict: no slow link or node among {len(links)} links over {matrix.passes} passes: "
        f"none holds {bw.threshold:.0%} below the others' bandwidth or {lat.threshold:.0%} "
        f"above their latency beyond their spread (lowest p = {smallest:.2g} after Holm over "
        f"{m} tests)"
    )
    bw_all, lat_all = (statistics.median(map(statistics.median, d.values())) for d in directions)
    second = (
        f"verdict: median of the {len(links)} links' worse directions (the lower bandwidth, the "
        f"higher latency): {statistics.median(x.bw_gbps for x in links):.3g} GB/s, "
        f"{short(statistics.median(x.latency_us for x in links))} us; of every direction, as the "
        f"matrices show them: {bw_all:.3g} GB/s, {short(lat_all)} us"
    )
    seen = _detectable(matrix, bw, alpha / m)
    if seen is not None:
        second += (
            f"; a link {seen:.0%} below the others' bandwidth would be named "
            f"{DEFAULT_POWER:.0%} of the time"
        )
    return [first, second]


def short(value: float) -> str:
    """Three significant digits, without an exponent for latencies in the thousands."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


#: Above this many samples a side, the power figure comes from the normal approximation
#: (power.normal_margin): the simulation's arrays grow with the product of the sides.
_SIMULATED_MAX_SAMPLES = 400


def _detectable(matrix: Matrix, metric: Metric, level: float) -> float | None:
    """The bandwidth shortfall every link's test would catch at DEFAULT_POWER: the
    largest of the links' figures (power.shift_margin, from each test's log spread)."""
    seen = []
    for key in matrix.keys:
        others = matrix.pooled(metric, matrix.others(key, set(), set()))
        mine = matrix.samples[metric][key]
        sigma = power.log_spread(others, mine)
        big = len(others) > _SIMULATED_MAX_SAMPLES
        margin_of = power.normal_margin if big else power.shift_margin
        margin = None if sigma is None else margin_of(sigma, len(others), len(mine), level)
        if margin is None:
            return None
        seen.append(power.detectable_slowdown(metric.threshold, metric.worse_when, margin))
    return max(seen, default=None)


def _per_link(
    links: list[Link],
    node_tests: Mapping[str, Sequence[Question]],
    blamed: Sequence[str],
    matrix: Matrix,
) -> dict[Pair, tuple[str, float | None]]:
    """What p2p.csv says of each link, with the adjusted p-value behind it."""
    out: dict[Pair, tuple[str, float | None]] = {}
    for link in links:
        mine = _through(link, blamed, matrix)
        if mine:
            p = min(t.adjusted for n in mine for t in node_tests[n] if t.slow)
            out[(link.low, link.high)] = (SLOW_NODE, p)
        elif link.slow:
            out[(link.low, link.high)] = (SLOW_LINK, min(t.adjusted for t in link.tests if t.slow))
        else:
            out[(link.low, link.high)] = (LINK_OK, min(t.adjusted for t in link.tests))
    return out
