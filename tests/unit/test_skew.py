"""Rank skew: the straggler of a row, the run's straggler test, and the avg/max mark."""

from __future__ import annotations

import json
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from colbench.bench import ops
from colbench.bench.timing import wait_in
from colbench.results.reporters.console import RANK_SKEW_MARK, TableSink, format_line
from colbench.results.reporters.stragglers import (
    PER_RANK,
    STRAGGLER_ALPHA,
    STRAGGLER_MIN_ROWS,
    RankTimes,
    SlowestCounter,
    binomial_tail,
    min_share,
    rank_skewed,
    straggler,
    summary_line,
)
from colbench.results.reporters.stream import MetaReporter, PerRankReporter, RowStream
from colbench.results.rows import Row
from colbench.results.rundir import RunDir
from tests.unit.rows import row as synthetic_row


def test_two_ranks_60_percent_of_20_rows_is_chance() -> None:
    # P(X >= 12 | 20, 1/2) = 0.25: a coin does this one run in four.
    assert binomial_tail(12, 20, 0.5) == pytest.approx(0.2517, abs=1e-4)
    assert straggler([8, 12]) is None
    assert straggler([12, 8]) is None


def test_two_ranks_20_of_20_rows_names_the_rank() -> None:
    found = straggler([0, 20])
    assert found is not None
    assert (found.rank, found.rows, found.of_rows) == (1, 20, 20)
    assert found.p_value == pytest.approx(0.5**20)
    assert found.threshold == STRAGGLER_ALPHA / 2 and found.p_value < found.threshold


def test_the_level_is_split_over_the_ranks() -> None:
    # 8 ranks, 40 rows: chance gives each 5. 29 of 40 has p < 1e-15 and a share of 72%.
    assert straggler([1, 1, 1, 29, 2, 2, 2, 2]) is not None
    # 13 of 40 (p = 0.0012) would pass a test of one rank at 0.01, not of eight.
    assert binomial_tail(13, 40, 1 / 8) > STRAGGLER_ALPHA / 8
    assert straggler([4, 4, 4, 13, 4, 4, 4, 3]) is None


def test_a_significant_but_small_bias_names_nobody() -> None:
    # 75% of 100 rows at 2 ranks is far beyond chance (p = 3e-7) but short of 5/6: a
    # bias of the op or of the bookkeeping, not a rank worth naming.
    assert binomial_tail(75, 100, 0.5) < STRAGGLER_ALPHA / 2
    assert straggler([75, 25]) is None
    assert min_share(2) == pytest.approx(5 / 6) and straggler([84, 16]) is not None
    assert min_share(4) == pytest.approx(0.75)
    # 8 ranks: 17 of 40 is significant (p = 3.4e-5) but is 43%, under 71%.
    assert binomial_tail(17, 40, 1 / 8) < STRAGGLER_ALPHA / 8
    assert straggler([3, 3, 3, 17, 3, 3, 4, 4]) is None


def test_too_few_rows_name_nobody() -> None:
    # At 8 ranks 9 of 9 rows would be far beyond chance (p = 8e-9), but 9 rows are few.
    assert straggler([0] * 7 + [STRAGGLER_MIN_ROWS - 1]) is None
    assert straggler([0] * 7 + [STRAGGLER_MIN_ROWS]) is not None
    # At 2 ranks the level asks more: 10 of 10 happens by chance 1 time in 1024.
    assert straggler([0, 10]) is None and straggler([0, 11]) is not None
    assert straggler([25]) is None  # one rank: nobody to wait for


@pytest.mark.parametrize("trials", [1, 7, 20, 64, 200])
def test_the_tail_is_the_exact_binomial_sum(trials: int) -> None:
    for p in (1 / 2, 1 / 4, 1 / 8):
        for successes in range(trials + 2):
            exact = sum(
                Fraction(math.comb(trials, k))
                * Fraction(p) ** k
                * (1 - Fraction(p)) ** (trials - k)
                for k in range(successes, trials + 1)
            )
            assert binomial_tail(successes, trials, p) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize(
    ("counts", "named"),
    [
        ([50_000, 50_000], None),
        ([49_000, 51_000], None),  # p = 1e-10, a share of 51%: a bias, not a straggler
        ([1_000, 99_000], 1),
        ([25_000] * 4, None),
        ([1_000, 1_000, 97_000, 1_000], 2),
    ],
)
def test_the_straggler_test_holds_at_a_hundred_thousand_rows(
    counts: list[int], named: int | None
) -> None:
    # A long sweep with --repeat counts this many late-arrival rows; C(n, k) * p**k overflowed
    # a float from about a thousand rows and failed the run after its last row.
    found = straggler(counts)
    assert (found.rank if found else None) == named
    assert 0.0 <= binomial_tail(max(counts), sum(counts), 1 / len(counts)) <= 1.0
    assert binomial_tail(51_000, 100_000, 0.5) == pytest.approx(1.2e-10, rel=0.1)
    counter = SlowestCounter()
    counter.counts = counts
    line = summary_line(found, counter, [])
    assert f"{sum(counts)}" in line and (found is None) == line.startswith("none")


