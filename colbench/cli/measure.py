"""Commands that measure: sweep, run (a suite), p2p, health, crosscheck, replay. Their
parameters come from the options tables, imported when the command is built.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from colbench.cli.app import (
    MEASURE,
    _given,
    _option,
    _param,
    _refuse_nccl_tests_flags,
    _with_options,
    app,
)
from colbench.commands.crosscheck import FORWARDED, MAPPED

SWEEP_HELP = """Measure collectives over a range of message sizes.

Sizes: --sizes 1K-1G (doubling; --factor/--step change that) or --sizes 1K,4K,1M.
Units are binary (1K = 1024 bytes); bandwidth is reported in GB/s (1 GB/s = 1e9 bytes/s).

nccl-tests' flags mean what they mean there, or are refused with the reason
(docs/nccl-tests.md): -b/-e without -f step by -i (1M), -c N verifies N times, -r -1
runs every root, -G N launches the graph N times, -T 0 is no timeout. --op names the
collective; the reduction is -o/--redop. Defaults that differ from nccl-tests': sizes
1K-16M (nccl-tests: 32M), -w 5 (nccl-tests: 1). Ranks: --nprocs (nccl-tests' -p is
its parallel init, which changes nothing here).

\b
Examples:
  colbench sweep --op all_reduce --sizes 1K-1G
  colbench sweep --op all --sizes 1K-16M --backend gloo --nprocs 4 --dtype float32,bfloat16
  colbench sweep --op all_gather -b 8 -e 128M -f 2 -n 20 -w 5 -c 1
  colbench sweep --op all_reduce --sizes 1K-64M --nprocs 4 --group-size 2
  colbench sweep --op all_reduce --env NCCL_ALGO=Ring,Tree --env NCCL_PROTO=LL,Simple --plot
  torchrun --nproc-per-node 2 -m colbench sweep --op all_reduce --sizes 1K-1M
  colbench sweep --op all --sizes 1K-256K --repeat 5 --out results/ci

Exit codes: 0 ok, 1 wrong results (or rows without memory, or an average busbw below 0.9x
NCCL_TESTS_MIN_BW), 2 usage error, 3 rank failure, 4 timeout, 6 a file of the run could not
be written (disk full, directory gone), 129/130/131/143 interrupted
(SIGHUP/SIGINT/SIGQUIT/SIGTERM), 141 the reader of its output closed it (| head).
"""
CONFIG_HELP = (
    "A YAML suite (see configs/); flags given here override it. Same as `colbench run FILE`."
)


def command_line_notes(given: Mapping[str, Any]) -> list[str]:
    """What an nccl-tests user should be told about flags that ran, given on the command line."""
    notes = []
    op = given.get("op")
    if op is not None and str(op).strip().lower() == "all" and "redop" not in given:
        notes.append(
            "--op all runs every collective: --op names the collective here; nccl-tests' "
            "--op all (every reduction) is -o all / --redop all"
        )
    if "parallel_init" in given:
        notes.append(
            "-p/--parallel_init changes nothing here: every rank is a process that starts "
            "its own communicator"
        )
    return notes


def sweep_options(ctx: typer.Context, suite_file: str | None, values: dict[str, Any]) -> Any:
    """The SweepOptions of a parsed ``sweep``/``run`` command line: nccl-tests' flags that
    sweep does not take refused with their reason, notes on those that ran said."""
    from colbench.commands.sweep import command

    _refuse_nccl_tests_flags(values)
    given = _given(ctx, values)
    opts = command.options_of(suite_file, given)
    for note in command_line_notes(given):
        print(f"colbench: note: {note}", file=sys.stderr)
    return opts


def _run_sweep(ctx: typer.Context, suite_file: str | None, values: dict[str, Any]) -> int:
    from colbench.commands.sweep import command

    return command.run(sweep_options(ctx, suite_file, values), tuple(sys.argv))


@app.command(help=SWEEP_HELP, rich_help_panel=MEASURE)
@_with_options(_option("config_file", str | None, None, "--config", CONFIG_HELP))
def sweep(ctx: typer.Context, config_file: str | None = None, **values: Any) -> None:
    raise typer.Exit(_run_sweep(ctx, config_file, values))


P2P_HELP = """Measure bandwidth and latency between every pair of ranks; name slow links and nodes.

