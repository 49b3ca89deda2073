"""The command line: parses, converts, prints and sets exit codes. No measuring here."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from colbench import __version__, config, ops, options
from colbench.errors import ExitCode, RankFailure, UsageError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Collective-communication benchmarks on torch.distributed with nccl-tests semantics.\n\n"
    "Sizes use binary units (1K = 1024 bytes); bandwidth is GB/s (1 GB/s = 1e9 bytes/s).\n\n"
    "Exit codes: 0 ok, 1 wrong results (or rows without memory), 2 usage error, "
    "3 rank failure, 4 timeout, 130/143 interrupted (SIGINT/SIGTERM).",
)

SWEEP_HELP = """Measure collectives over a range of message sizes.

Sizes: --sizes 1K-1G (doubling; --factor/--step change that) or --sizes 1K,4K,1M;
nccl-tests' -b/-e/-f/-i work too. Units are binary (1K = 1024 bytes); bandwidth is
reported in GB/s (1 GB/s = 1e9 bytes/s).

\b
Examples:
  colbench sweep --op all_reduce --sizes 1K-1G
  colbench sweep --op all --sizes 1K-16M --backend gloo --nprocs 4 --dtype float32,bfloat16
  colbench sweep --op all_gather -b 8 -e 128M -f 2 -n 20 -w 5 -c 1
  colbench sweep --op all_reduce --sizes 1K-64M --nprocs 4 --group-size 2
  colbench sweep --op all_reduce --env NCCL_ALGO=Ring,Tree --env NCCL_PROTO=LL,Simple --plot
  torchrun --nproc-per-node 2 -m colbench sweep --op all_reduce --sizes 1K-1M
  colbench sweep --op all --sizes 1K-256K --repeat 5 --out results/ci

Exit codes: 0 ok, 1 wrong results (or rows without memory), 2 usage error, 3 rank failure,
4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


F = TypeVar("F", bound=Callable[..., Any])


def _with_options(*leading: inspect.Parameter) -> Callable[[F], F]:
    """Give a command ``leading`` and then every option of the table (colbench.options)."""

    def wrap(func: F) -> F:
        ctx = inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
        )
        parameters = [ctx, *leading, *options.typer_parameters()]
        setattr(func, "__signature__", inspect.Signature(parameters))  # noqa: B010
        return func

    return wrap


def _param(name: str, kind: Any, default: Any, info: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, info]
    )


def _option(name: str, kind: Any, default: Any, flag: str, help: str) -> inspect.Parameter:
    return _param(name, kind, default, typer.Option(flag, help=help))


