"""Figures carry the right lines: read back the artists, not the pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from colbench.cli import main
from colbench.commands.plot.lines import plot_lines, plot_panels, plot_runs, write_run_plots
from colbench.errors import UsageError
from colbench.results.reporters.figures import format_size_tick, size_ticks
from colbench.results.series import lines, load_runs
from tests.unit.rows import SIZES, alpha_beta, row, write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path: Path, name: str = "run", variants: tuple[str, ...] = ("",)) -> Path:
    rows = []
    for index, variant in enumerate(variants):
        model = alpha_beta(20.0 + 10 * index, 10.0 + 5 * index)
        for op in ("all_reduce", "all_gather"):
            rows += [row(op, s, model(s), variant=variant) for s in SIZES]
    rows.append(row("barrier", 0, 30.0) | {"dtype": "none", "redop": "none"})
    return write_run(tmp_path / name, rows)


def _data_lines(ax) -> list:
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_one_line_per_op_and_variant_with_the_row_values(tmp_path: Path) -> None:
    run = _run(tmp_path, variants=("NCCL_ALGO=Ring", "NCCL_ALGO=Tree"))
    curves = lines(load_runs([run])[0])
    fig = plot_lines(curves, "busbw")
    ax = fig.axes[0]
    drawn = _data_lines(ax)
    assert [line.get_label() for line in drawn] == [
        "all_reduce · NCCL_ALGO=Ring",
        "all_gather · NCCL_ALGO=Ring",
        "all_reduce · NCCL_ALGO=Tree",
        "all_gather · NCCL_ALGO=Tree",
    ]
    tree_ar = drawn[2]
    assert list(tree_ar.get_xdata()) == SIZES
    model = alpha_beta(30.0, 15.0)
    expected = [s / model(s) / 1e3 * 1.5 for s in SIZES]  # all_reduce busbw at 4 ranks
    assert np.allclose(tree_ar.get_ydata(), expected, rtol=1e-5)
    # Same op, same color; variants told apart by line style.
    assert drawn[0].get_color() == drawn[2].get_color() != drawn[1].get_color()
    assert drawn[0].get_linestyle() != drawn[2].get_linestyle()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    assert "nccl, 4 ranks on 1 host" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()][:1] == [drawn[0].get_label()]


def test_size_axis_labels_are_binary() -> None:
    ticks = size_ticks(1024, 64 * 1024**2)
    assert ticks[0] == 1024 and ticks[-1] == 64 * 1024**2
    assert [format_size_tick(t) for t in ticks[:3]] == ["1K", "4K", "16K"]
    many = size_ticks(8, 8 * 1024**3)
    assert len(many) <= 11
    assert {"1K", "1M", "1G"} <= {format_size_tick(t) for t in many}


def test_time_is_log_scaled_and_peak_and_fit_are_drawn(tmp_path: Path) -> None:
    curves = lines(load_runs([_run(tmp_path)])[0])
    time_fig = plot_lines(curves, "time")
    assert time_fig.axes[0].get_yscale() == "log"
    fig = plot_lines(curves, "busbw", peak_gbps=25.0, fit=True)
    ax = fig.axes[0]
    peak = [line for line in ax.get_lines() if line.get_label() == "rated peak 25 GB/s"]
    assert len(peak) == 1 and list(peak[0].get_ydata()) == [25.0, 25.0]
    models = [line for line in ax.get_lines() if line.get_label() == "_model"]
    assert len(models) == 2 and all(m.get_linestyle() == ":" for m in models)
    # The model of an exact alpha-beta run lies on the measured points.
    measured = _data_lines(ax)[0]
    model_y = np.interp(measured.get_xdata(), models[0].get_xdata(), models[0].get_ydata())
    assert np.allclose(model_y[-3:], measured.get_ydata()[-3:], rtol=0.02)


def test_sweep_plots_are_written_into_the_run_directory(tmp_path: Path) -> None:
    run = _run(tmp_path)
    written = write_run_plots(run)
    assert [p.name for p in written] == ["busbw.png", "time.png"]
    for path in written:
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000


def test_cli_plot_several_runs_and_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    # --out is a directory (made if missing), and a metric's column names it as well.
    folder = tmp_path / "fig"
    argv = ["plot", str(a), str(b), "--metric", "algbw_gbps", "--out", str(folder), "--fit"]
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 0, err
    out = folder / "algbw-a-vs-b.png"
    assert err == f"colbench: wrote {out}\n"
    assert out.read_bytes()[:8] == PNG_MAGIC
    (tmp_path / "file").write_text("")
    for args, message in (
        (["plot", str(a), "--metric", "speed"], "bad --metric 'speed'"),
        (["plot", str(a), "--metric", "time_us", "--peak", "10"], "--peak is a bandwidth"),
        (["plot", str(tmp_path / "missing")], "no results file"),
        (["plot", str(a), "--out", str(tmp_path / "x.png")], "--out is a directory"),
        (["plot", str(a), "--out", str(tmp_path / "file")], "not a directory"),
    ):
        with pytest.raises(SystemExit) as info:
            main(args)
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.startswith("colbench: error: ") and message in err
        assert err.count("\n") == 1


def test_default_figures_of_several_runs_never_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # plot A B and compare A B once wrote ./busbw.png and ./compare.png over whatever
    # was there; now each default name says which runs, a taken one steps aside, and
    # the figures go into the last run's own folder, never the current directory.
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    written = []
    for argv in (["plot", str(a), str(b)], ["plot", str(a), str(b)], ["compare", str(a), str(b)]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 0, err
        written.append(err.strip().removeprefix("colbench: wrote "))
    assert written == [
        str(b / n) for n in ("busbw-a-vs-b.png", "busbw-a-vs-b-2.png", "compare-a-vs-b.png")
    ]
    assert all(Path(name).read_bytes()[:8] == PNG_MAGIC for name in written)
    assert list(here.iterdir()) == []
    # One run directory: its own figure, in it (what --help says).
    with pytest.raises(SystemExit):
        main(["plot", str(a)])
    assert capsys.readouterr().err == f"colbench: wrote {a / 'busbw.png'}\n"


def test_plot_of_one_run_draws_what_sweep_plot_draws_under_the_same_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sweep --plot drew panels into busbw.png, plot RUN one combined chart into the same
    # name: whichever ran last decided what the file showed. Now both draw the panels,
    # byte for byte, and the one chart has a name of its own.
    run = _run(tmp_path, variants=("NCCL_ALGO=Ring", "NCCL_ALGO=Tree"))
    swept = {p.name: p.read_bytes() for p in write_run_plots(run)}
    for metric in ("busbw", "time"):
        (run / f"{metric}.png").unlink()
        with pytest.raises(SystemExit) as info:
            main(["plot", str(run), "--metric", metric])
        assert info.value.code == 0
        assert capsys.readouterr().err == f"colbench: wrote {run / f'{metric}.png'}\n"
        assert (run / f"{metric}.png").read_bytes() == swept[f"{metric}.png"]
    with pytest.raises(SystemExit) as info:
        main(["plot", str(run), "--one-chart", "--peak", "30", "--fit"])
    assert info.value.code == 0
    assert capsys.readouterr().err.endswith(f"colbench: wrote {run / 'busbw-one-chart.png'}\n")
    assert (run / "busbw.png").read_bytes() == swept["busbw.png"]
    path, _ = plot_runs([run, run], one_chart=True)
    assert path.name == "busbw-one-chart-run-vs-run.png"


def test_panels_carry_the_peak_and_the_fit(tmp_path: Path) -> None:
    curves = lines(load_runs([_run(tmp_path)])[0])
    fig = plot_panels(curves, "busbw", peak_gbps=25.0, fit=True)
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        drawn = ax.get_lines()
        assert [line.get_linestyle() for line in drawn if line.get_label() == "_model"] == [":"]
        assert any(list(line.get_ydata()) == [25.0, 25.0] for line in drawn)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["rated peak 25 GB/s", "model (fit)"]
    with pytest.raises(UsageError, match="--peak is a bandwidth"):
        plot_panels(curves, "time", peak_gbps=25.0)


def test_the_size_axis_names_no_internal_column(tmp_path: Path) -> None:
    fig = plot_lines(lines(load_runs([_run(tmp_path)])[0]), "busbw")
    label = fig.axes[0].get_xlabel()
    assert label == "message size (binary units, 1K = 1024 B)" and "size_bytes" not in label


def test_a_fit_that_misses_its_curve_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Times that zigzag by 3x around a flat line: no alpha-beta shape fits them.
    rows = [row("all_reduce", s, 100.0 * (3 if i % 2 else 1)) for i, s in enumerate(SIZES)]
    run = write_run(tmp_path / "zigzag", rows)
    fig = plot_lines(lines(load_runs([run])[0]), "time", fit=True)
    (label,) = [line.get_label() for line in _data_lines(fig.axes[0])]
    assert label.startswith("all_reduce (fit rms ") and label.endswith(", poor fit)")
    with pytest.raises(SystemExit) as info:
        main(["plot", str(run), "--fit", "--out", str(tmp_path / "z")])
    err = capsys.readouterr().err
    assert info.value.code == 0
    assert err.startswith("colbench: warning: plot --fit: all_reduce: rms error ")
    assert "(over 25%): the model does not describe these points" in err
