"""Subgroups without a process group: layout, validation, row arithmetic, schema 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench import cli
from colbench.bench import groups, ops
from colbench.bench.plan import RunInfo, plan
from colbench.bench.rowmaker import make_row
from colbench.config.model import SweepConfig
from colbench.config.validate import validate, validate_for_world
from colbench.errors import UsageError
from colbench.results.rows import COLUMNS, RESULTS, SCHEMA_VERSION, load
from colbench.results.tables import TableWriter


def test_contiguous_groups() -> None:
    assert groups.contiguous(4, 2) == [(0, 1), (2, 3)]
    assert groups.contiguous(6, 3) == [(0, 1, 2), (3, 4, 5)]
    assert groups.contiguous(4, 4) == [(0, 1, 2, 3)]
    with pytest.raises(ValueError):
        groups.contiguous(4, 3)


def test_group_size_must_divide_the_world() -> None:
    cfg = SweepConfig.of(sizes_bytes=(1024,), group_size=3)
    with pytest.raises(UsageError, match="--group-size 3 does not divide the world size 4"):
        validate_for_world(cfg, 4, "gloo")
    with pytest.raises(UsageError, match="--group-size must be at least 1"):
        validate(SweepConfig.of(sizes_bytes=(1024,), group_size=0))


def test_root_and_support_are_checked_against_the_group() -> None:
    rooted = SweepConfig.of(ops=("broadcast",), sizes_bytes=(1024,), root=2, group_size=2)
    with pytest.raises(UsageError, match="--root 2 is not a rank of a group of 2"):
        validate_for_world(rooted, 4, "gloo")
    # sendrecv needs two ranks on gloo; groups of one cannot run it.
    mixed = SweepConfig.of(ops=("sendrecv", "all_reduce"), sizes_bytes=(1024,), group_size=1)
    notes = validate_for_world(mixed, 4, "gloo")
    assert any("skipping sendrecv" in n for n in notes)


def test_layouts_use_the_group_size() -> None:
    cfg = SweepConfig.of(ops=("all_gather",), sizes_bytes=(1024,), group_size=2)
    (work,) = plan(cfg, 2, "gloo")
    assert work.layouts[0] == ops.get("all_gather").layout(1024, 4, 2)


def test_row_bandwidth_uses_the_group_size_and_aggregates_groups() -> None:
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1 << 20,), group_size=2)
    (work,) = plan(cfg, 2, "gloo")
    info = RunInfo("r", "gloo", "cpu", world_size=8, nnodes=2, groups=4)
    times = {k: 100.0 for k in ("time_us", "time_min_us", "time_p50_us", "time_p99_us")}
    times["time_max_us"] = 100.0
    row = make_row(info, cfg, work, 1 << 20, work.layouts[0], True, times, 0)
    assert list(row) == list(COLUMNS)
    assert (row["world_size"], row["group_size"], row["groups"]) == (8, 2, 4)
    algbw = (1 << 20) / 100.0 / 1e3
    assert row["algbw_gbps"] == pytest.approx(algbw)
    # all_reduce's factor 2(n-1)/n with n = 2 (the group), not 8 (the world).
    assert row["busbw_gbps"] == pytest.approx(algbw * 1.0)
    assert row["aggbw_gbps"] == pytest.approx(algbw * 4)


def test_one_group_is_the_whole_world() -> None:
    info = RunInfo("r", "gloo", "cpu", world_size=4, nnodes=1)
    assert (info.group_size, info.groups) == (4, 1)


def test_group_columns_in_the_schema(tmp_path: Path) -> None:
    # Files from before subgroups read as one group of all ranks: test_schema_versions.
    assert SCHEMA_VERSION >= 2
    assert {"group_size", "groups", "aggbw_gbps"} <= set(COLUMNS)
    new = tmp_path / "new.csv"
    writer = TableWriter(new, RESULTS)
    writer.close()
    assert list(load(new).columns) == list(COLUMNS)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--group-size", "0"], "--group-size must be at least 1, got 0"),
        (["--group-size", "3", "--nprocs", "4"], "--group-size 3 does not divide the world size 4"),
        (["--init-timeout", "0"], "--init-timeout must be positive"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(
            ["sweep", "--sizes", "1K", "--backend", "gloo", "--out", str(tmp_path / "r"), *args]
        )
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("colbench: error: ") and message in err
    assert err.strip().count("\n") == 0
    assert not (tmp_path / "r").exists()
