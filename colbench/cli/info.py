"""Commands that describe or convert: explain, env, version, import, explain-log, references."""

from __future__ import annotations

from typing import Annotated

import typer

from colbench import __version__
from colbench.cli.app import EXPLAIN, IMPORT, JUDGE, app


@app.command(rich_help_panel=EXPLAIN)
def explain(op: Annotated[str, typer.Argument(help="A collective, e.g. all_gather.")]) -> None:
    """Print how size, count, algbw and busbw are defined for OP.

    Example: colbench explain all_gather
    """
    from colbench.bench import ops

    typer.echo(ops.explain_text(ops.get(op)))


@app.command(rich_help_panel=EXPLAIN)
def env() -> None:
    """Show backends, GPUs, versions and the launcher colbench would join.

    Example: colbench env
    """
    from colbench.host.world import describe

    typer.echo(describe())


@app.command(rich_help_panel=EXPLAIN)
def version() -> None:
    """Print the colbench version.

    Example: colbench version
    """
    typer.echo(__version__)


# import's arguments and options, declared apart so its function reads as the command.
ImportedLog = Annotated[
    str,
    typer.Argument(
        help="The tool's stdout saved to a file (- reads it from a pipe), nccl-tests' -J "
        "report, or Inspector's dir."
    ),
]
ImportOut = Annotated[
    str | None,
    typer.Option("--out", help="Run directory to create (default results/imported-<log>)."),
]
ImportWorldSize = Annotated[
    int | None,
    typer.Option(
        "--world-size",
        help="Ranks, for logs whose Rank, nranks and nThread/nGpus lines do not say it.",
    ),
]
ImportDtype = Annotated[
    str | None,
    typer.Option("--dtype", help="Inspector: the calls' element type (it records none)."),
]
ImportDevice = Annotated[
    str | None,
    typer.Option("--device", help="Inspector: the GPU model, e.g. 'NVIDIA H100 80GB HBM3'."),
]


