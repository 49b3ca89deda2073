"""An average bus bandwidth floor: nccl-tests' ``NCCL_TESTS_MIN_BW`` and colbench's explicit
``--min-avg-busbw-gbps``, parsed into one object with one rule and one wording.

``sweep`` (its exit code and its ``-J`` report's ``average_bus_bandwidth.okay``) and ``gate``
(its floors) read the variable through :func:`from_environment` alone, so it means what it
means in nccl-tests (``src/common.cu``) everywhere: the average must reach 0.9x the value.
The explicit flag is colbench's own and asks for the value itself; its text says which.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from colbench.errors import UsageError

#: The variable nccl-tests reads (``getenv("NCCL_TESTS_MIN_BW")``).
MIN_BW_VARIABLE = "NCCL_TESTS_MIN_BW"
#: nccl-tests' share of NCCL_TESTS_MIN_BW the average must reach (``check_avg_bw*(0.9)``).
MIN_BW_SHARE = 0.9
#: nccl-tests' value for "unchecked" (its default when the variable is unset).
UNCHECKED = -1.0
#: gate's flag for a floor the average must reach itself, not 0.9x of.
EXPLICIT_FLAG = "--min-avg-busbw-gbps"


@dataclass(frozen=True)
class BusbwFloor:
    """A floor on an average bus bandwidth: the value given, where, and the share of it the
    average must reach (0.9 for NCCL_TESTS_MIN_BW, as nccl-tests; 1 for the explicit flag)."""

    value_gbps: float
    source: str = MIN_BW_VARIABLE
    share: float = MIN_BW_SHARE

    @property
    def floor_gbps(self) -> float:
        """What the average must reach, GB/s (base 10)."""
        return self.value_gbps * self.share

    def okay(self, average_gbps: float) -> bool:
        """Fails only when the average is below the floor: a NaN average, of a run with no
        result, does not fail (nccl-tests compares ``avg < floor`` the same way round)."""
        return not average_gbps < self.floor_gbps

    def describe(self) -> str:
        """Where the floor comes from, in the words the user set it in:
        ``0.9 x NCCL_TESTS_MIN_BW=100`` or ``--min-avg-busbw-gbps 100``."""
        if self.share == 1:
            return f"{self.source} {self.value_gbps:g}"
        return f"{self.share:g} x {self.source}={self.value_gbps:g}"


def from_environment(environ: Mapping[str, str] | None = None) -> BusbwFloor | None:
    """NCCL_TESTS_MIN_BW as a floor (0.9x its value), None when unset, empty or -1.

    nccl-tests reads it with ``atof``, so a typo silently reads as 0 and never fails; here
    a value that is not a number, or a negative other than nccl-tests' -1, is refused.
    """
    text = (os.environ if environ is None else environ).get(MIN_BW_VARIABLE)
    if text is None or not text.strip():
        return None
    hint = (
        f"give the bus bandwidth in GB/s the average must reach {MIN_BW_SHARE:g}x of "
        "(as nccl-tests), or -1 (nccl-tests' unchecked)"
    )
    value = _number(f"{MIN_BW_VARIABLE}={text!r}", text, hint, UNCHECKED)
    return None if value == UNCHECKED else BusbwFloor(value)


def explicit(text: str | None, flag: str = EXPLICIT_FLAG) -> BusbwFloor | None:
    """colbench's own floor from a flag: the average must reach the value itself."""
    if text is None or not text.strip():
        return None
    hint = "give the bandwidth in GB/s the average must reach, >= 0"
    return BusbwFloor(_number(f"{flag} {text!r}", text, hint), flag, 1.0)


def _number(given: str, text: str, hint: str, unchecked: float = 0.0) -> float:
    """``text`` as a finite number, 0 or more (or ``unchecked``); else one line naming what
    was given and what to give."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{given} is not a number: {hint}") from None
    if not math.isfinite(value):
        raise UsageError(f"{given} is not finite: {hint}")
    if value < 0 and value != unchecked:
        raise UsageError(f"{given} is negative: {hint}")
    return value
