"""Commands that read runs: plot, compare, fit, predict, gate (their packages in
colbench.commands do the work)."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from colbench.cli.app import JUDGE, _param, _with_options, app

#: Every command names a metric by its column or its short alias (results.reporters.figures).
METRIC_HELP = "busbw, algbw or time (or their columns busbw_gbps, algbw_gbps, time_us)."
#: Every command that judges runs against each other refuses to mix fabrics without it.
ALLOW_EMULATED_HELP = (
    "Compare rows of an emulated fabric (sweep --ranks-per-gpu) with rows of a real one "
    "(refused without it: emulated times measure the emulation)."
)


@app.command(rich_help_panel=JUDGE)
def plot(
    runs: Annotated[list[str], typer.Argument(help="Run directories (or results.csv files).")],
    metric: Annotated[str, typer.Option("--metric", help=METRIC_HELP)] = "busbw",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Directory the figure goes into (made if missing). Default: the last run's "
            "own folder. One run: <metric>.png (in the run's folder, the figure sweep --plot "
            "writes, drawn the same); several: <metric>-<run>-vs-<run>.png (never "
            "overwritten: -2, -3...). --one-chart puts -one-chart after <metric>.",
        ),
    ] = None,
    one_chart: Annotated[
        bool,
        typer.Option(
            "--one-chart/--panels",
            help="Every line on one chart (<metric>-one-chart.png) instead of one small "
            "panel per collective, the figure sweep --plot draws.",
        ),
    ] = False,
    peak: Annotated[
        float | None,
        typer.Option("--peak", help="Rated link bandwidth in GB/s, drawn as a horizontal line."),
    ] = None,
    fit: Annotated[
        bool, typer.Option("--fit/--no-fit", help="Overlay the latency-bandwidth model.")
    ] = False,
) -> None:
    """Plot busbw, algbw or time against message size: one panel per collective (as sweep
    --plot draws), one line per variant and run; --one-chart puts every line on one chart.

    \b
    Examples:
      colbench plot results/20261122-022623-all-gloo/
      colbench plot results/a/ results/b/ --metric time --out figures/
      colbench plot results/imported-ar/ --peak 400 --fit --one-chart
    """
    from colbench.commands.plot.lines import plot_runs

    path, warnings = plot_runs(runs, metric, out=out, peak_gbps=peak, fit=fit, one_chart=one_chart)
    for warning in warnings:
        typer.echo(f"colbench: warning: {warning}", err=True)
    typer.echo(f"colbench: wrote {path}", err=True)


@app.command(rich_help_panel=JUDGE)
def compare(
    run_a: Annotated[str, typer.Argument(help="Run A, the reference.")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared with A (ratio = B / A).")],
    metric: Annotated[str, typer.Option("--metric", help=METRIC_HELP)] = "busbw",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Directory the figure (both runs above, B / A below) goes into, as "
            "compare-<A>-vs-<B>.png (never overwritten: -2, -3...). Default: run B's own "
            "folder.",
        ),
    ] = None,
    variant_a: Annotated[
        str | None, typer.Option("--variant-a", help="Use only this variant of run A.")
    ] = None,
    variant_b: Annotated[
        str | None, typer.Option("--variant-b", help="Use only this variant of run B.")
    ] = None,
    allow_emulated: Annotated[
        bool, typer.Option("--allow-emulated", help=ALLOW_EMULATED_HELP)
    ] = False,
) -> None:
    """Compare two runs size by size: both values, the ratio B / A, and one figure.

    Rows are joined on op, dtype, redop, root, placement, size, world size and group
    size (where both runs record it); rows that cannot be judged (one run only, other
    backend, wrong results) are marked x.

    \b
    Examples:
      colbench compare results/a/ results/b/
      colbench compare results/imported-ar/ results/today/ --metric time --out figures/
      colbench compare results/x/ results/x/ --variant-a NCCL_ALGO=Ring --variant-b NCCL_ALGO=Tree
    """
    from colbench.commands.compare import comparison as compare_module

    comparison, path = compare_module.compare(
        run_a, run_b, metric, out=out, variant_a=variant_a, variant_b=variant_b,
        allow_emulated=allow_emulated,
    )  # fmt: skip
    for warning in comparison.warnings:
        typer.echo(f"colbench: warning: {warning}", err=True)
    typer.echo(compare_module.format_table(comparison))
    typer.echo(f"colbench: wrote {path}", err=True)


@app.command(rich_help_panel=JUDGE)
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
    from colbench.commands.fit.model import run as fit_run

    raise typer.Exit(fit_run(runs))


PREDICT_HELP = """Fit cost models to runs at a few world sizes and predict larger ones.

