"""``colbench health``'s options: sweep's where they mean the same, and health's own.

The shared ones (ranks, backend, timeouts, where to write) are rows of the one options
table (colbench.config.options), picked by name, as p2p's are; health's own are declared
below with the same machinery, and ``colbench health`` and docs/options.md derive from
:func:`table`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from colbench.commands.p2p.options import command_table
from colbench.config.option_table import Option, option, rows_of

#: sweep's options that health takes as they are, in --help's order.
SHARED = (
    "nprocs",
    "backend",
    "ranks_per_gpu",
    "timeout",
    "init_timeout",
    "out",
    "results_dir",
    "progress",
)

LEVELS = ("quick", "standard", "long")

_measure = functools.partial(option, concern="measure")
_judge = functools.partial(option, concern="judge")
_output = functools.partial(option, concern="output")


@dataclass(frozen=True)
class HealthOptions:
    """health's own options, as given."""

    level: str = _measure(
        "quick",
        "--level",
        help="How long and how closely to look: quick, standard or long (each says at start "
        "how long it takes for this many nodes).",
        choices=LEVELS,
    )
    floors: str | None = _judge(
        None,
        "--floors",
        help="Judge against the floors `colbench health learn` wrote (default: against the "
        "fleet's own median).",
        to="floors_path",
    )
    drain_list: str | None = _output(
        None,
        "--drain-list",
        help="Write the CRITICAL nodes here, one per line (an empty file when none).",
        to="drain_list",
    )
    plot: bool = _output(
        True,
        "--plot/--no-plot",
        help="Write the heatmap health.png. On by default, unlike sweep's: the heatmap is "
        "how a fleet of nodes is read.",
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench health``, in the order ``--help`` lists them."""
    return command_table(SHARED, HealthOptions)


def own() -> tuple[Option, ...]:
    """The options only health has."""
    return rows_of(HealthOptions)
