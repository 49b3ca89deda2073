"""``colbench crosscheck`` as a plain function: plan both sides, run them, print the table."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import Any

from colbench.crosscheck import plan as cross
from colbench.errors import UsageError


def run(
    values: Mapping[str, Any],
    given: Collection[str],
    nccl_tests: str | None,
    nccl_tests_timeout_s: float,
    mpiexec: str | None = None,
) -> int:
    """``values``: sweep's options (``given``: those the user typed); the exit code."""
    if nccl_tests_timeout_s <= 0:
        raise UsageError(f"--nccl-tests-timeout must be positive, got {nccl_tests_timeout_s:g}")
    planned = cross.make_plan(values, set(given), nccl_tests, mpiexec=mpiexec)
    outcome = cross.run(
        planned,
        out=values["out"],
        results_root=values["results_dir"],
        timeout_s=nccl_tests_timeout_s,
        say=lambda line: print(f"colbench: {line}", file=sys.stderr, flush=True),
    )
    if outcome.table is not None:
        print(outcome.table, flush=True)
    if outcome.error is not None:
        print(f"colbench: error: {outcome.error}", file=sys.stderr)
    else:
        print(f"colbench: cross-check in {outcome.directory}", file=sys.stderr)
    return outcome.exit_code