Per (op, algorithm) one fit over every measured (N, size) point finds the link
parameters of time = overhead + steps*alpha + link_bytes*beta + reduced_bytes*gamma:
ring (all_reduce 2(N-1) steps; all_gather, reduce_scatter N-1), binary tree and double
binary tree (NCCL's Tree: a chain inside a node, a tree across nodes). Points that do
not fit are dropped and named; every prediction carries a 95% interval that widens away
from the measured points. Prints the tree/ring crossover size per target N. Refuses
what the runs cannot tell: one world size only, single-node runs for multi-node
targets, too few sizes, NCCL runs without NCCL_ALGO (docs/predict.md).

\b
Examples:
  colbench predict results/ring-2n/ results/ring-4n/ --ranks 64,512,4096 --plot
  colbench predict results/r2/ results/r3/ results/r4/ --ranks 8 --ranks-per-node 1
  colbench predict results/r2/ results/r3/ results/r4/ \\
      --against results/r6/ results/r8/ --max-error 15 --out predicted/

Exit codes: 0 ok, 1 --max-error exceeded, 2 bad input or refused extrapolation.
"""


class PredictCommand(TyperCommand):
    """``colbench predict``'s command: ``--against`` takes several runs (spread_against)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from colbench.commands.predict.options import spread_against

        return super().parse_args(ctx, spread_against(args))


@app.command(help=PREDICT_HELP, cls=PredictCommand, rich_help_panel=JUDGE)
@_with_options(
    _param(
        "runs", list[str], inspect.Parameter.empty,
        typer.Argument(help="Run directories to fit (or results.csv files).", metavar="RUN"),
    ),
    rows="colbench.commands.predict.options",
)  # fmt: skip
def predict(ctx: typer.Context, runs: list[str], **values: Any) -> None:
    from colbench.commands.predict.command import run as predict_run
    from colbench.commands.predict.options import PredictOptions

    raise typer.Exit(predict_run(runs, PredictOptions(**values)))


BASELINE_HELP = "Baseline run directory (or its results.csv)."
CURRENT_HELP = "Current run directory (or results.csv); several runs pool their samples."
GATE_HELP = """Compare a run with a baseline and fail on regressions or wrong results.

Rows are joined on op, dtype, redop, root, placement, size, world size, backend and
variant; each side's samples (sweep --repeat R) are summarised by their median. A check
METRIC:+X% or METRIC:-X% sets how far METRIC may move in its bad direction (a drop for
busbw_gbps and algbw_gbps, a rise for times); METRIC:VALUE is an absolute bound. wrong:0
is always on. A change beyond a limit fails only when the samples show it is real
(one-sided exact Mann-Whitney U test); otherwise the row is marked noisy. Rows missing
from the current run, or measured at another world size, backend, dtype or variant,
fail too. NCCL_TESTS_MIN_BW (GB/s) adds nccl-tests' average bus bandwidth floor, with
nccl-tests' rule: each op's average must reach 0.9x the value; --min-avg-busbw-gbps X
instead asks for X itself.

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
  colbench gate results/ab --variant-a python=main --variant-b python=pr \\
      --check busbw_gbps:-10%

With --variant-a/--variant-b, BASELINE is one interleaved run (sweep --env or --python
variants) and B is judged against A pair by pair (same size, same repeat): see
docs/comparing.md.

Exit codes: 0 pass, 1 the gate failed (the count is in the last line), 2 usage error, 5 a
pass on correctness and presence only under --fail-inconclusive, 6 --update-baseline,
--report or --junit could not write its file.
"""


@app.command(help=GATE_HELP, rich_help_panel=JUDGE)
@_with_options(
    _param(
        "baseline",
        str,
        inspect.Parameter.empty,
        typer.Argument(help=BASELINE_HELP, metavar="BASELINE"),
    ),
    _param("current", list[str] | None, None, typer.Argument(help=CURRENT_HELP, metavar="CURRENT")),
    rows="colbench.commands.gate.options",
)
def gate(ctx: typer.Context, baseline: str, current: list[str] | None, **values: Any) -> None:
    from colbench.commands.gate.command import run as gate_run
    from colbench.commands.gate.options import GateOptions

    raise typer.Exit(gate_run(baseline, current or [], GateOptions(**values)))
