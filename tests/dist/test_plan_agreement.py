"""Launched ranks started with different flags get one clear error, never a hang.

Each flag here changes the sequence of collectives a rank calls (--time-budget adds an
agreement and a second batch, --memory-check off drops the budget agreement,
--rotate changes allocations, --repeat the number of passes). The plan digest covers
them and is compared in the very first collective, before the memory budget.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import finish_ranks, start_ranks


def _launch_two(tmp_path: Path, rank1_flags: list[str]) -> list[tuple[int, str]]:
    def args(rank: int) -> list[str]:
        common = ["sweep", "--sizes", "1K,4K", "--no-table", "--timeout", "20"]
        return [*common, "--out", str(tmp_path / "run"), *(rank1_flags if rank == 1 else [])]

    return finish_ranks(start_ranks(2, args), 60)


@pytest.mark.parametrize(
    "flags",
    [
        ["--time-budget", "0.01"],
        ["--memory-check", "off"],
        ["--rotate", "2"],
        ["--repeat", "2"],
    ],
)
def test_ranks_with_different_flags_are_told_so(tmp_path: Path, flags: list[str]) -> None:
    started = time.monotonic()
    results = _launch_two(tmp_path, flags)
    assert time.monotonic() - started < 50
    for code, stderr in results:
        assert code == 2, stderr[-2000:]
        assert "ranks disagree on the sweep: rank(s) 1" in stderr, stderr[-2000:]
