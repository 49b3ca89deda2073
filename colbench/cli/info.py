"""Commands that describe or convert: explain, env, version, import."""

from __future__ import annotations

from typing import Annotated

import typer

from colbench import __version__, ops
from colbench.cli.app import app


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
    from colbench.run.environment import describe

    typer.echo(describe())


@app.command()
def version() -> None:
    """Print the colbench version.

    Example: colbench version
    """
    typer.echo(__version__)


@app.command("import")
def import_(
    kind: Annotated[str, typer.Argument(help="Format of the log: nccl-tests.")],
    log: Annotated[
        str, typer.Argument(help="The tool's stdout saved to a file, or nccl-tests' -J report.")
    ],
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
    nccl-tests' JSON report (-J FILE.json) is read exactly: with -I 1 every iteration is a
    sample row (compare and gate judge them), else the report's own figures.

    \b
    Examples:
      colbench import nccl-tests all_reduce_perf.log
      colbench import nccl-tests ar.log --out results/imported-ar/ --variant NCCL_ALGO=Tree
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
    )
    for note in imported.notes:
        typer.echo(f"colbench: note: {note}", err=True)
    for warning in imported.warnings:
        typer.echo(f"colbench: warning: {warning}", err=True)
    typer.echo(f"colbench: {importers.summary(run_dir, imported)}", err=True)


@app.command("explain-log")
def explain_log(
    logs: Annotated[
        list[str], typer.Argument(help="NCCL_DEBUG=INFO logs, each explained on its own.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per log (a list for several).")
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
    """
    import json

    from colbench.nccl.explain import explain_logs, explain_text

    found = explain_logs(logs)
    if as_json:
        data = [facts for _, facts in found]
        typer.echo(json.dumps(data[0] if len(data) == 1 else data, indent=2))
        return
    typer.echo("\n\n".join(explain_text(name, facts) for name, facts in found))