def _given(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options given on the command line (not left at their defaults)."""
    source = ctx.get_parameter_source
    return {k: v for k, v in values.items() if getattr(source(k), "name", "") == "COMMANDLINE"}


def _run_sweep(ctx: typer.Context, suite_file: str | None, values: dict[str, Any]) -> int:
    """One path for flags, a suite, or both: defaults < the file < the flags given."""
    from colbench import suite

    file_values = suite.load(suite_file) if suite_file is not None else {}
    cfg = config.from_options(options.merge(file_values, _given(ctx, values)), tuple(sys.argv))
    # Imported after the arguments are checked: the runner needs torch, whose import
    # (1 s on CPU, 5 s with a CUDA build) a usage error should not wait for.
    from colbench.run.parent import run_sweep

    return run_sweep(cfg)


CONFIG_HELP = (
    "A YAML suite (see configs/); flags given here override it. Same as `colbench run FILE`."
)


@app.command(help=SWEEP_HELP)
@_with_options(_option("config_file", str | None, None, "--config", CONFIG_HELP))
def sweep(ctx: typer.Context, config_file: str | None = None, **values: Any) -> None:
    raise typer.Exit(_run_sweep(ctx, config_file, values))


P2P_HELP = """Measure bandwidth and latency between every pair of ranks; name slow links and nodes.

Every ordered pair is measured: bandwidth at --size (osu_bw: one message, timed to the
receiver's acknowledgement) and latency at --latency-size (osu_latency: half a
ping-pong round trip). Pairs run in rounds of disjoint pairs (a round-robin
tournament), each round once per direction; --serial runs one pair at a time. Writes
p2p.csv, meta.json and the heatmap p2p.png into the run directory and prints the
matrices, then the verdict: a link (judged by its worse direction) or node whose
bandwidth is more than --threshold below the median of all links, or whose latency is
more than --latency-threshold above it (needs at least 4 ranks; nodes with --per-node).

\b
Examples:
  colbench p2p --nprocs 8
  colbench p2p --nprocs 4 --backend gloo --size 16M -n 10
  srun -N 16 --ntasks-per-node=8 colbench p2p --per-node
  torchrun --nnodes 4 --nproc-per-node 8 ... -m colbench p2p --rail --fail-below 30

Exit codes: 0 ok, 1 --fail-below found a link below its limit, 2 usage error,
3 rank failure, 4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


@app.command(help=P2P_HELP)
def p2p(
    nprocs: Annotated[
        int | None, typer.Option("--nprocs", "-p", help="Ranks to spawn without a launcher.")
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", help="auto (NCCL if GPUs, else gloo), nccl or gloo.")
    ] = "auto",
    size: Annotated[
        str, typer.Option("--size", help="Bandwidth message size (binary units).")
    ] = "64M",
    latency_size: Annotated[
        str, typer.Option("--latency-size", help="Latency message size (binary units).")
    ] = "8",
    bidirectional: Annotated[
        bool, typer.Option("--bidirectional", help="Both ranks of a pair send at once.")
    ] = False,
    serial: Annotated[
        bool, typer.Option("--serial", help="One pair at a time (no concurrent pairs).")
    ] = False,
    per_node: Annotated[
        bool, typer.Option("--per-node", help="One rank per node: a matrix of nodes.")
    ] = False,
    rail: Annotated[
        bool,
        typer.Option("--rail", help="Pair local rank k only with local rank k of other nodes."),
    ] = False,
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed messages per pair.")] = 20,
    warmup: Annotated[
        int, typer.Option("--warmup", "-w", help="Untimed messages per pair (at least 1 runs).")
    ] = 5,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat", help="Measure the matrix this many times; the verdict takes medians."
        ),
    ] = 1,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Slow: bandwidth this % below the median.")
    ] = 25.0,
    latency_threshold: Annotated[
        float,
        typer.Option("--latency-threshold", help="Slow: latency this % above the median."),
    ] = 100.0,
    fail_below: Annotated[
        float | None,
        typer.Option(
            "--fail-below", help="Exit 1 when a link's bandwidth is more than PCT below the median."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds any one step may take.")
    ] = 300.0,
    init_timeout: Annotated[
        float, typer.Option("--init-timeout", help="Seconds for every rank to join.")
    ] = 120.0,
    out: Annotated[
        str | None, typer.Option("--out", help="Run directory (must be new or empty).")
    ] = None,
    results_dir: Annotated[
        str, typer.Option("--results-dir", help="Parent of default run directories.")
    ] = "results",
    plot: Annotated[
        bool, typer.Option("--plot/--no-plot", help="Write the heatmap p2p.png.")
    ] = True,
) -> None:
    from colbench.p2p.config import from_options

    cfg = from_options(
        size,
        latency_size,
        nprocs=nprocs,
        backend=backend,
        bidirectional=bidirectional,
        serial=serial,
        per_node=per_node,
        rail=rail,
        iters=iters,
        warmup=warmup,
        repeat=repeat,
        bw_pct=threshold,
        latency_pct=latency_threshold,
        fail_below_pct=fail_below,
        timeout_s=timeout,
        init_timeout_s=init_timeout,
        out_dir=out,
        results_root=results_dir,
        plot=plot,
        command_line=tuple(sys.argv),
    )
    # Imported after the arguments are checked: the runner imports torch.
    from colbench.p2p.run import run_p2p

    raise typer.Exit(run_p2p(cfg))


@app.command()
def explain(op: Annotated[str, typer.Argument(help="A collective, e.g. all_gather.")]) -> None:
    """Print how size, count, algbw and busbw are defined for OP.

    Example: colbench explain all_gather
    """
    from colbench.ops.explain import explain_text

    typer.echo(explain_text(ops.get(op)))


@app.command()
def env() -> None:
    """Show backends, GPUs, versions and the launcher colbench would join.

    Example: colbench env
    """
    from colbench.envinfo import describe

    typer.echo(describe())


@app.command()
def version() -> None:
    """Print the colbench version.

    Example: colbench version
    """
    typer.echo(__version__)


RUN_HELP = """Run a YAML suite: the same options as sweep, from a file; flags given here win.

Keys are sweep's long option names (op, sizes, dtype, iters, backend, ...) plus
`variants`, a mapping of environment variable to values (like --env). An --env flag
replaces the file's values for that variable only.

\b
Examples:
  colbench run configs/smoke-cpu.yaml
  colbench run configs/ring-vs-tree.yaml --sizes 1K-64M --env NCCL_PROTO=Simple
"""


SUITE_HELP = "A suite file, e.g. configs/smoke-cpu.yaml."


@app.command(help=RUN_HELP)
@_with_options(_param("suite_file", str, inspect.Parameter.empty, typer.Argument(help=SUITE_HELP)))
def run(ctx: typer.Context, suite_file: str, **values: Any) -> None:
    raise typer.Exit(_run_sweep(ctx, suite_file, values))


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


