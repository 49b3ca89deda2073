"""compare: ratios per size, not-comparable marks, and the overlay + ratio figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from colbench.cli import main
from colbench.commands.compare.comparison import figure, format_table
from colbench.commands.compare.pairs import compare_runs
from tests.unit.rows import SIZES, alpha_beta, row, write_run


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    slow, fast = alpha_beta(20.0, 10.0), alpha_beta(20.0, 20.0)
    a = [row("all_reduce", s, slow(s)) for s in SIZES]
    b = [row("all_reduce", s, fast(s)) for s in SIZES]
    # Only in A: a size B lacks. Wrong results in B at one size. Another backend for
    # all_gather. Three repeats of one key in B: the median is used.
    a.append(row("all_reduce", 1 << 28, slow(1 << 28)))
    b[1]["wrong"] = 3
    a.append(row("all_gather", 4096, 50.0))
    b.append(row("all_gather", 4096, 40.0, backend="gloo"))
    a.append(row("broadcast", 8192, 100.0))
    b += [row("broadcast", 8192, t) for t in (40.0, 50.0, 400.0)]
    return write_run(tmp_path / "a", a), write_run(tmp_path / "b", b)


def test_ratios_and_reasons(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    comparison = compare_runs(a, b, "busbw")
    table = comparison.table
    ar = table[table["op"] == "all_reduce"].set_index("size_bytes")
    for size in SIZES[2:]:
        expected = alpha_beta(20.0, 10.0)(size) / alpha_beta(20.0, 20.0)(size)
        assert ar.loc[size, "ratio"] == pytest.approx(expected, rel=1e-5)
        assert ar.loc[size, "comparable"]
    assert ar.loc[SIZES[1], "reason"] == "wrong results in B"
    assert ar.loc[1 << 28, "reason"] == "only in A"
    assert table[table["op"] == "all_gather"]["reason"].tolist() == ["backend nccl vs gloo"]
    broadcast = table[table["op"] == "broadcast"].iloc[0]
    assert broadcast["ratio"] == pytest.approx(100.0 / 50.0, rel=1e-5)  # median of B's three

    text = format_table(comparison)
    assert "ratio = B / A" in text
    line = next(x for x in text.splitlines() if x.split()[:1] == ["all_reduce"] and " 64M " in x)
    # One sample a side: the ratio, and a spread that cannot be known.
    assert line.split()[-2:] == [f"{ar.loc[64 << 20, 'ratio']:.3f}", "-"]
    assert "one sample per row on a side: each ratio's own noise is unknown" in text
    assert "only in A" in text and "x             -  wrong results in B" in text
    assert "3 row(s) not comparable" in text


def test_time_ratio_and_variant_pairing(tmp_path: Path) -> None:
    model = alpha_beta(10.0, 10.0)
    rows = [
        row("all_reduce", s, model(s), variant=v) for v in ("ALGO=Ring", "ALGO=Tree") for s in SIZES
    ]
    both = write_run(tmp_path / "both", rows)
    ring_only = write_run(
        tmp_path / "ring", [row("all_reduce", s, 2 * model(s), variant="ALGO=Ring") for s in SIZES]
    )
    # Several variants on one side: rows pair up by variant; Tree has no partner.
    comparison = compare_runs(both, ring_only, "time")
    table = comparison.table
    assert comparison.join_on_variant
    ring = table[table["variant"] == "ALGO=Ring"]
    assert ring["comparable"].all() and np.allclose(ring["ratio"], 2.0, rtol=1e-5)
    assert set(table[table["variant"] == "ALGO=Tree"]["reason"]) == {"only in A"}
    # Picking one variant per side compares them with each other.
    picked = compare_runs(both, both, "time", variant_a="ALGO=Ring", variant_b="ALGO=Tree")
    assert not picked.join_on_variant and picked.table["comparable"].all()
    assert any("variant: A 'ALGO=Ring' vs B 'ALGO=Tree'" in line for line in picked.context)


def test_figure_has_overlay_and_ratio_panel(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    fig = figure(compare_runs(a, b, "busbw"))
    top, bottom = fig.axes[:2]
    labels = [line.get_label() for line in top.get_lines()]
    assert "all_reduce · a" in labels and "all_reduce · b" in labels
    ratio_lines = [
        line
        for line in bottom.get_lines()
        if len(line.get_xdata()) > 2 and line.get_marker() == "o"
    ]
    assert len(ratio_lines) == 1
    xs, ys = ratio_lines[0].get_xdata(), ratio_lines[0].get_ydata()
    assert list(xs) == SIZES[:1] + SIZES[2:]  # SIZES[1]: wrong results in B
    assert np.all(np.asarray(ys) >= 1.0)
    # One sample per row: no band to draw, and the panel says so instead of promising one.
    assert bottom.get_ylabel() == "B / A"
    assert [t.get_text() for t in bottom.texts] == [
        "no noise band: one sample per row (sweep --repeat 5 measures it)"
    ]


def test_cli_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _pair(tmp_path)
    out = tmp_path / "figures"
    with pytest.raises(SystemExit) as info:
        main(["compare", str(a), str(b), "--out", str(out)])
    captured = capsys.readouterr()
    assert info.value.code == 0, captured.err
    figure = out / f"compare-{a.name}-vs-{b.name}.png"
    assert "geometric mean B/A" in captured.out and figure.stat().st_size > 10_000
    with pytest.raises(SystemExit) as info:
        main(["compare", str(a), str(b), "--variant-a", "NCCL_ALGO=Tree"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "has no variant 'NCCL_ALGO=Tree'" in err


def test_subgroup_columns_join_only_where_both_runs_record_them(tmp_path: Path) -> None:
    # nccl-tests imports leave group_size and groups empty: such a run still pairs size
    # by size with a colbench run of the same world size.
    model = alpha_beta(10.0, 10.0)
    imported = [
        {**row("all_reduce", s, model(s)), "group_size": None, "groups": None} for s in SIZES
    ]
    ours = write_run(tmp_path / "ours", [row("all_reduce", s, 2 * model(s)) for s in SIZES])
    comparison = compare_runs(write_run(tmp_path / "imported", imported), ours, "time")
    assert "group_size" not in comparison.keys and "size_bytes" in comparison.keys
    assert len(comparison.table) == len(SIZES) and comparison.table["comparable"].all()
    # Recorded on both sides, another group size is another measurement.
    halves = [{**row("all_reduce", s, model(s)), "group_size": 2, "groups": 2} for s in SIZES]
    split = compare_runs(write_run(tmp_path / "halves", halves), ours, "time")
    assert "group_size" in split.keys
    assert sorted(set(split.table["reason"])) == ["only in A", "only in B"]


def _repeated(directory: Path, factor: float, spread: float, seed: int) -> Path:
    """Five repeats per size of one model, ``factor`` slower, with lognormal noise."""
    rng = np.random.default_rng(seed)
    model = alpha_beta(20.0, 10.0)
    rows = [
        row("all_reduce", s, factor * model(s) * float(np.exp(rng.normal(0, spread))))
        | {"repeat": r}
        for r in range(5)
        for s in SIZES
    ]
    return write_run(directory, rows)


def test_identical_runs_of_noisy_samples_are_said_to_be_within_noise(tmp_path: Path) -> None:
    # The case: B/A from 0.43 to 2.78 for identical variants, no caveat.
    a = _repeated(tmp_path / "a", 1.0, 0.4, seed=1)
    b = _repeated(tmp_path / "b", 1.0, 0.4, seed=2)
    comparison = compare_runs(a, b, "time")
    assert comparison.table["within_noise"].all()
    text = format_table(comparison)
    rows = [line for line in text.splitlines() if line.startswith("  all_reduce")]
    assert all(line.split()[-2].endswith("~") for line in rows)
    assert all(line.split()[-1].count("±") == 2 for line in rows)
    (summary,) = [line for line in text.splitlines() if "geometric mean" in line]
    assert "95% interval" in summary and "noise could explain it (the interval holds 1)" in summary
    assert f"{len(SIZES)} of {len(SIZES)} size(s) within their samples' noise (~)" in summary


def test_a_real_change_stands_out_of_quiet_samples(tmp_path: Path) -> None:
    a = _repeated(tmp_path / "a", 1.0, 0.02, seed=1)
    b = _repeated(tmp_path / "b", 2.0, 0.02, seed=2)
    comparison = compare_runs(a, b, "time")
    assert not comparison.table["within_noise"].any()
    (summary,) = [line for line in format_table(comparison).splitlines() if "geometric" in line]
    assert "noise could explain" not in summary and "0 of " in summary
    # The figure's bars are the band noise could explain: narrow here.
    fig = figure(comparison)
    assert fig.axes[1].get_ylabel() == "B / A (bars: noise band)"
