"""Checks: what the gate judges, parsed from ``--check``, ``--min-size`` and floors.

A check is a small parsed object (pytest-benchmark's ``min:5%`` idea): ``busbw_gbps:-15%``
lets bus bandwidth drop by at most 15%, ``time_p50_us:+25%`` lets the median iteration
rise by at most 25%, ``wrong:0`` (always on) fails any wrong element. Each metric knows
which way is worse, so a faster run never fails a time check.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from colbench.config.sizes import parse_size
from colbench.errors import UsageError
from colbench.results.reporters import figures
from colbench.stats import DEFAULT_ALPHA as DEFAULT_ALPHA
from colbench.stats import DEFAULT_MAX_CV as DEFAULT_MAX_CV
from colbench.stats import DEFAULT_POWER as DEFAULT_POWER

#: Metric -> +1 when a rise is a regression (times, wrong elements), -1 when a drop is.
METRIC_WORSE_WHEN: dict[str, int] = {
    **dict.fromkeys(("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us"), +1),
    "algbw_gbps": -1,
    "busbw_gbps": -1,
    "wrong": +1,
}

#: Accepted runs a baseline keeps pooled (--update-baseline --keep).
DEFAULT_KEEP = 1
#: Baseline runs the gate needs to judge performance on their between-run drift
#: (--min-baseline-runs; colbench.stats.drift): with fewer, the t test's 2-3 degrees
#: of freedom inflate every stated figure (80% power at 0.025: 5.7 SDs at 3 runs, 3.8 at 5).
DEFAULT_MIN_BASELINE_RUNS = 5


@dataclass(frozen=True)
class Check:
    """One parsed ``--check``: a relative change limit or an absolute bound on a metric."""

    metric: str
    #: Relative: the largest change allowed in the bad direction, as a fraction (0.15).
    #: Absolute: the bound itself, in the metric's unit.
    limit: float
    relative: bool
    text: str

    @property
    def worse_when(self) -> int:
        return METRIC_WORSE_WHEN[self.metric]

    @classmethod
    def parse(cls, text: str) -> Check:
        """``metric:+X%``, ``metric:-X%``, ``metric:X%`` (the bad direction) or ``metric:V``."""
        metric, sep, spec = text.strip().partition(":")
        # A metric by its column (busbw_gbps) or its short alias (busbw), as everywhere.
        metric, spec = figures.column(metric), spec.strip().replace(" ", "")
        if not sep or not metric or not spec:
            raise UsageError(
                f"bad --check {text!r}: write METRIC:+X%, METRIC:-X% or METRIC:VALUE, "
                "e.g. busbw_gbps:-15%"
            )
        if metric not in METRIC_WORSE_WHEN:
            close = difflib.get_close_matches(metric, METRIC_WORSE_WHEN, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(
                f"bad --check {text!r}: unknown metric {metric!r}{hint}; use one of "
                + ", ".join(METRIC_WORSE_WHEN)
            )
        if spec.endswith("%"):
            return cls._relative(text, metric, spec)
        return cls._absolute(text, metric, spec)

    @classmethod
    def _relative(cls, text: str, metric: str, spec: str) -> Check:
        worse_when = METRIC_WORSE_WHEN[metric]
        if metric == "wrong":
            raise UsageError(f"bad --check {text!r}: wrong takes an absolute count: wrong:0")
        match = re.fullmatch(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)%", spec)
        if match is None:
            raise UsageError(f"bad --check {text!r}: {spec!r} is not a percentage like -15%")
        sign, number = match.groups()
        good = f"{metric}:{'+' if worse_when > 0 else '-'}{number}%"
        if sign and (1 if sign == "+" else -1) != worse_when:
            raise UsageError(
                f"bad --check {text!r}: for {metric} a regression is a "
                f"{'rise' if worse_when > 0 else 'drop'}, so its limit is written {good}"
            )
        fraction = float(number) / 100
        if worse_when < 0 and fraction >= 1:
            raise UsageError(
                f"bad --check {text!r}: {metric} cannot drop by {number}% or more, "
                "so the check could never fail"
            )
        return cls(metric, fraction, True, good)

    @classmethod
    def _absolute(cls, text: str, metric: str, spec: str) -> Check:
        try:
            value = float(spec)
        except ValueError:
            raise UsageError(
                f"bad --check {text!r}: {spec!r} is neither a percentage (-15%) nor a number"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"bad --check {text!r}: the bound must be a number >= 0")
        if metric == "wrong" and value != 0:
            raise UsageError(
                f"bad --check {text!r}: wrong elements always fail the gate; only wrong:0 exists"
            )
        return cls(metric, value, False, f"{metric}:{spec}")

    def describe(self) -> str:
        if self.metric == "wrong":
            return "no wrong element"
        if self.relative:
            word = "rise" if self.worse_when > 0 else "drop"
            return f"{self.metric} may {word} by at most {self.limit:.0%}"
        word = "at most" if self.worse_when > 0 else "at least"
        return f"{self.metric} {word} {self.limit:g}"


WRONG_CHECK = Check("wrong", 0.0, False, "wrong:0")


def parse_checks(texts: Iterable[str]) -> list[Check]:
    """Parse every ``--check``; ``wrong:0`` is always there, first."""
    checks = [WRONG_CHECK]
    for text in texts:
        check = Check.parse(text)
        if check == WRONG_CHECK:
            continue
        if any(c.metric == check.metric for c in checks):
            raise UsageError(f"two checks on {check.metric}: give one --check per metric")
        checks.append(check)
    return checks


@dataclass(frozen=True)
class SizeWindow:
    """Sizes (``size_bytes``) whose performance is judged; correctness is judged everywhere."""

    min_bytes: int | None = None
    max_bytes: int | None = None
    #: Set when no size's performance may be judged (the baseline's machine differs, or
    #: there is no baseline): the reason, which describe() gives.
    closed: str = ""

    @classmethod
    def parse(cls, min_size: str | None, max_size: str | None) -> SizeWindow:
        low = parse_size(min_size) if min_size is not None else None
        high = parse_size(max_size) if max_size is not None else None
        if low is not None and high is not None and low > high:
            raise UsageError(f"--min-size {min_size} is larger than --max-size {max_size}")
        return cls(low, high)

    def __contains__(self, size_bytes: object) -> bool:
        if self.closed:
            return False
        size = int(size_bytes)  # type: ignore[call-overload]
        if self.min_bytes is not None and size < self.min_bytes:
            return False
        return self.max_bytes is None or size <= self.max_bytes

    def describe(self) -> str:
        if self.closed:
            return self.closed
        if self.min_bytes is None and self.max_bytes is None:
            return "all sizes"
        if self.max_bytes is None:
            return f"sizes >= {self.min_bytes} B"
        if self.min_bytes is None:
            return f"sizes <= {self.max_bytes} B"
        return f"sizes {self.min_bytes}-{self.max_bytes} B"
