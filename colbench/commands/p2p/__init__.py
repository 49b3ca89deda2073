"""``colbench p2p``: bandwidth and latency of every pair of ranks, and who is slow.

- :mod:`.schedule`: which ranks take part and in which rounds their pairs run.
- :mod:`.measure`: the measuring side in every rank (messages, timers, steps).
- :mod:`.task`: a p2p run as a rank task of colbench.host (same start-up as a sweep).
- :mod:`.results`: ``p2p.csv``, its schema version and :func:`load`.
- :mod:`.report`, :mod:`.heatmap`: the matrices, the figure and the verdict
  (colbench.commands.p2p.links judges the links).
- :mod:`.command`: :func:`~colbench.commands.p2p.command.run`, what the CLI calls.
"""

from __future__ import annotations

from typing import Any


def load(path: Any) -> Any:
    """A run's ``p2p.csv`` (or its directory) as a DataFrame; see colbench.commands.p2p.results."""
    from colbench.commands.p2p.results import load as load_p2p

    return load_p2p(path)
