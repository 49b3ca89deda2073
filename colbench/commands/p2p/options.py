"""``colbench p2p``'s options: sweep's where they mean the same, and p2p's own.

The shared ones (ranks, backend, counts, timeouts, where to write) are rows of the one
options table (colbench.config.options), picked by name: same flags, help and defaults as
sweep's. p2p's own are declared below with the same :func:`~colbench.config.option_table.option`
machinery; the Typer parameters of ``colbench p2p`` and the p2p section of
docs/options.md (colbench.cli.docgen) are derived from :func:`table`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from colbench.config.option_table import Option, option, rows_of
from colbench.config.options import table as sweep_table
from colbench.config.sizes import parse_size

# p2p's judging defaults live here, apart from the judging (colbench.commands.p2p.links,
# which needs numpy): the options table, and so ``colbench p2p --help``, needs nothing heavy.
#: Passes p2p measures by default. At 3 a link of 4 ranks can just be named, when all 3
#: of its samples lie beyond all 15 of the others' (1/816 against the 0.0025 Holm asks
#: over 20 tests); at 5 the best p is 7e-06, and a link is still named when one of its
#: samples lands in the middle of the others' (p = 0.0014), a node of 4 whatever one of
#: its 15 samples does (docs/p2p.md).
DEFAULT_PASSES = 5
DEFAULT_BW_PCT = 25.0
#: Small-message latency on a busy host varies more than large-message bandwidth.
DEFAULT_LATENCY_PCT = 100.0
#: The default of --max-time: a p2p run's whole time, start-up to verdict
#: (colbench.commands.p2p.budget fits the plan into it).
DEFAULT_MAX_TIME_S = 600.0
#: sweep's options that p2p takes as they are, in --help's order.
SHARED = (
    "nprocs",
    "backend",
    "ranks_per_gpu",
    "iters",
    "warmup",
    "timeout",
    "init_timeout",
    "out",
    "results_dir",
    "progress",
)


#: p2p's own options by concern: what to measure, how to judge it, what to write.
_measure = functools.partial(option, concern="measure")
_judge = functools.partial(option, concern="judge")
_output = functools.partial(option, concern="output")


@dataclass(frozen=True)
class P2POptions:
    """p2p's own options, as given."""

    size: str = _measure(
        "64M",
        "--size",
        help="Bandwidth message size (binary units).",
        parse=parse_size,
        to="size_bytes",
        convert=parse_size,
    )
    latency_size: str = _measure(
        "8",
        "--latency-size",
        help="Latency message size (binary units).",
        parse=parse_size,
        to="latency_bytes",
        convert=parse_size,
    )
    bidirectional: bool = _measure(
        False, "--bidirectional", help="Both ranks of a pair send at once."
    )
    window: int | None = _measure(
        None,
        "--window",
        help="Bandwidth messages sent back to back per timed iteration (osu_bw's window; "
        "default 8 on NCCL, 1 on gloo).",
    )
    serial: bool = _measure(False, "--serial", help="One pair at a time (no concurrent pairs).")
    per_node: bool = _measure(False, "--per-node", help="One rank per node: a matrix of nodes.")
    rail: bool = _measure(
        False, "--rail", help="Pair local rank k only with local rank k of other nodes."
    )
    # Sweep's --repeat, with a default of its own: the verdict needs repeated passes.
    repeat: int = _measure(
        DEFAULT_PASSES,
        "--repeat",
        help="Measure the whole pair matrix this many times, one pass after the other; a "
        "link or node is named only when its passes hold beyond the others' spread. Default "
        f"{DEFAULT_PASSES}, not 1: one pass has no spread for the verdict to weigh.",
    )
    max_time: float = _measure(
        DEFAULT_MAX_TIME_S,
        "--max-time",
        help="Cap on the whole run, in seconds: a probe prices a message first, and a plan "
        "that would take longer is cut (warm-up, then timed messages, then passes, then "
        "--size) and says so; meta.json's plan records it.",
        to="max_time_s",
    )
    threshold: float = _judge(
        DEFAULT_BW_PCT,
        "--threshold",
        help="Slow: bandwidth this % below the others' median, beyond their spread.",
        to="bw_pct",
    )
    latency_threshold: float = _judge(
        DEFAULT_LATENCY_PCT,
        "--latency-threshold",
        help="Slow: latency this % above the others' median, beyond their spread.",
        to="latency_pct",
    )
    fail_below: float | None = _judge(
        None,
        "--fail-below",
        help="Exit 1 when a link's bandwidth holds more than PCT below the others'.",
        to="fail_below_pct",
    )
    plot: bool = _output(
        True,
        "--plot/--no-plot",
        help="Write the heatmap p2p.png. On by default, unlike sweep's: the heatmap is how "
        "a matrix of links is read.",
    )


#: Shared options whose sweep help speaks of sizes and sweeps: the same flag, said of pairs.
SHARED_HELP = {
    "iters": "Timed messages (round trips, for latency) per ordered pair.",
    "warmup": "Untimed messages per ordered pair before timing.",
}


def command_table(
    shared: Sequence[str], own: type, helps: Mapping[str, str] | None = None
) -> tuple[Option, ...]:
    """A command's options in ``--help``'s order: sweep's rows named in ``shared`` (their
    help as ``helps`` says it of this command), then the command's own (p2p's, health's)."""
    sweep = {opt.name: opt for opt in sweep_table()}
    rows = [sweep[name] for name in shared]
    for i, opt in enumerate(rows):
        if helps and opt.name in helps:
            rows[i] = replace(opt, spec=replace(opt.spec, help=helps[opt.name]))
    return (*rows, *rows_of(own))


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench p2p``, in the order ``--help`` lists them."""
    return command_table(SHARED, P2POptions, SHARED_HELP)


def own() -> tuple[Option, ...]:
    """The options only p2p has."""
    return rows_of(P2POptions)