Every ordered pair is measured: bandwidth at --size (osu_bw: a window of messages sent
back to back, 8 on NCCL and 1 on gloo (--window), timed to the receiver's
acknowledgement) and latency at --latency-size (osu_latency: half a ping-pong round
trip). Pairs run in rounds of disjoint pairs (a round-robin tournament), each round once
per direction; --serial runs one pair at a time. -n/-w count the messages of each
ordered pair; --repeat R (default 5) measures the whole matrix R times. Writes p2p.csv,
meta.json and the heatmap p2p.png into the run directory and prints the matrices (each
pair's median over the passes), then the verdict, which judges the passes themselves: a
node, then a link (its worse direction), is named slow when the median of its passes is
more than --threshold below the median of the other links' bandwidth (or
--latency-threshold above their latency) and a rank test finds its passes beyond the
others' spread, with Holm's correction over every question asked (needs at least 4
ranks, nodes with --per-node, and enough passes: 3 on 4 ranks). --fail-below PCT exits
1 when a link's bandwidth holds more than PCT below the others' by the same test, and
says in one line that the check passed when none does. --max-time caps the whole run.

\b
Examples:
  colbench p2p --nprocs 8
  colbench p2p --nprocs 4 --backend gloo --size 16M -n 10
  srun -N 16 --ntasks-per-node=8 colbench p2p --per-node
  torchrun --nnodes 4 --nproc-per-node 8 ... -m colbench p2p --rail --fail-below 30

Exit codes: 0 ok, 1 --fail-below found a link below its limit, 2 usage error,
3 rank failure, 4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


@app.command(help=P2P_HELP, rich_help_panel=MEASURE)
@_with_options(rows="colbench.commands.p2p.options")
def p2p(ctx: typer.Context, **values: Any) -> None:
    from colbench.commands import p2p as command

    raise typer.Exit(command.run(values, tuple(sys.argv)))


HEALTH_HELP = """Check every node of a launched job at once; name the bad one.

Runs, in order: each node alone (a local copy), every node's own ranks at once
(all_reduce and all_gather; skipped with one rank per node), pairs of nodes (sendrecv
between their first ranks, rounds of disjoint pairs) and the whole world (all_reduce),
each repeated for --level's passes. Nodes are named by SLURMD_NODENAME, NODE_NAME, else
the host name. Without --floors each node is judged against the fleet's median by p2p's
rules: WARN 25% below, CRITICAL 50% below, beyond the samples' spread. Writes
health.jsonl and health.prom (node_exporter's textfile collector) into the run directory
and prints the table (docs/health.md).

`colbench health learn RUN... --out floors` learns floors from 10 or more healthy
runs into floors/floors.json; `--floors floors/floors.json` judges against them.

\b
Examples:
  srun -N 16 --ntasks-per-node 8 colbench health --drain-list drain.txt
  torchrun --nnodes 6 --nproc-per-node 1 ... -m colbench health --level quick
  colbench health learn results/health-* --out floors

Exit codes: 0 healthy (WARNs allowed), 1 a node CRITICAL (named), 2 usage error,
3 rank failure, 4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


@app.command(help=HEALTH_HELP, rich_help_panel=MEASURE)
@_with_options(
    _param(
        "args",
        list[str] | None,
        None,
        typer.Argument(
            help="Nothing to check the nodes; `learn RUN...` to learn floors.",
            metavar="[learn RUN...]",
        ),
    ),
    rows="colbench.commands.health.options",
)
def health(ctx: typer.Context, args: list[str] | None = None, **values: Any) -> None:
    from colbench.commands import health as command
    from colbench.errors import UsageError

    if not args:
        raise typer.Exit(command.run(values, tuple(sys.argv)))
    if args[0] != "learn":
        raise UsageError(f"health takes no argument {args[0]!r}: did you mean `health learn`?")
    raise typer.Exit(command.learn(args[1:], values.get("out")))


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


@app.command(help=RUN_HELP, rich_help_panel=MEASURE)
@_with_options(
    _param(
        "suite_file", str, inspect.Parameter.empty, typer.Argument(help=SUITE_HELP, metavar="FILE")
    )
)
def run(ctx: typer.Context, suite_file: str, **values: Any) -> None:
    raise typer.Exit(_run_sweep(ctx, suite_file, values))


CROSSCHECK_HELP = """Run one sweep through nccl-tests and through colbench, and show both per size.

Takes sweep's flags for what to measure (--op, --sizes or -b/-e/-f/-i, -d, -o, -r,
--placement, -n, -w, -c, -a, --nprocs, -G N, -p; one op, dtype, redop and root) and runs the op's
nccl-tests program (all_reduce_perf...) with the same settings as one process driving
--nprocs GPUs of this node (-g N), then `colbench sweep` on NCCL with as many ranks. It
imports nccl-tests' output and prints time and busbw of both with colbench time /
nccl-tests time per size. The directory (--out) keeps nccl-tests.log (raw), nccl-tests/
(imported), colbench/ (the sweep), crosscheck.csv, crosscheck.txt and crosscheck.png.
--backend gloo runs colbench's side on the CPU, to test the cross-check itself.

