"""``colbench crosscheck`` as a plain function: plan both sides, run them, print the table."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from colbench.commands.crosscheck import plan as cross
from colbench.commands.crosscheck.report import write_report
from colbench.commands.crosscheck.sides import (
    COLBENCH_RUN,
    COLBENCH_TABLE,
    NCCL_TESTS_RUN,
    Outcome,
    failure_code,
    nccl_tests_side,
    run_child,
)
from colbench.errors import ExitCode, UsageError
from colbench.results.rundir import RunDir


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
    outcome = run_both(
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


def run_both(
    plan: cross.Plan,
    *,
    out: str | None = None,
    results_root: str = "results",
    timeout_s: float | None = None,
    say: Callable[[str], None] = print,
) -> Outcome:
    """nccl-tests, then colbench, then the join; each side's files stay in the directory."""
    directory = cross.out_dir(plan, out, results_root)
    first = nccl_tests_side(plan, directory, timeout_s, say)
    if first.error is not None:
        return first
    run_dir = directory / COLBENCH_RUN
    argv = plan.colbench_argv(run_dir)
    table = directory / COLBENCH_TABLE
    say(f"running colbench {' '.join(argv[3:])} > {table}")
    with open(table, "wb") as stdout:
        # Its notes and progress bar stay on the terminal; its table goes to the file.
        status = run_child(argv, stdout, None, merge_stderr=False)
    failed = status not in (ExitCode.OK, ExitCode.DATA_ERROR)
    error = (
        f"colbench sweep exited with status {status} (its message is above); nccl-tests' "
        f"run is kept in {directory / NCCL_TESTS_RUN}"
    )
    if not RunDir(run_dir).has_table():
        return Outcome(failure_code(status), directory, error=error)
    # A sweep that failed midway keeps what it measured: join that much.
    text, wrong = write_report(plan, directory, NCCL_TESTS_RUN, COLBENCH_RUN)
    if failed:
        return Outcome(failure_code(status), directory, text, error)
    code = ExitCode.DATA_ERROR if wrong or status == ExitCode.DATA_ERROR else ExitCode.OK
    return Outcome(int(code), directory, text)
