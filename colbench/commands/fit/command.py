"""``colbench fit`` as a plain function: load runs, fit each measured line, print the models
and where two of them cross."""

from __future__ import annotations

from collections.abc import Sequence

from colbench.commands.fit import model
from colbench.errors import ExitCode, UsageError
from colbench.results.series import lines, load_runs


def run(runs: Sequence[str]) -> int:
    """Fit time = alpha + size / beta per (op, variant) of ``runs``; the exit code."""
    curves = [c for loaded in load_runs(runs) for c in lines(loaded)]
    if not curves:
        raise UsageError("nothing to fit: no rows with a size above 0 bytes")
    results = model.fit_lines(curves)
    print(model.report(results, model.crossovers(results)))
    return int(ExitCode.OK)
