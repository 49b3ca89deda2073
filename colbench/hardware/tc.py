"""A link's rate where tc shapes it (the rate sysfs cannot know): tbf's or netem's
``rate`` on the interface's qdiscs, htb's on its classes, as ``tc`` prints them.

htb classes that shape each destination apart (tests/netns.py) bound one destination
each: the fastest is the interface's ceiling. A qdisc's rate bounds everything.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable

_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")
_SCALE = {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def rates_gbit_s(text: str) -> list[float]:
    """Every ``rate N[KMGT]bit`` in tc's text, in Gbit/s."""
    return [float(n) * _SCALE[unit] for n, unit in _RATE.findall(text)]


def shaped_rate_gbit_s(interface: str, run: Callable[[list[str]], str] = _run) -> float | None:
    """The rate tc holds ``interface`` to, or None where it shapes no rate."""
    qdiscs = rates_gbit_s(run(["tc", "qdisc", "show", "dev", interface]))
    classes = rates_gbit_s(run(["tc", "class", "show", "dev", interface]))
    bounds = qdiscs + ([max(classes)] if classes else [])
    return min(bounds) if bounds else None
