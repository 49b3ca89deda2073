"""The command line: parses, converts, prints and sets exit codes. No measuring here."""

from __future__ import annotations

import sys
from typing import Annotated, Any

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
  colbench sweep --op all --sizes 1K-256K --repeat 5 --out results/ci

Exit codes: 0 ok, 1 wrong results (or rows without memory), 2 usage error, 3 rank failure,
4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


@app.command(help=SWEEP_HELP)
def sweep(
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
        float, typer.Option("--timeout", help="Process-group timeout in seconds.")
    ] = 300.0,
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
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="NCCL: dump torch's flight recorder into the run dir on timeout."
        ),
    ] = False,
    table: Annotated[
        bool, typer.Option("--table/--no-table", help="Print the nccl-tests style table.")
    ] = True,
) -> None:
    from colbench.runner import run_sweep

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
        seed=seed,
        out_dir=out,
        results_root=results_dir,
        progress=progress,
        table=table,
        memory_check=_choice("--memory-check", memory_check, ("skip", "refuse", "off")),
        memory_limit_bytes=parse_size(memory_limit) if memory_limit is not None else None,
        debug=debug,
        command_line=tuple(sys.argv),
    )
    raise typer.Exit(run_sweep(cfg))


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


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> Any:
    if value not in allowed:
        raise UsageError(f"bad {flag} {value!r}: use {', '.join(allowed)}")
    return value


def _error(message: str) -> None:
    print(f"colbench: error: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every failure becomes one line on stderr and a documented exit code."""
    try:
        code = app(args=argv, prog_name="colbench", standalone_mode=False)
    except UsageError as exc:
        _error(str(exc))
        sys.exit(int(ExitCode.USAGE))
    except RankFailure as exc:
        _error(str(exc))
        sys.exit(int(ExitCode.RANK_FAILURE))
    except KeyboardInterrupt:
        _error("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
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
            "has wrong elements or unmeasured rows.",
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
