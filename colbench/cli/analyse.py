"""Commands that read runs: plot, compare, fit, gate (colbench.analysis does the work)."""

from __future__ import annotations

from typing import Annotated

import typer

from colbench.cli.app import app
from colbench.errors import UsageError


@app.command()
def plot(
    runs: Annotated[list[str], typer.Argument(help="Run directories (or results.csv files).")],
    metric: Annotated[str, typer.Option("--metric", help="busbw, algbw or time.")] = "busbw",
    out: Annotated[
        str | None,
        typer.Option("--out", help="Figure file (.png/.svg/.pdf). Default: <run>/<metric>.png."),
    ] = None,
    peak: Annotated[
        float | None,
        typer.Option("--peak", help="Rated link bandwidth in GB/s, drawn as a horizontal line."),
    ] = None,
    fit: Annotated[
        bool, typer.Option("--fit/--no-fit", help="Overlay the latency-bandwidth model.")
    ] = False,
) -> None:
    """Plot busbw, algbw or time against message size, one line per (op, variant, run).

    \b
    Examples:
      colbench plot results/20261122-022623-all-gloo/
      colbench plot results/a/ results/b/ --metric time --out a-vs-b.png
      colbench plot results/imported-ar/ --peak 400 --fit
    """
    from colbench.report.plots import plot_runs

    path = plot_runs(runs, metric, out=out, peak_gbps=peak, fit=fit)
    typer.echo(f"colbench: wrote {path}", err=True)


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="Run A, the reference.")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared with A (ratio = B / A).")],
    metric: Annotated[str, typer.Option("--metric", help="busbw, algbw or time.")] = "busbw",
    out: Annotated[
        str, typer.Option("--out", help="Figure file: both runs above, B / A below.")
    ] = "compare.png",
    variant_a: Annotated[
        str | None, typer.Option("--variant-a", help="Use only this variant of run A.")
    ] = None,
    variant_b: Annotated[
        str | None, typer.Option("--variant-b", help="Use only this variant of run B.")
    ] = None,
) -> None:
    """Compare two runs size by size: both values, the ratio B / A, and one figure.

    Rows are joined on op, dtype, redop, root, placement, size, world size and group
    size (where both runs record it); rows that cannot be judged (one run only, other
    backend, wrong results) are marked x.

    \b
    Examples:
      colbench compare results/a/ results/b/
      colbench compare results/imported-ar/ results/today/ --metric time --out t.png
      colbench compare results/x/ results/x/ --variant-a NCCL_ALGO=Ring --variant-b NCCL_ALGO=Tree
    """
    from colbench.analysis import compare as compare_module

    comparison, path = compare_module.compare(
        run_a, run_b, metric, out=out, variant_a=variant_a, variant_b=variant_b
    )
    typer.echo(compare_module.format_table(comparison))
    if path is not None:
        typer.echo(f"colbench: wrote {path}", err=True)


@app.command()
def fit(
    runs: Annotated[list[str], typer.Argument(help="Run directories (or results.csv files).")],
) -> None:
    """Fit time = alpha + size / beta per (op, variant): latency, bandwidth, crossovers.

    alpha is the latency in microseconds, beta the algorithm bandwidth in GB/s. The fit
    weighs relative error and down-weights outliers, so noisy small sizes do not
    decide it. Where two variants' models cross, the crossover size is printed.

    \b
    Examples:
      colbench fit results/20261122-022623-all_reduce-nccl/
      colbench fit results/ring/ results/tree/
    """
    from colbench.analysis import fit as fit_module
    from colbench.analysis.series import lines, load_runs

    curves = [c for run in load_runs(runs) for c in lines(run)]
    if not curves:
        raise UsageError("nothing to fit: no rows with a size above 0 bytes")
    results = fit_module.fit_lines(curves)
    typer.echo(fit_module.report(results, fit_module.crossovers(results)))