--ranks-per-gpu K runs both sides as an emulated world of K ranks per GPU, each an NCCL
node of its own (docs/gpu.md): colbench as `sweep --ranks-per-gpu K`, nccl-tests (built
with MPI=1) as one process per rank under mpiexec (--mpiexec, else mpiexec or mpirun on
PATH), each rank given the same NCCL_HOSTID, transport and GPU as colbench's. So one GPU
cross-checks multi-rank all_reduce, ring and tree included.

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
  colbench crosscheck --op all_gather --sizes 1K-64M -n 50 --nprocs 4 -G 5
  NCCL_ALGO=Tree colbench crosscheck --op all_reduce --sizes 1K-64M --ranks-per-gpu 4

Exit codes: 0 ok, 1 wrong results, 2 usage error (nothing ran), 3 a tool failed,
4 nccl-tests outran --nccl-tests-timeout (or colbench's --timeout).
"""
NCCL_TESTS_HELP = "Directory holding nccl-tests' programs (or its build/); else PATH."
NCCL_TESTS_TIMEOUT_HELP = "Seconds nccl-tests may run before it is stopped."
MPIEXEC_HELP = (
    'MPI launcher for nccl-tests under --ranks-per-gpu, with its flags ("mpiexec -launcher '
    'fork"); default mpiexec or mpirun on PATH.'
)


def _crosscheck_refuses() -> frozenset[str]:
    """sweep's options crosscheck refuses (nccl-tests has nothing like them): parsed, so the
    refusal can say why, but not listed in its --help."""
    from colbench.config import options

    return frozenset(opt.name for opt in options.table() if opt.name not in MAPPED | set(FORWARDED))


@app.command(help=CROSSCHECK_HELP, rich_help_panel=MEASURE)
@_with_options(
    _option("nccl_tests", str | None, None, "--nccl-tests", NCCL_TESTS_HELP),
    _option("nccl_tests_timeout", float, 3600.0, "--nccl-tests-timeout", NCCL_TESTS_TIMEOUT_HELP),
    _option("mpiexec", str | None, None, "--mpiexec", MPIEXEC_HELP),
    hidden=_crosscheck_refuses,
)
def crosscheck(ctx: typer.Context, **values: Any) -> None:
    from colbench.commands.crosscheck import command

    tools = [values.pop(name) for name in ("nccl_tests", "nccl_tests_timeout", "mpiexec")]
    _refuse_nccl_tests_flags(values)
    raise typer.Exit(command.run(values, _given(ctx, values), *tools))


REPLAY_HELP = """Measure a job's own collective mix, read from its traces.

TRACE: torch profiler traces (prof.export_chrome_trace; gloo needs record_shapes=True),
torch flight-recorder dumps (pickle or JSON) or PARAM basic traces; one per rank, .gz too.
An uneven all_to_allv needs every rank's trace. Each (op, size, dtype, group size) the
job called is swept as colbench sweep would, on as many ranks as the job's group had;
the report predicts the time per step from the measurements, beside the job's own
recorded times, and names the top contributors. The run directory holds plan.json,
replay.csv, sweeps/ (a run directory per kind) and suites/ (one YAML suite per kind,
for `colbench run` and `colbench gate` in CI). See docs/replay.md.

\b
Examples:
  colbench replay trace-rank0.json trace-rank1.json --dry-run --json
  colbench replay trace-rank*.json --iters 20 --out results/replay
  colbench replay fr_trace_0 fr_trace_1 --backend gloo

Exit codes: 0 ok, 1 wrong results, 2 unreadable or partial traces (nothing measured),
3 rank failure, 4 timeout, 130/143 interrupted (SIGINT/SIGTERM).
"""


@app.command(help=REPLAY_HELP, rich_help_panel=MEASURE)
def replay(
    trace: Annotated[list[str], typer.Argument(help="Trace files, one per rank.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; measure nothing.")
    ] = False,
    json: Annotated[
        bool, typer.Option("--json", help="With --dry-run: the plan as a JSON list.")
    ] = False,
    out: Annotated[str | None, typer.Option("--out", help="Run directory (new or empty).")] = None,
    results_dir: Annotated[
        str, typer.Option("--results-dir", help="Where the default run directory goes.")
    ] = "results",
    backend: Annotated[
        str | None, typer.Option("--backend", help="auto, nccl or gloo (as sweep).")
    ] = None,
    iters: Annotated[
        int | None, typer.Option("--iters", "-n", help="Timed calls per size.")
    ] = None,
    warmup: Annotated[
        int | None, typer.Option("--warmup", "-w", help="Untimed calls per size.")
    ] = None,
    repeat: Annotated[
        int | None, typer.Option("--repeat", help="Measure each sweep this many times.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds any one step may take.")
    ] = None,
) -> None:
    from colbench.commands.replay import command

    opts = command.ReplayOptions(
        dry_run, json, out, results_dir, backend, iters, warmup, repeat, timeout
    )
    raise typer.Exit(command.run(trace, opts))
