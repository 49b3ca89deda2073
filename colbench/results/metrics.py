"""The measured columns a user names on the command line, each with one short alias.

A metric is spelled as its column (``busbw_gbps``, ``time_p50_us``) everywhere: plot's
and compare's ``--metric``, gate's ``--check``. Its name without the unit (``busbw``,
``time_p50``) is accepted everywhere too, so a user need not remember which command
wanted which.
"""

from __future__ import annotations

#: Short alias -> column.
ALIASES: dict[str, str] = {
    "busbw": "busbw_gbps",
    "algbw": "algbw_gbps",
    "time": "time_us",
    "time_min": "time_min_us",
    "time_p50": "time_p50_us",
    "time_p99": "time_p99_us",
    "time_max": "time_max_us",
}


def column(name: str) -> str:
    """The column a metric's name means: itself, or the column its short alias stands for."""
    key = name.strip()
    return ALIASES.get(key, key)
