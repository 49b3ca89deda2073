"""``colbench p2p`` as a plain function: the same host as a sweep (colbench.host), another
task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colbench.commands.p2p.config import from_options


def run(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> int:
    """Check the options (``values``: every row of colbench.commands.p2p.options.table()), measure
    the
    matrix in spawned or launched ranks, report; the exit code."""
    cfg = from_options(values, command_line)
    # Imported after the options are checked: the host imports torch.
    from colbench.commands.p2p.task import P2PTask
    from colbench.host.world import start

    return start(P2PTask(cfg))
