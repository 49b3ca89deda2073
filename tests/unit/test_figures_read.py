"""The figures as a user reads them (issue 36): each collective in a panel of its own
with the placement drawn named, legends that cover no point, a heatmap whose colours
say how far a link is from the fabric's median, no empty health frame, a compare of a
run with itself that calls both sides by the run's name. The artists are read back,
not the pixels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from colbench.commands.compare.comparison import figure
from colbench.commands.compare.pairs import compare_runs
from colbench.commands.health.heatmap import nothing_to_draw
from colbench.commands.health.judge import against_fleet, samples_of
from colbench.commands.p2p.report import MIN_SPAN_FACTOR, centred_norm, write_heatmap
from colbench.commands.plot.lines import plot_panels, write_run_plots
from colbench.results.series import lines, load_runs
from tests.unit.rows import SIZES, alpha_beta, row, write_run

ALL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
           "gather", "scatter", "sendrecv")  # fmt: skip


def _sweep(tmp_path: Path, ops: tuple[str, ...], variants: tuple[str, ...] = ("",)) -> Path:
    model = alpha_beta(20.0, 10.0)
    rows = []
    for variant in variants:
        for op in ops:
            # all_reduce in place only, as torch offers it; the others out of place.
            in_place = int(op == "all_reduce")
            rows += [row(op, s, model(s), variant=variant, in_place=in_place) for s in SIZES]
    return write_run(tmp_path / "run", rows)


def test_each_collective_has_a_panel_titled_with_its_placement(tmp_path: Path) -> None:
    curves = lines(load_runs([_sweep(tmp_path, ALL_OPS)])[0])
    fig = plot_panels(curves, "time")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == [
        "all_reduce (in-place)",
        *(f"{op} (out-of-place)" for op in ALL_OPS[1:]),
    ]
    assert all(len(ax.get_lines()) == 1 for ax in shown)
    # One curve a panel: the title names it, no legend is drawn over the points.
    assert all(ax.get_legend() is None for ax in fig.axes) and not fig.legends


def test_variants_share_a_legend_outside_the_panels(tmp_path: Path) -> None:
    run = _sweep(tmp_path, ("all_reduce", "all_gather"), ("NCCL_ALGO=Ring", "NCCL_ALGO=Tree"))
    fig = plot_panels(lines(load_runs([run])[0]), "busbw")
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    # The same variant takes the same colour in every panel.
    colours = [[line.get_color() for line in ax.get_lines()] for ax in fig.axes]
    assert colours[0] == colours[1] and colours[0][0] != colours[0][1]
    assert [p.name for p in write_run_plots(run)] == ["busbw.png", "time.png"]


def test_the_heatmap_scale_is_centred_on_the_median_with_a_minimum_span() -> None:
    # The fabric: every link between 1.10 and 1.25 GB/s. A scale from its own
    # minimum to maximum painted these as opposite ends; around the median, at least
    # half to twice it, they all sit near the middle colour.
    uniform = {(s, d): 1.10 + 0.15 * ((s * 4 + d) % 7) / 6 for s in range(4) for d in range(4)
               if s != d}  # fmt: skip
    norm = centred_norm(uniform)
    assert norm.vmax / norm.vmin == pytest.approx(MIN_SPAN_FACTOR**2)
    assert all(0.4 < norm(v) < 0.6 for v in uniform.values())
    # A link at a quarter of the others is at the scale's low end, the others near the middle.
    slow = {**uniform, (0, 2): 0.3, (2, 0): 0.3}
    norm = centred_norm(slow)
    assert norm(0.3) == pytest.approx(0.0, abs=0.02)
    assert all(0.45 < norm(v) < 0.65 for p, v in slow.items() if v != 0.3)


def test_the_heatmap_is_written_with_both_panels(tmp_path: Path) -> None:
    bw = {(s, d): 2.0 for s in range(4) for d in range(4) if s != d}
    lat = {p: 500.0 for p in bw}
    frame = pd.DataFrame([{"size_bytes": 1 << 26, "latency_bytes": 8, "backend": "gloo"}])
    path = write_heatmap(tmp_path / "p2p.png", bw, lat, {r: "vm" for r in range(4)}, frame)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _one_node_doc() -> dict:
    samples = [
        {"check": "node", "size_bytes": 8 << 20, "where": [0], "pass_index": p,
         "busbw_gbps": 20.0 + p, "waits_us": [], "times_us": []}
        for p in range(4)
    ]  # fmt: skip
    return {"version": 1, "names": ["vm"], "node_of": [0, 0], "samples": samples}


def test_one_node_has_no_health_figure_and_says_why() -> None:
    samples = samples_of(_one_node_doc())
    why = nothing_to_draw(against_fleet(samples), samples)
    assert why == (
        "no heatmap: health.png draws each node against the others and pairs of nodes, and "
        "this run has 1 node"
    )


def test_one_node_health_run_writes_no_empty_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from colbench.commands.health.config import HealthConfig
    from colbench.commands.health.report import report

    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"schema_version": 1, "backend": "gloo"}))
    (run / "health.samples.json").write_text(json.dumps(_one_node_doc()))
    assert report(run, HealthConfig()) == 0
    assert not (run / "health.png").exists()
    assert "colbench: note: no heatmap: " in capsys.readouterr().err


def test_compare_of_a_run_with_itself_names_both_sides_by_the_run(tmp_path: Path) -> None:
    run = _sweep(tmp_path, ("all_reduce",), ("NCCL_ALGO=Ring", "NCCL_ALGO=Tree"))
    comparison = compare_runs(run, run, variant_a="NCCL_ALGO=Ring", variant_b="NCCL_ALGO=Tree")
    assert comparison.a.label == "run [NCCL_ALGO=Ring]"
    assert comparison.b.label == "run [NCCL_ALGO=Tree]"
    # The legend says each once: the variant is in the run's label already.
    top = figure(comparison).axes[0]
    assert [t.get_text() for t in top.get_legend().get_texts()] == [
        "run [NCCL_ALGO=Ring]",
        "run [NCCL_ALGO=Tree]",
    ]
    # Two different runs of one name are still told apart.
    other = write_run(tmp_path / "elsewhere" / "run", [row("all_reduce", 1024, 30.0)])
    assert [r.label for r in load_runs([run, other, run])] == ["run", "run (2)", "run"]


def test_one_sample_per_row_promises_no_noise_band(tmp_path: Path) -> None:
    run = _sweep(tmp_path, ("all_reduce",), ("NCCL_ALGO=Ring", "NCCL_ALGO=Tree"))
    comparison = compare_runs(run, run, variant_a="NCCL_ALGO=Ring", variant_b="NCCL_ALGO=Tree")
    bottom = figure(comparison).axes[1]
    assert bottom.get_ylabel() == "B / A"
    notes = [t.get_text() for t in bottom.texts]
    assert notes == ["no noise band: one sample per row (sweep --repeat 5 measures it)"]


def test_a_long_title_is_wrapped_within_the_figure(tmp_path: Path) -> None:
    long_name = "nightly-" + "h200-rail-optimised-" * 6 + "run"
    model = alpha_beta(20.0, 10.0)
    a = write_run(tmp_path / "a", [row("all_reduce", s, model(s)) for s in SIZES])
    b = write_run(tmp_path / long_name, [row("all_reduce", s, model(s)) for s in SIZES])
    title = figure(compare_runs(a, b)).axes[0].get_title()
    assert long_name[:40] in title.replace("\n", "")
    assert max(len(line) for line in title.splitlines()) <= 95