@app.command("import")
def import_(
    kind: Annotated[str, typer.Argument(help="Format of the log: nccl-tests.")],
    log: Annotated[str, typer.Argument(help="The tool's stdout, saved to a file.")],
    out: Annotated[
        str | None,
        typer.Option("--out", help="Run directory to create (default results/imported-<log>)."),
    ] = None,
    world_size: Annotated[
        int | None,
        typer.Option(
            "--world-size",
            help="Ranks, for logs whose Rank, nranks and nThread/nGpus lines do not say it.",
        ),
    ] = None,
    op: Annotated[
        str | None, typer.Option("--op", help="Collective, when the log does not name it.")
    ] = None,
    variant: Annotated[
        str, typer.Option("--variant", help="Variant the rows carry, e.g. NCCL_ALGO=Tree.")
    ] = "",
    results_dir: Annotated[
        str, typer.Option("--results-dir", help="Parent of the default run directory.")
    ] = "results",
) -> None:
    """Import another tool's results as a colbench run (results.csv + meta.json).

    nccl-tests and rccl-tests stdout in the old (error) and new (#wrong) layouts, with
    NCCL INFO lines, mpirun --tag-output or srun --label prefixes. algbw and busbw are
    recomputed with colbench's formulas; rows where the log disagrees are warned about.

    \b
    Examples:
      colbench import nccl-tests all_reduce_perf.log
      colbench import nccl-tests ar.log --out results/imported-ar/ --variant NCCL_ALGO=Tree
      colbench import nccl-tests trimmed.log --world-size 16
    """
    from colbench import importers

    run_dir, imported = importers.import_log(
        kind,
        log,
        out_dir=out,
        results_root=results_dir,
        world_size=world_size,
        op=op,
        variant=variant,
    )
    for note in imported.notes:
        typer.echo(f"colbench: note: {note}", err=True)
    for warning in imported.warnings:
        typer.echo(f"colbench: warning: {warning}", err=True)
    typer.echo(f"colbench: {importers.summary(run_dir, imported)}", err=True)


CROSSCHECK_HELP = """Run one sweep through nccl-tests and through colbench, and show both per size.

Takes sweep's flags for what to measure (--op, --sizes or -b/-e/-f/-i, -d, -o, -r,
--placement, -n, -w, -c, -a, --nprocs, -G; one op, dtype and redop) and runs the op's
nccl-tests program (all_reduce_perf...) with the same settings as one process driving
--nprocs GPUs of this node (-g N), then `colbench sweep` on NCCL with as many ranks. It
imports nccl-tests' output and prints time and busbw of both with colbench time /
nccl-tests time per size. The directory (--out) keeps nccl-tests.log (raw), nccl-tests/
(imported), colbench/ (the sweep), crosscheck.csv, crosscheck.txt and crosscheck.png.
--backend gloo runs colbench's side on the CPU, to test the cross-check itself.

Several nodes: nccl-tests then needs an MPI build (make MPI=1) under mpirun and colbench
a launcher; run both yourself with the same flags and compare them:

\b
  mpirun -np 16 -N 8 all_reduce_perf -b 8 -e 1G -f 2 -g 1 > ar.log
  srun -N 2 --ntasks-per-node 8 colbench sweep --op all_reduce -b 8 -e 1G -f 2 --out results/ar
  colbench import nccl-tests ar.log --out results/ar-nccl-tests
  colbench compare results/ar-nccl-tests results/ar --metric time

\b
Examples:
  colbench crosscheck --op all_reduce -b 8 -e 1G -f 2 --nccl-tests ~/nccl-tests/build
  colbench crosscheck --op all_gather --sizes 1K-64M -n 50 --nprocs 4 -G

Exit codes: 0 ok, 1 wrong results, 2 usage error (nothing ran), 3 a tool failed,
4 nccl-tests outran --nccl-tests-timeout (or colbench's --timeout).
"""


NCCL_TESTS_HELP = "Directory holding nccl-tests' programs (or its build/); else PATH."
NCCL_TESTS_TIMEOUT_HELP = "Seconds nccl-tests may run before it is stopped."


@app.command(help=CROSSCHECK_HELP)
@_with_options(
    _option("nccl_tests", str | None, None, "--nccl-tests", NCCL_TESTS_HELP),
    _option("nccl_tests_timeout", float, 3600.0, "--nccl-tests-timeout", NCCL_TESTS_TIMEOUT_HELP),
)
def crosscheck(
    ctx: typer.Context,
    nccl_tests: str | None = None,
    nccl_tests_timeout: float = 3600.0,
    **values: Any,
) -> None:
    from colbench import crosscheck as cross

    if nccl_tests_timeout <= 0:
        raise UsageError(f"--nccl-tests-timeout must be positive, got {nccl_tests_timeout:g}")
    plan = cross.make_plan(values, set(_given(ctx, values)), nccl_tests)
    outcome = cross.run(
        plan,
        out=values["out"],
        results_root=values["results_dir"],
        timeout_s=nccl_tests_timeout,
        say=lambda line: typer.echo(f"colbench: {line}", err=True),
    )
    if outcome.table is not None:
        typer.echo(outcome.table)
    if outcome.error is not None:
        _error(outcome.error)
    else:
        typer.echo(f"colbench: cross-check in {outcome.directory}", err=True)
    raise typer.Exit(outcome.exit_code)


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


