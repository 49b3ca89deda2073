"""``colbench p2p``: bandwidth and latency of every pair of ranks, and who is slow.
:func:`run` is what the CLI calls; :func:`load` reads a run's ``p2p.csv``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def load(path: Any) -> Any:
    """A run's ``p2p.csv`` (or its directory) as a DataFrame; see colbench.commands.p2p.results."""
    from colbench.commands.p2p.results import load as load_p2p

    return load_p2p(path)


def run(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> int:
    """Check the options (``values``: every row of colbench.commands.p2p.options.table()),
    measure the matrix in spawned or launched ranks, report; the exit code."""
    from colbench.commands.p2p.config import from_options

    cfg = from_options(values, command_line)
    # Imported after the options are checked: the host imports torch.
    from colbench.commands.p2p.task import P2PTask
    from colbench.host.world import start

    return start(P2PTask(cfg))