def test_the_straggler_of_a_row_is_the_rank_that_waited_least() -> None:
    ranks = RankTimes(batch_us=(100.0, 100.0, 130.0), wait_us=(250.0, 40.0, 190.0))
    assert ranks.slowest_rank == 1 and ranks.skew_us == 210.0
    assert ranks.avg_us == 110.0 and ranks.max_us == 130.0
    assert RankTimes(batch_us=(1.0, 1.0), wait_us=(5.0, 5.0)).slowest_rank == 0


@pytest.mark.parametrize(
    ("avg_us", "max_us", "skewed"),
    [(100.0, 105.0, False), (100.0, 105.1, True), (100.0, 100.0, False), (None, 3.0, False)],
)
def test_avg_and_max_disagreeing_by_more_than_5_percent(
    avg_us: float | None, max_us: float, skewed: bool
) -> None:
    assert rank_skewed(avg_us, max_us) is skewed


def test_rows_count_only_when_the_others_waited_a_tenth_of_a_call() -> None:
    counter = SlowestCounter()
    counter.add(1, 2, 9.9, 100.0)  # within the barrier's own jitter
    counter.add(1, 2, 10.0, 100.0)
    counter.add(0, 2, 50.0, 100.0)
    counter.add(None, 2, None, 100.0)  # an imported row knows no straggler
    counter.add(1, 2, 90.0, 100.0, root=0)  # a rooted op: skewed by design
    assert counter.counts == [1, 1] and counter.rows == 2


def test_waiting_in_a_barrier_is_waiting_for_the_others() -> None:
    # Sleeping needs no CPU: all of it is wait. Only the wake-up can starve (on a loaded
    # machine the thread may wait for a CPU after its sleep), and that is not waiting.
    batch, (wait_us, starved_us) = wait_in(lambda: time.sleep(0.02), lambda: "batch")
    # Only the wake-up's starvation is taken out of the sleep: a busy machine once starved
    # it by 3 ms, so the wait is asserted with room for that, not to the microsecond.
    assert batch == "batch" and starved_us >= 0 and wait_us + starved_us >= 19_000
    assert wait_us >= 10_000


def _row(size: int, slowest: int, skew_us: float, batch: tuple[float, float]) -> Row:
    fields: dict[str, Any] = synthetic_row("all_reduce", size, 100.0, world_size=2)
    return Row(
        **fields,
        slowest_rank=slowest,
        skew_us=skew_us,
        time_ranks_avg_us=sum(batch) / 2,
        time_ranks_max_us=max(batch),
    )


def test_the_table_marks_rank_skew_and_names_the_straggler() -> None:
    echoed: list[str] = []
    sink = TableSink(echo=echoed.append)
    sink.nodes = ["nodeA", "nodeB"]
    rows = [_row(1024 << i, 1, 40.0, (100.0, 100.0)) for i in range(12)]
    rows[0] = _row(1024, 1, 40.0, (100.0, 120.0))
    for row in rows:
        sink.rows(ops.get("all_reduce"), [row])
    sink.close()
    marked = [line for line in echoed if RANK_SKEW_MARK in line and not line.startswith("#")]
    assert len(marked) == 1 and marked[0].split()[5] == f"100.0{RANK_SKEW_MARK}"
    assert format_line([dict(rows[1])]).split()[5] == "100.0"
    assert echoed[-2].startswith(f"# Rank-skewed rows     : 1 (time marked {RANK_SKEW_MARK})")
    assert echoed[-1] == (
        "# Straggler            : rank 1 on nodeB, the last to arrive in 12 of 12 "
        "late-arrival rows (binomial p = 0.00024 < 0.001/2 against chance 1 in 2)"
    )


def test_per_rank_csv_and_the_straggler_in_meta(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    with RowStream([MetaReporter(run), PerRankReporter(run)], print) as stream:
        stream.start({"run_id": run.name, "rank_hosts": ["nodeA", "nodeB"]})
        for i in range(12):
            row = _row(1024 << i, 1, 300.0, (100.0, 101.0))
            stream.rows(ops.get("all_reduce"), [row])
            stream.rank_times(row, RankTimes((100.0, 101.0), (310.0, 10.0), (0.0, 5.0)))
        stream.end()
    meta = json.loads(run.meta_path.read_text())
    assert meta["slowest_rank_rows"] == [0, 12]
    assert meta["straggler"]["rank"] == 1 and meta["straggler"]["node"] == "nodeB"
    assert math.isclose(meta["straggler"]["p_value"], 0.5**12)
    table = pd.read_csv(run.table_path(PER_RANK))
    assert list(table.columns) == list(PER_RANK.columns) and len(table) == 24
    assert table["rank"].tolist()[:2] == [0, 1] and table["node"].tolist()[:2] == ["nodeA", "nodeB"]
    assert table["wait_us"].tolist()[:2] == [310.0, 10.0]
    assert table["slowest"].tolist()[:2] == [0, 1]


def test_the_table_ends_with_its_summary_after_a_hundred_thousand_late_arrivals() -> None:
    # The long sweep that crashed: its end-of-run summary, from the counts of a run far
    # longer than it (10^5 late-arrival rows at 2 ranks, 4 at 8).
    for counts in ([60_000, 40_000], [12_500] * 8):
        echoed: list[str] = []
        sink = TableSink(echo=echoed.append)
        sink.slowest.counts = list(counts)
        sink.close()
        assert echoed[-1].startswith("# Straggler            : none: no rank arrived last")
        assert f"of the {sum(counts)} late-arrival rows" in echoed[-1]
