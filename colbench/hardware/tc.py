"""Links' rates where tc shapes them (the rates sysfs cannot know): tbf's or netem's
``rate`` on an interface's qdiscs, htb's on its classes, as ``tc`` prints them.

htb classes that shape each destination apart (tests/netns.py) bound one destination
each: the fastest is the interface's ceiling. A qdisc's rate bounds everything. One
``tc qdisc show`` covers every interface (a GPU node may have hundreds of container
veths); classes are asked for only where an htb qdisc holds them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable

_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")
_QDISC = re.compile(r"^qdisc (?P<kind>\S+) \S+ dev (?P<dev>\S+) ")
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


def shaped_rates_gbit_s(run: Callable[[list[str]], str] = _run) -> dict[str, float]:
    """Each shaped interface of this network namespace -> the rate tc holds it to."""
    qdisc_rates: dict[str, list[float]] = {}
    with_classes: set[str] = set()
    for line in run(["tc", "qdisc", "show"]).splitlines():
        m = _QDISC.match(line)
        if m is None:
            continue
        qdisc_rates.setdefault(m["dev"], []).extend(rates_gbit_s(line))
        if m["kind"] in ("htb", "hfsc"):
            with_classes.add(m["dev"])
    out = {}
    for dev, bounds in qdisc_rates.items():
        classes = (
            rates_gbit_s(run(["tc", "class", "show", "dev", dev])) if dev in with_classes else []
        )
        bounds = bounds + ([max(classes)] if classes else [])
        if bounds:
            out[dev] = min(bounds)
    return out