@app.command("import", rich_help_panel=IMPORT)
def import_(
    kind: Annotated[str, typer.Argument(help="Format: nccl-tests, or inspector.")],
    log: ImportedLog,
    out: ImportOut = None,
    world_size: ImportWorldSize = None,
    op: Annotated[
        str | None, typer.Option("--op", help="Collective, when the log does not name it.")
    ] = None,
    variant: Annotated[
        str, typer.Option("--variant", help="Variant the rows carry, e.g. NCCL_ALGO=Tree.")
    ] = "",
    results_dir: Annotated[
        str, typer.Option("--results-dir", help="Parent of the default run directory.")
    ] = "results",
    dtype: ImportDtype = None,
    device: ImportDevice = None,
) -> None:
    """Import another tool's results as a colbench run (results.csv + meta.json).

    nccl-tests and rccl-tests stdout in the old (error) and new (#wrong) layouts, with
    NCCL INFO lines, mpirun --tag-output or srun --label prefixes. algbw and busbw are
    recomputed with colbench's formulas; rows where the log disagrees are warned about.
    inspector: NCCL Inspector's JSON output (a dump directory), one row per communicator,
    op and size (docs/references.md).
    nccl-tests' JSON report (-J FILE.json) is read exactly: with -I 1 every iteration is a
    sample row (compare and gate judge them), else the report's own figures.

    \b
    Examples:
      colbench import nccl-tests all_reduce_perf.log
      colbench import inspector nccl-inspector-1234/ --dtype bfloat16
      colbench import nccl-tests ar.log --out results/imported-ar/ --variant NCCL_ALGO=Tree
      mpirun -np 8 ./all_reduce_perf -b 8 -e 8G -f 2 | colbench import nccl-tests -
      colbench import nccl-tests trimmed.log --world-size 16
      colbench import nccl-tests all_reduce.json --out results/imported-ar-json
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
        dtype=dtype,
        device=device or "",
    )
    for note in imported.notes:
        typer.echo(f"colbench: note: {note}", err=True)
    for warning in imported.warnings:
        typer.echo(f"colbench: warning: {warning}", err=True)
    typer.echo(f"colbench: {importers.summary(run_dir, imported)}", err=True)
    from colbench.commands.references.place import FIELD, lines

    if FIELD in imported.facts:
        for line in lines(imported.facts[FIELD]):
            typer.echo(f"colbench: reference: {line}", err=True)


@app.command("explain-log", rich_help_panel=EXPLAIN)
def explain_log(
    logs: Annotated[
        list[str], typer.Argument(help="NCCL_DEBUG=INFO logs, each explained on its own.")
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="One JSON object per log, its path first (a list for several)."
        ),
    ] = False,
) -> None:
    """Say what NCCL chose in a job, from its own INFO log, and what looks wrong.

    Version, ranks, nodes, channels, the transport of each peer connection, the network,
    GDR, NVLS, the algorithm and protocol per size (TUNING lines), and one verdict line per
    problem the log's own lines prove (docs/explain.md). Any job's log reads: a training
    job's, nccl-tests', one pasted in an issue, with launcher prefixes and ranks interleaved.

    \b
    Examples:
      colbench explain-log nccl.log
      colbench explain-log rank0.log rank1.log --json

    Exit codes: 0 explained (verdicts do not change it), 2 a log unreadable or without an
    NCCL line (nothing printed), 130 interrupted, 141 the reader of its output closed it
    (| head).
    """
    import json

    from colbench.nccl.explain import explain_json, explain_logs, explain_text

    found = explain_logs(logs)
    if as_json:
        typer.echo(json.dumps(explain_json(found), indent=2))
        return
    typer.echo("\n\n".join(explain_text(name, facts) for name, facts in found))


# references' longest options, declared apart so its function stays one screen.
ReferencesFile = Annotated[
    str | None,
    typer.Option(
        "--references",
        help="A file in the same format (YAML or JSON) instead of the shipped table: "
        "a fleet's golden runs.",
    ),
]
ReferencesFromFloors = Annotated[
    str | None,
    typer.Option(
        "--from-floors",
        help="floors.json of `colbench health learn`, read as entries (typical figure "
        "and WARN floor per collective check).",
    ),
]


@app.command(rich_help_panel=JUDGE)
def references(
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="GPU model, e.g. H100, GB200, MI300X.")
    ] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option("--gpus-per-node", help="GPUs per node.", min=1)
    ] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="Nodes.", min=1)] = None,
    op: Annotated[str | None, typer.Option("--op", help="Collective, e.g. all_reduce.")] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="measurement, floor or expectation.")
    ] = None,
    references_file: ReferencesFile = None,
    from_floors: ReferencesFromFloors = None,
    run_dir: Annotated[
        str | None,
        typer.Option("--run", help="Place this run (a sweep or import) against the entries."),
    ] = None,
    write: Annotated[
        str | None, typer.Option("--write", help="Write the entries as a references file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON.")] = False,
) -> None:
    """List published collective results for named hardware, each with its source.

    The shipped table holds measurements, health-check floors and maintainers' figures
    from public repositories and issues, each with the source's own line. Filters narrow
    it; --references reads a fleet's own file instead; --run places a finished run
    against the entries (as sweep and import do with the shipped table).

    \b
    Examples:
      colbench references --gpu H100 --gpus-per-node 8
      colbench references --gpu GB200 --kind floor
      colbench references --references golden.yaml --run results/sweep-1
      colbench references --from-floors floors.json --gpus-per-node 8 --write golden.json
    """
    from colbench.commands.references.command import Filters, run

    extra = []
    if from_floors is not None:
        from colbench.commands.health.floors import as_references

        extra = as_references(from_floors, gpus_per_node)
    filters = Filters(gpu, gpus_per_node, nodes, op, kind)
    raise typer.Exit(run(filters, references_file, extra, run_dir, write, as_json))
