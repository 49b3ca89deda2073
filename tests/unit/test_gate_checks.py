"""Parsing the gate's checks: --check texts, their direction, and the size window."""

from __future__ import annotations

import pytest

from colbench.commands.gate.checks import Check, SizeWindow, parse_checks
from colbench.errors import UsageError

# --- check parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "limit", "relative", "normal"),
    [
        ("busbw_gbps:-15%", "busbw_gbps", 0.15, True, "busbw_gbps:-15%"),
        ("busbw_gbps:15%", "busbw_gbps", 0.15, True, "busbw_gbps:-15%"),
        ("time_p50_us:+25%", "time_p50_us", 0.25, True, "time_p50_us:+25%"),
        (" time_us : 2.5% ", "time_us", 0.025, True, "time_us:+2.5%"),
        ("time_p99_us:5000", "time_p99_us", 5000.0, False, "time_p99_us:5000"),
        ("busbw_gbps:0.5", "busbw_gbps", 0.5, False, "busbw_gbps:0.5"),
        ("wrong:0", "wrong", 0.0, False, "wrong:0"),
        # The short alias of a metric names its column, as in plot and compare.
        ("busbw:-15%", "busbw_gbps", 0.15, True, "busbw_gbps:-15%"),
        ("time_p50:+25%", "time_p50_us", 0.25, True, "time_p50_us:+25%"),
    ],
)
def test_checks_parse(text: str, metric: str, limit: float, relative: bool, normal: str) -> None:
    check = Check.parse(text)
    assert (check.metric, check.relative, check.text) == (metric, relative, normal)
    assert check.limit == pytest.approx(limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("busbw_gbps", "METRIC:+X%"),
        ("busbw_gbps:", "METRIC:+X%"),
        ("busbw_gpbs:-15%", "did you mean busbw_gbps"),
        ("latency:+5%", "unknown metric"),
        ("busbw_gbps:+15%", "a regression is a drop, so its limit is written busbw_gbps:-15%"),
        ("time_us:-10%", "a regression is a rise, so its limit is written time_us:+10%"),
        ("busbw_gbps:-100%", "could never fail"),
        ("busbw_gbps:-x%", "not a percentage"),
        ("time_us:fast", "neither a percentage"),
        ("time_us:-5", ">= 0"),
        ("wrong:5", "only wrong:0"),
        ("wrong:+1%", "absolute count"),
    ],
)
def test_bad_checks_say_why(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        Check.parse(text)


def test_wrong_check_is_always_on_and_once() -> None:
    assert [c.text for c in parse_checks([])] == ["wrong:0"]
    checks = parse_checks(["busbw_gbps:-15%", "wrong:0", "time_p50_us:+25%"])
    assert [c.text for c in checks] == ["wrong:0", "busbw_gbps:-15%", "time_p50_us:+25%"]
    with pytest.raises(UsageError, match="two checks on busbw_gbps"):
        parse_checks(["busbw_gbps:-15%", "busbw_gbps:-5%"])


def test_size_window() -> None:
    window = SizeWindow.parse("64K", "1M")
    assert 65536 in window and 1048576 in window
    assert 65535 not in window and 1048577 not in window
    assert 0 in SizeWindow() and 10**12 in SizeWindow.parse("1K", None)
    assert window.describe() == "sizes 65536-1048576 B"
    with pytest.raises(UsageError, match="larger than --max-size"):
        SizeWindow.parse("1M", "64K")
    with pytest.raises(UsageError, match="bad size"):
        SizeWindow.parse("64Q", None)
