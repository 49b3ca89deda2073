"""sweep --repeat without a process group: config, CLI errors, plan digest and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.bench.plan import plan, plan_digest
from colbench.cli import main
from colbench.config.model import SweepConfig
from colbench.config.validate import validate
from colbench.errors import UsageError
from colbench.results.reporters.console import TableSink


def test_repeat_is_validated() -> None:
    assert SweepConfig.of().measure.repeat == 1
    with pytest.raises(UsageError, match="--repeat must be at least 1, got 0"):
        validate(SweepConfig.of(sizes_bytes=(1024,), repeat=0))


def test_cli_refuses_repeat_zero(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--repeat", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "colbench: error: --repeat must be at least 1, got 0 "
        "(nccl-tests' -N 0, forever, is not offered: give a count)"
    )
    assert not (tmp_path / "results").exists()


def test_ranks_with_different_repeats_disagree_on_the_plan() -> None:
    one = SweepConfig.of(sizes_bytes=(1024,))
    three = SweepConfig.of(sizes_bytes=(1024,), repeat=3)
    assert plan_digest(one, plan(one, 2, "gloo")) != plan_digest(three, plan(three, 2, "gloo"))


def _row(repeat: int, size: int) -> dict[str, object]:
    return {
        "op": "all_reduce", "size_bytes": size, "count": size // 4, "dtype": "float32",
        "redop": "sum", "root": -1, "in_place": 1, "time_us": 100.0, "algbw_gbps": 0.01,
        "busbw_gbps": 0.01, "wrong": 0, "status": "ok", "repeat": repeat,
    }  # fmt: skip


def test_table_gives_each_repeat_its_own_sections() -> None:
    lines: list[str] = []
    sink = TableSink(echo=lines.append)
    coll = ops.get("all_reduce")
    for repeat in (0, 1):
        for size in (1024, 2048):
            sink.rows(coll, [_row(repeat, size)])
    sink.close()
    titles = [line for line in lines if line.startswith("# all_reduce")]
    assert titles == ["# all_reduce", "# all_reduce  (repeat 1)"]
    # Each repeat's average is its own: two footers, one per section, then their median.
    averages = [line for line in lines if line.startswith("# Avg bus bandwidth")]
    assert len(averages) == 3
    assert averages[-1].endswith("(all_reduce: median of 2 repeats; each 0.01, 0.01)")
    assert sink.rows_shown == 4


def test_with_the_repeat_count_every_section_says_which_repeat_it_is() -> None:
    lines: list[str] = []
    sink = TableSink(echo=lines.append, repeats=3)
    coll = ops.get("all_reduce")
    for repeat, busbw in ((0, 1.0), (1, 4.0), (2, 2.0)):
        row = {**_row(repeat, 1024), "busbw_gbps": busbw}
        sink.rows(coll, [row])
    sink.close()
    titles = [line for line in lines if line.startswith("# all_reduce")]
    assert titles == [f"# all_reduce  (repeat {r} of 3)" for r in range(3)]
    assert "# Avg bus bandwidth    : 2 GB/s  (all_reduce: median of 3 repeats; each 1, 4, 2)" in (
        lines
    )
