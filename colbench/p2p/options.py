"""``colbench p2p``'s options: sweep's where they mean the same, and p2p's own.

The shared ones (ranks, backend, counts, timeouts, where to write) are rows of the one
options table (colbench.options), picked by name: same flags, help and defaults as
sweep's. p2p's own are declared below with the same :func:`~colbench.options.option`
machinery; the Typer parameters of ``colbench p2p`` and the p2p section of
docs/options.md (colbench.docgen) are derived from :func:`table`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from colbench.analysis.links import DEFAULT_BW_PCT, DEFAULT_LATENCY_PCT
from colbench.options import Option, option, rows_of
from colbench.options import table as sweep_table
from colbench.sizes import parse_size

#: sweep's options that p2p takes as they are, in --help's order.
SHARED = (
    "nprocs",
    "backend",
    "iters",
    "warmup",
    "repeat",
    "timeout",
    "init_timeout",
    "out",
    "results_dir",
)


@dataclass(frozen=True)
class P2POptions:
    """p2p's own options, as given."""

    size: str = option(
        "64M",
        "--size",
        help="Bandwidth message size (binary units).",
        concern="measure",
        parse=parse_size,
    )
    latency_size: str = option(
        "8",
        "--latency-size",
        help="Latency message size (binary units).",
        concern="measure",
        parse=parse_size,
    )
    bidirectional: bool = option(
        False, "--bidirectional", help="Both ranks of a pair send at once.", concern="measure"
    )
    serial: bool = option(
        False, "--serial", help="One pair at a time (no concurrent pairs).", concern="measure"
    )
    per_node: bool = option(
        False, "--per-node", help="One rank per node: a matrix of nodes.", concern="measure"
    )
    rail: bool = option(
        False,
        "--rail",
        help="Pair local rank k only with local rank k of other nodes.",
        concern="measure",
    )
    threshold: float = option(
        DEFAULT_BW_PCT,
        "--threshold",
        help="Slow: bandwidth this % below the median.",
        concern="judge",
    )
    latency_threshold: float = option(
        DEFAULT_LATENCY_PCT,
        "--latency-threshold",
        help="Slow: latency this % above the median.",
        concern="judge",
    )
    fail_below: float | None = option(
        None,
        "--fail-below",
        help="Exit 1 when a link's bandwidth is more than PCT below the median.",
        concern="judge",
    )
    plot: bool = option(
        True, "--plot/--no-plot", help="Write the heatmap p2p.png.", concern="output"
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench p2p``, in the order ``--help`` lists them."""
    sweep = {opt.name: opt for opt in sweep_table()}
    return (*(sweep[name] for name in SHARED), *rows_of(P2POptions))


def own() -> tuple[Option, ...]:
    """The options only p2p has."""
    return rows_of(P2POptions)