def _error(message: str) -> None:
    print(f"colbench: error: {message}", file=sys.stderr)


def _exit(code: int) -> NoReturn:
    """Exit with ``code``; once this process is a rank of a process group, without the
    interpreter's teardown: torch's C++ teardown at exit can abort a rank whose peers are
    gone ("terminate called without an active exception", SIGABRT), turning a one-line
    error into a crash (a launched rank refused for a different plan, say)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every failure becomes one line on stderr and a documented exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=argv, prog_name="colbench", standalone_mode=False)
    except UsageError as exc:
        _error(str(exc))
        _exit(int(ExitCode.USAGE))
    except RankFailure as exc:
        _error(str(exc))
        _exit(int(exc.exit_code))
    except KeyboardInterrupt:
        _error("interrupted")
        _exit(int(ExitCode.INTERRUPTED))
    except Exception as exc:
        # Typer's parser errors (click's UsageError, vendored in newer typer) carry
        # their own exit code and message: keep the code, print the message on one line.
        exit_code = getattr(exc, "exit_code", None)
        format_message = getattr(exc, "format_message", None)
        if type(exc).__name__ == "Abort":
            _error("interrupted")
            sys.exit(int(ExitCode.INTERRUPTED))
        if not isinstance(exit_code, int) or not callable(format_message):
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
        else:
            _error(" ".join(str(format_message()).split()))
        sys.exit(exit_code)
    sys.exit(int(code or 0))


GATE_HELP = """Compare a run with a baseline and fail on regressions or wrong results.

Rows are joined on op, dtype, redop, root, placement, size, world size, backend and
variant; each side's samples (sweep --repeat R) are summarised by their median. A check
METRIC:+X% or METRIC:-X% sets how far METRIC may move in its bad direction (a drop for
busbw_gbps and algbw_gbps, a rise for times); METRIC:VALUE is an absolute bound. wrong:0
is always on. A change beyond a limit fails only when the samples show it is real
(one-sided exact Mann-Whitney U test); otherwise the row is marked noisy. Rows missing
from the current run, or measured at another world size, backend, dtype or variant,
fail too. NCCL_TESTS_MIN_BW (GB/s) adds nccl-tests' average bus bandwidth floor.

CURRENT may be several runs: their samples pool per row, and with --update-baseline
they become one baseline. Runs made at different times carry the machine's run-to-run
variation, which the repeats of one run cannot show.

\b
Examples:
  colbench sweep --op all --sizes 1K-1M --repeat 5 --out results/ci
  colbench gate results/baselines/gloo-smoke results/ci \\
      --check busbw_gbps:-15% --check time_p50_us:+25% --min-size 64K \\
      --report gate.md --junit gate.xml
  colbench gate results/baselines/gloo-smoke results/ci --update-baseline
  colbench gate results/ab --variant-a python=main --variant-b python=pr \\
      --check busbw_gbps:-10%

With --variant-a/--variant-b, BASELINE is one interleaved run (sweep --env or --python
variants) and B is judged against A pair by pair (same size, same repeat): see
docs/comparing.md.

Exit codes: 0 pass, 1 the gate failed (the count is in the last line), 2 usage error.
"""


@app.command(help=GATE_HELP)
def gate(
    baseline: Annotated[str, typer.Argument(help="Baseline run directory (or its results.csv).")],
    current: Annotated[
        list[str] | None,
        typer.Argument(
            help="Current run directory (or results.csv); several runs pool their samples."
        ),
    ] = None,
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
    variant_a: Annotated[
        str | None,
        typer.Option(
            "--variant-a", help="Paired gate: the reference variant of the one run BASELINE."
        ),
    ] = None,
    variant_b: Annotated[
        str | None,
        typer.Option("--variant-b", help="Paired gate: the variant judged against --variant-a."),
    ] = None,
) -> None:
    from colbench.analysis.gate import gate_command

    code = gate_command(
        baseline,
        current or [],
        check or (),
        min_size=min_size,
        max_size=max_size,
        alpha=alpha,
        max_cv_pct=max_cv_pct,
        min_avg_busbw_gbps=min_avg_busbw_gbps,
        report=report,
        junit=junit,
        update=update_baseline,
        variant_a=variant_a,
        variant_b=variant_b,
    )
    raise typer.Exit(code)