GATE_HELP = """Compare a run with a baseline and fail on regressions or wrong results.

Rows are joined on op, dtype, redop, root, placement, size, world size, backend and
variant; each side's samples (sweep --repeat R) are summarised by their median. A check
METRIC:+X% or METRIC:-X% sets how far METRIC may move in its bad direction (a drop for
busbw_gbps and algbw_gbps, a rise for times); METRIC:VALUE is an absolute bound. wrong:0
is always on. A change beyond a limit fails only when the samples show it is real
(one-sided exact Mann-Whitney U test); otherwise the row is marked noisy. Rows missing
from the current run, or measured at another world size, backend, dtype or variant,
fail too. NCCL_TESTS_MIN_BW (GB/s) adds nccl-tests' average bus bandwidth floor.

Holm's procedure over the rows keeps the chance that an unchanged run fails any row at
--alpha; each row states the smallest slowdown it would have caught at --power (the
detect column), a row too noisy to see one is insensitive, and fewer than --min-judged
such rows passes on correctness only and says so. Against a baseline from another
machine (CPU, cores, GPU, versions in meta.json) performance is not comparable.

CURRENT may be several runs: their samples pool per row, and with --update-baseline
they become one baseline (--keep K: a rolling window of the last K accepted runs).
Runs made at different times carry the machine's run-to-run variation, which the
repeats of one run cannot show.

\b
Examples:
  colbench run configs/smoke-cpu.yaml --no-table --out results/ci
  colbench gate results/baselines/gloo-smoke results/ci \\
      --check busbw_gbps:-25% --min-size 4M --report gate.md --junit gate.xml
  colbench gate results/baselines/gloo-smoke results/ci --update-baseline --keep 3

Exit codes: 0 pass, 1 the gate failed (the count is in the last line), 2 usage error.
"""


@app.command(help=GATE_HELP)
def gate(
    baseline: Annotated[str, typer.Argument(help="Baseline run directory (or its results.csv).")],
    current: Annotated[
        list[str],
        typer.Argument(
            help="Current run directory (or results.csv); several runs pool their samples."
        ),
    ],
    check: Annotated[
        list[str] | None,
        typer.Option(
            "--check",
            help="METRIC:+X%, METRIC:-X% or METRIC:VALUE; repeatable. Metrics: busbw_gbps, "
            "algbw_gbps, time_us, time_min_us, time_p50_us, time_p99_us, time_max_us.",
        ),
    ] = None,
    min_size: Annotated[
        str | None,
        typer.Option("--min-size", help="Judge performance only at size_bytes >= this (1K=1024)."),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", help="Judge performance only at size_bytes <= this."),
    ] = None,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Significance level of the rank test.")
    ] = 0.05,
    max_cv_pct: Annotated[
        float,
        typer.Option("--max-cv-pct", help="Warn when a row's samples vary more than this (%)."),
    ] = 10.0,
    min_avg_busbw_gbps: Annotated[
        str | None,
        typer.Option(
            "--min-avg-busbw-gbps",
            help="Fail when an op's average busbw is below this (default: NCCL_TESTS_MIN_BW).",
        ),
    ] = None,
    report: Annotated[
        str | None, typer.Option("--report", help="Write a Markdown report here.")
    ] = None,
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write JUnit XML here (one case per row).")
    ] = None,
    update_baseline: Annotated[
        bool,
        typer.Option(
            "--update-baseline",
            help="Accept CURRENT as the new baseline (copied into BASELINE); refused when it "
            "has wrong elements or oom rows.",
        ),
    ] = False,
    keep: Annotated[
        int,
        typer.Option(
            "--keep",
            help="With --update-baseline: keep the last K accepted runs pooled (a rolling "
            "window) instead of replacing the baseline.",
        ),
    ] = 1,
    power: Annotated[
        float,
        typer.Option("--power", help="Power the detectable-slowdown figures are stated at."),
    ] = 0.8,
    fwer: Annotated[
        str,
        typer.Option(
            "--fwer", help="Family-wise control over the rows: holm, or none (each row alone)."
        ),
    ] = "holm",
    min_judged: Annotated[
        int,
        typer.Option(
            "--min-judged",
            help="Fewer rows sensitive enough to judge: performance inconclusive (exit 0).",
        ),
    ] = 1,
    any_machine: Annotated[
        bool,
        typer.Option(
            "--any-machine",
            help="Judge performance against a baseline from another machine (CPU, cores, "
            "GPU or versions differ) instead of marking it not comparable.",
        ),
    ] = False,
    missing_baseline_ok: Annotated[
        bool,
        typer.Option(
            "--missing-baseline-ok",
            help="A BASELINE directory that does not exist judges the current run alone "
            "(correctness, presence); performance not judged.",
        ),
    ] = False,
) -> None:
    from colbench.analysis.gate_command import GateFlags, gate_command

    flags = GateFlags(
        min_size=min_size,
        max_size=max_size,
        alpha=alpha,
        max_cv_pct=max_cv_pct,
        min_avg_busbw_gbps=min_avg_busbw_gbps,
        report=report,
        junit=junit,
        update=update_baseline,
        keep=keep,
        power=power,
        fwer=fwer,
        min_judged=min_judged,
        any_machine=any_machine,
        missing_baseline_ok=missing_baseline_ok,
    )
    code = gate_command(baseline, current, check or (), flags)
    raise typer.Exit(code)
