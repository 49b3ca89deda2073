"""The command line: parses, converts, prints and sets exit codes. No measuring here."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, NoReturn

import typer

from colbench import __version__, config, ops
from colbench.errors import ExitCode, RankFailure, UsageError
from colbench.sizes import parse_size

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


@app.command(help=SWEEP_HELP)
def sweep(
    config_file: Annotated[
        str | None,
        typer.Option(
            "--config",
            help="A YAML suite (see configs/); flags given here override it. "
            "Same as `colbench run FILE`.",
        ),
    ] = None,
    op: Annotated[
        str,
        typer.Option("--op", help="Collectives, comma list or 'all': " + ", ".join(ops.BY_NAME)),
    ] = "all_reduce",
    sizes: Annotated[
        str | None,
        typer.Option(
            "--sizes", "-s", help="Range 1K-1G or list 1K,4K,1M (binary units). Default 1K-16M."
        ),
    ] = None,
    minbytes: Annotated[
        str | None,
        typer.Option("--minbytes", "-b", help="nccl-tests: smallest size (binary units)."),
    ] = None,
    maxbytes: Annotated[
        str | None,
        typer.Option("--maxbytes", "-e", help="nccl-tests: largest size (binary units)."),
    ] = None,
    factor: Annotated[
        float | None,
        typer.Option(
            "--factor", "--stepfactor", "-f", help="Multiply size by this per step (default 2)."
        ),
    ] = None,
    step: Annotated[
        str | None,
        typer.Option("--step", "--stepbytes", "-i", help="Add this many bytes per step instead."),
    ] = None,
    dtype: Annotated[
        str,
        typer.Option(
            "--dtype",
            "-d",
            help="Element types, comma list or 'all': float32, float16, bfloat16, float64, "
            "int8, uint8, int32, int64.",
        ),
    ] = "float32",
    redop: Annotated[
        str,
        typer.Option(
            "--redop",
            "-o",
            help="Reduction ops, comma list or 'all': sum, prod, min, max, avg (float only).",
        ),
    ] = "sum",
    root: Annotated[
        int, typer.Option("--root", "-r", help="Root rank of broadcast, reduce, gather, scatter.")
    ] = 0,
    placement: Annotated[
        str,
        typer.Option("--placement", help="out (separate buffers), in (in-place form) or out,in."),
    ] = "out,in",
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed calls per size.")] = 20,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            help="Measure the whole sweep this many times, interleaved; every sample is a "
            "CSV row (for colbench gate).",
        ),
    ] = 1,
    warmup: Annotated[
        int, typer.Option("--warmup", "-w", help="Untimed calls per size before timing.")
    ] = 5,
    check: Annotated[
        int, typer.Option("--check", "-c", help="1: verify every result (default); 0: skip.")
    ] = 1,
    average: Annotated[
        str,
        typer.Option(
            "--average",
            "-a",
            help="Combine ranks' times: avg, min, max, rank0 (or nccl-tests 1, 2, 3, 0).",
        ),
    ] = "avg",
    backend: Annotated[
        str, typer.Option("--backend", help="auto (NCCL if GPUs, else gloo), nccl or gloo.")
    ] = "auto",
    nprocs: Annotated[
        int | None,
        typer.Option(
            "--nprocs",
            "-p",
            help="Ranks to spawn without a launcher (default: GPUs for NCCL, 2 for gloo).",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds any one step (a timed batch, a barrier) may take: a hang ends "
            "the run with exit 4 naming the stuck ranks.",
        ),
    ] = 300.0,
    init_timeout: Annotated[
        float,
        typer.Option(
            "--init-timeout",
            help="Seconds for every rank to join the rendezvous, and for the communicator "
            "to start.",
        ),
    ] = 120.0,
    group_size: Annotated[
        int | None,
        typer.Option(
            "--group-size",
            help="Split the world into contiguous groups of this many ranks, all running "
            "each collective at once (busbw uses the group size as n).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the deterministic input data.")] = 0,
    out: Annotated[
        str | None, typer.Option("--out", help="Run directory (must be new or empty).")
    ] = None,
    results_dir: Annotated[
        str, typer.Option("--results-dir", help="Parent of default run directories.")
    ] = "results",
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress", help="Progress bar on stderr (default: when a terminal)."
        ),
    ] = None,
    memory_check: Annotated[
        str,
        typer.Option(
            "--memory-check",
            help="Before allocating: skip sizes that do not fit in memory, refuse the sweep, "
            "or off.",
        ),
    ] = "skip",
    memory_limit: Annotated[
        str | None,
        typer.Option("--memory-limit", help="Cap on buffer memory per rank, e.g. 512M (binary)."),
    ] = None,
    time_budget: Annotated[
        float | None,
        typer.Option(
            "--time-budget",
            help="Seconds of timed calls per size: iterations adapt to fill it "
            "(--iters is then the minimum).",
        ),
    ] = None,
    rotate: Annotated[
        int,
        typer.Option("--rotate", help="Cycle N buffer sets call by call so caches do not help."),
    ] = 1,
    cuda_graph: Annotated[
        bool,
        typer.Option("--cuda-graph", "-G", help="NCCL: capture the timed batch in a CUDA graph."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="NCCL: dump torch's flight recorder into the run dir on timeout."
        ),
    ] = False,
    table: Annotated[
        bool, typer.Option("--table/--no-table", help="Print the nccl-tests style table.")
    ] = True,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="Variant axis KEY=V1,V2 (repeatable): the sweep runs once per combination, "
            "each in fresh ranks started with those variables, e.g. --env NCCL_ALGO=Ring,Tree.",
        ),
    ] = None,
    plot: Annotated[
        bool,
        typer.Option("--plot/--no-plot", help="Write busbw.png and time.png into the run dir."),
    ] = False,
) -> None:
    from colbench.variants import parse_axes

    if config_file is not None:
        # main() turns `sweep --config FILE` into `run FILE`; reaching here means the
        # option was given where that cannot happen (inside a suite, or app() called directly).
        raise UsageError("--config cannot be used here; use `colbench run FILE [flags]`")

    if check not in (0, 1):
        raise UsageError(f"--check takes 0 or 1, got {check}")
    _choice("--backend", backend, ("auto", "gloo", "nccl"))
    cfg = config.build(
        op=op,
        sizes=config.resolve_sizes(sizes, minbytes, maxbytes, factor, step),
        dtype=dtype,
        redop=redop,
        root=root,
        placements=config.parse_placements(placement),
        iters=iters,
        repeat=repeat,
        warmup=warmup,
        check=bool(check),
        average=config.parse_average(average),
        backend=_choice("--backend", backend, ("auto", "gloo", "nccl")),
        nprocs=nprocs,
        timeout_s=timeout,
        init_timeout_s=init_timeout,
        group_size=group_size,
        seed=seed,
        out_dir=out,
        results_root=results_dir,
        progress=progress,
        table=table,
        memory_check=_choice("--memory-check", memory_check, ("skip", "refuse", "off")),
        memory_limit_bytes=parse_size(memory_limit) if memory_limit is not None else None,
        time_budget_s=time_budget,
        rotate=rotate,
        cuda_graph=cuda_graph,
        debug=debug,
        command_line=tuple(sys.argv),
        env_axes=parse_axes(env or []),
        plot=plot,
    )
    # Imported after the arguments are checked: the runner needs torch, whose import
    # (1 s on CPU, 5 s with a CUDA build) a usage error should not wait for.
    from colbench.run.parent import run_sweep

    raise typer.Exit(run_sweep(cfg))


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
    typer.echo(explain_text(ops.get(op)))


FORMS = {"out": "out-of-place", "in": "in-place"}


def explain_text(coll: ops.Collective) -> str:
    factor_doc = " ".join((coll.busbw_factor.__doc__ or "").split())
    lines = [
        f"{coll.name}: {coll.summary}",
        f"  timed call : {coll.torch_call}",
        f"  size       : {coll.size_rule}",
        f"  count      : {coll.count_rule}",
        "  algbw      : size_bytes / time, in GB/s (1 GB/s = 1e9 bytes/s)",
        f"  busbw      : {coll.busbw_rule}",
        f"  why        : {factor_doc}",
        f"  placements : {', '.join(FORMS[p] for p in coll.placements)}",
    ]
    if coll.sized:
        lines.append("  example    : a requested 1K of float32:")
        for n in (1, 2, 3, 8):
            lay = coll.layout(1024, 4, n)
            lines.append(
                f"               n={n}: count {lay.count}, size_bytes {lay.size_bytes}, "
                f"busbw factor {coll.busbw_factor(n):.4g}"
            )
    if coll.uses_redop:
        lines.append("  redop      : sum, prod, min, max, avg (avg on floating types only)")
    if coll.rooted:
        lines.append("  root       : --root (default 0)")
    if coll.notes:
        lines.append(f"  note       : {coll.notes}")
    return "\n".join(lines)


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


@app.command(
    help=RUN_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    suite_file: Annotated[str, typer.Argument(help="A suite file, e.g. configs/smoke-cpu.yaml.")],
) -> None:
    from colbench import suite
    from colbench.variants import merge_axes, parse_axes

    options = suite.load(suite_file)
    # Parse the remaining arguments exactly as sweep would, to learn which were given.
    sweep_command = getattr(typer.main.get_command(app), "commands", {})["sweep"]
    flags = sweep_command.make_context("colbench run", list(ctx.args), parent=ctx)
    kwargs = {**flags.params, **options}
    given = {
        name: value
        for name, value in flags.params.items()
        if getattr(flags.get_parameter_source(name), "name", "") == "COMMANDLINE"
    }
    if "env" in given:
        merged = merge_axes(parse_axes(options.get("env") or []), parse_axes(given["env"]))
        given["env"] = [f"{key}={','.join(values)}" for key, values in merged]
    kwargs.update(given)
    sweep(**kwargs)


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

    Rows are joined on op, dtype, redop, placement, size and world size; rows that
    cannot be judged (one run only, other backend, wrong results) are marked x.

    \b
    Examples:
      colbench compare results/a/ results/b/
      colbench compare results/imported-ar/ results/today/ --metric time --out t.png
      colbench compare results/x/ results/x/ --variant-a NCCL_ALGO=Ring --variant-b NCCL_ALGO=Tree
    """
    from colbench import compare as compare_module

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
    from colbench.importers import nccl_tests

    if kind.strip().lower() not in ("nccl-tests", "rccl-tests", "nccl_tests"):
        raise UsageError(f"unknown import format {kind!r}: colbench imports nccl-tests")
    run_dir, imported = nccl_tests.import_log(
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
    tables = ", ".join(f"{t['op']} at {t['world_size']} ranks" for t in imported.facts["tables"])
    typer.echo(
        f"colbench: imported {len(imported.rows)} rows ({tables}) into {run_dir}/results.csv",
        err=True,
    )


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


@app.command(
    help=CROSSCHECK_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def crosscheck(
    ctx: typer.Context,
    nccl_tests: Annotated[
        str | None,
        typer.Option(
            "--nccl-tests",
            help="Directory holding nccl-tests' programs (or its build/); else PATH.",
        ),
    ] = None,
    nccl_tests_timeout: Annotated[
        float,
        typer.Option(
            "--nccl-tests-timeout", help="Seconds nccl-tests may run before it is stopped."
        ),
    ] = 3600.0,
) -> None:
    from colbench import crosscheck as cross

    if nccl_tests_timeout <= 0:
        raise UsageError(f"--nccl-tests-timeout must be positive, got {nccl_tests_timeout:g}")
    # The measuring flags are sweep's own: parse them with sweep's parser.
    sweep_command = getattr(typer.main.get_command(app), "commands", {})["sweep"]
    flags = sweep_command.make_context("colbench crosscheck", list(ctx.args), parent=ctx)
    given = {
        name
        for name in flags.params
        if getattr(flags.get_parameter_source(name), "name", "") == "COMMANDLINE"
    }
    plan = cross.make_plan(flags.params, given, nccl_tests)
    outcome = cross.run(
        plan,
        out=flags.params["out"],
        results_root=flags.params["results_dir"],
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
    from colbench import fit as fit_module
    from colbench.series import lines, load_runs

    curves = [c for run in load_runs(runs) for c in lines(run)]
    if not curves:
        raise UsageError("nothing to fit: no rows with a size above 0 bytes")
    results = fit_module.fit_lines(curves)
    typer.echo(fit_module.report(results, fit_module.crossovers(results)))


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> Any:
    if value not in allowed:
        raise UsageError(f"bad {flag} {value!r}: use {', '.join(allowed)}")
    return value


def _error(message: str) -> None:
    print(f"colbench: error: {message}", file=sys.stderr)


def _suite_as_run(argv: list[str]) -> list[str]:
    """``sweep --config FILE [flags]`` is ``run FILE [flags]``: one merge of file and flags."""
    if not argv or argv[0] != "sweep":
        return argv
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return ["run", argv[i + 1], *argv[1:i], *argv[i + 2 :]]
        if arg.startswith("--config="):
            return ["run", arg.split("=", 1)[1], *argv[1:i], *argv[i + 1 :]]
    return argv


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
    argv = _suite_as_run(sys.argv[1:] if argv is None else list(argv))
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
) -> None:
    import os
    from pathlib import Path

    from colbench import gate as gate_mod
    from colbench.report import gate_report
    from colbench.results import csv_path

    checks = gate_mod.parse_checks(check or ())
    window = gate_mod.SizeWindow.parse(min_size, max_size)
    if max_cv_pct <= 0:
        raise UsageError(f"--max-cv-pct must be positive, got {max_cv_pct:g}")
    if min_avg_busbw_gbps is not None:
        floor = gate_mod.parse_floor(min_avg_busbw_gbps, "--min-avg-busbw-gbps")
    else:
        floor = gate_mod.parse_floor(os.environ.get("NCCL_TESTS_MIN_BW"), "NCCL_TESTS_MIN_BW")
    if update_baseline:
        if csv_path(baseline).is_file():
            result = gate_mod.run_gate(baseline, current, checks, window, alpha, max_cv_pct / 100)
            typer.echo("\n".join(gate_report.console_lines(result)))
        target = gate_mod.update_baseline(current, baseline)
        print(f"colbench: {' + '.join(current)} is the new baseline in {target}", file=sys.stderr)
        raise typer.Exit(int(ExitCode.OK))
    result = gate_mod.run_gate(baseline, current, checks, window, alpha, max_cv_pct / 100, floor)
    typer.echo("\n".join(gate_report.console_lines(result)))
    outputs = [(report, gate_report.markdown), (junit, gate_report.junit_xml)]
    for path, render in outputs:
        if path:
            _write_text(Path(path), render(result))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        _write_text(Path(summary), gate_report.markdown(result) + "\n", append=True)
    raise typer.Exit(int(ExitCode.OK) if result.passed else int(ExitCode.DATA_ERROR))


def _write_text(path: Any, text: str, append: bool = False) -> None:
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
