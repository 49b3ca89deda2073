"""Naming the slow links and nodes of a p2p matrix.

A link is an unordered pair of ranks, judged by its worse direction: the lower of its
two bandwidths, the higher of its two latencies. It is slow when its bandwidth is
more than ``bw_pct`` below the median of all links, or its latency more than
``latency_pct`` above theirs. The median needs enough links to stand for "normal",
so fewer than :data:`MIN_RANKS` ranks are not judged at all.

A node is blamed when most (more than half) of its links to other nodes are slow;
its links are then not listed one by one. A slow link whose nodes are not blamed is
named as a link: one bad cable or port, not a bad node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

#: Ranks (nodes with --per-node) the median rule needs to tell an outlier from normal.
MIN_RANKS = 4
DEFAULT_BW_PCT = 25.0
#: Small-message latency on a busy host varies more than large-message bandwidth.
DEFAULT_LATENCY_PCT = 100.0


@dataclass(frozen=True)
class Link:
    low: int
    high: int
    bw_gbps: float
    latency_us: float
    #: How far below the median bandwidth, in percent (negative: above it).
    bw_below_pct: float
    #: How far above the median latency, in percent (negative: below it).
    latency_above_pct: float
    slow_bw: bool
    slow_latency: bool

    @property
    def slow(self) -> bool:
        return self.slow_bw or self.slow_latency


@dataclass(frozen=True)
class Verdict:
    lines: tuple[str, ...]
    judged: bool
    #: Links slower than ``--fail-below`` (empty when not asked or not judged).
    failing: tuple[Link, ...] = ()
    slow_nodes: tuple[str, ...] = ()
    slow_links: tuple[tuple[int, int], ...] = ()


def links(
    bw_gbps: Mapping[tuple[int, int], float],
    latency_us: Mapping[tuple[int, int], float],
    bw_pct: float = DEFAULT_BW_PCT,
    latency_pct: float = DEFAULT_LATENCY_PCT,
) -> list[Link]:
    """Every measured unordered pair, its worse direction, and how far from the median."""
    worst_bw: dict[tuple[int, int], float] = {}
    worst_lat: dict[tuple[int, int], float] = {}
    for (src, dst), bw in bw_gbps.items():
        key = (min(src, dst), max(src, dst))
        worst_bw[key] = min(bw, worst_bw.get(key, bw))
        lat = latency_us[(src, dst)]
        worst_lat[key] = max(lat, worst_lat.get(key, lat))
    median_bw = statistics.median(worst_bw.values())
    median_lat = statistics.median(worst_lat.values())
    out = []
    for key in sorted(worst_bw):
        below = 100.0 * (median_bw - worst_bw[key]) / median_bw if median_bw > 0 else 0.0
        above = 100.0 * (worst_lat[key] - median_lat) / median_lat if median_lat > 0 else 0.0
        out.append(
            Link(
                *key,
                worst_bw[key],
                worst_lat[key],
                below,
                above,
                below > bw_pct,
                above > latency_pct,
            )
        )
    return out


def judge(
    bw_gbps: Mapping[tuple[int, int], float],
    latency_us: Mapping[tuple[int, int], float],
    nodes: Mapping[int, str],
    bw_pct: float = DEFAULT_BW_PCT,
    latency_pct: float = DEFAULT_LATENCY_PCT,
    fail_below_pct: float | None = None,
) -> Verdict:
    """The verdict on one matrix: ``(src, dst)`` -> value, and each rank's node label."""
    ranks = sorted({r for pair in bw_gbps for r in pair})
    if len(ranks) < MIN_RANKS:
        return Verdict(
            (
                f"verdict: not judged: the median rule needs at least {MIN_RANKS} ranks "
                f"(nodes with --per-node); this matrix has {len(ranks)}",
            ),
            judged=False,
        )
    every = links(bw_gbps, latency_us, bw_pct, latency_pct)
    blamed = _blamed_nodes(every, nodes)
    lines = [_node_line(node, every, nodes) for node in blamed]
    named = [
        link
        for link in every
        if link.slow and nodes[link.low] not in blamed and nodes[link.high] not in blamed
    ]
    lines += [_link_line(link, nodes) for link in named]
    if not lines:
        lines.append(_all_clear(every, bw_pct, latency_pct))
    failing: tuple[Link, ...] = ()
    if fail_below_pct is not None:
        failing = tuple(link for link in every if link.bw_below_pct > fail_below_pct)
        if failing:
            worst = max(failing, key=lambda link: link.bw_below_pct)
            lines.append(
                f"verdict: FAIL: {len(failing)} link(s) more than {fail_below_pct:g}% below the "
                f"median bandwidth (worst {worst.low} <-> {worst.high}, "
                f"{worst.bw_below_pct:.0f}% below)"
            )
    return Verdict(
        tuple(lines),
        judged=True,
        failing=failing,
        slow_nodes=tuple(blamed),
        slow_links=tuple((link.low, link.high) for link in named),
    )


def _cross_links(node: str, every: list[Link], nodes: Mapping[int, str]) -> list[Link]:
    """The node's links to ranks of other nodes (its own ranks talk without its NIC)."""
    return [link for link in every if (nodes[link.low] == node) != (nodes[link.high] == node)]


def _blamed_nodes(every: list[Link], nodes: Mapping[int, str]) -> list[str]:
    ranked = sorted({r for link in every for r in (link.low, link.high)})
    labels = list(dict.fromkeys(nodes[r] for r in ranked))
    if len(labels) < 2:
        return []
    blamed = []
    for node in labels:
        mine = _cross_links(node, every, nodes)
        if mine and 2 * sum(link.slow for link in mine) > len(mine):
            blamed.append(node)
    return blamed


def _node_line(node: str, every: list[Link], nodes: Mapping[int, str]) -> str:
    mine = _cross_links(node, every, nodes)
    slow = [link for link in mine if link.slow]
    ranks = ",".join(str(r) for r in sorted(r for r in nodes if nodes[r] == node and _in(r, every)))
    return f"slow node {node} (ranks {ranks}): {len(slow)} of {len(mine)} links {_how(slow)}"


def _in(rank: int, every: list[Link]) -> bool:
    return any(rank in (link.low, link.high) for link in every)


def _how(slow: list[Link]) -> str:
    """The typical shortfall of some slow links: median % below (or above, for latency)."""
    parts = []
    by_bw = [link.bw_below_pct for link in slow if link.slow_bw]
    by_lat = [link.latency_above_pct for link in slow if link.slow_latency]
    if by_bw:
        parts.append(f"{statistics.median(by_bw):.0f}% below the median bandwidth")
    if by_lat:
        parts.append(f"latency {statistics.median(by_lat):.0f}% above the median")
    return ", ".join(parts)


def _link_line(link: Link, nodes: Mapping[int, str]) -> str:
    where = f"{nodes[link.low]} <-> {nodes[link.high]}"
    return f"slow link {link.low} <-> {link.high} ({where}): {_how([link])}"


def _all_clear(every: list[Link], bw_pct: float, latency_pct: float) -> str:
    median_bw = statistics.median(link.bw_gbps for link in every)
    median_lat = statistics.median(link.latency_us for link in every)
    lat = f"{median_lat:.3g}" if median_lat < 1000 else f"{median_lat:.0f}"
    return (
        f"verdict: no slow link or node among {len(every)} links: bandwidth within {bw_pct:g}% "
        f"of the median {median_bw:.3g} GB/s, latency within {latency_pct:g}% of the median "
        f"{lat} us"
    )
