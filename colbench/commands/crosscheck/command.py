"""``colbench crosscheck`` as a plain function: plan both sides, run them, print the table.

Each side is a child process; one that outruns its time is killed, one interrupted by
the terminal's Ctrl-C gets a grace period to stop its own ranks. What a side left on
disk stays there when it fails, and the error says where.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colbench import reading
from colbench.commands.crosscheck import plan as cross
from colbench.commands.crosscheck.report import write_report
from colbench.errors import ExitCode, UsageError
from colbench.results.rundir import RunDir

#: Names of the files and directories a crosscheck writes.
NCCL_TESTS_LOG = "nccl-tests.log"
NCCL_TESTS_RUN = "nccl-tests"
COLBENCH_RUN = "colbench"
COLBENCH_TABLE = "colbench.txt"
#: Seconds a child interrupted with the terminal's Ctrl-C gets to stop its own ranks.
_INTERRUPT_GRACE_S = 30.0
#: Seconds a timed-out process group gets after SIGTERM before SIGKILL.
_TERM_GRACE_S = 10.0


@dataclass
class Outcome:
    """What a cross-check left: its directory, its table (None when it stopped early)."""

    exit_code: int
    directory: Path
    table: str | None = None
    error: str | None = None


def run_child(
    argv: list[str],
    stdout: IO[Any],
    timeout_s: float | None,
    merge_stderr: bool,
    group: bool = False,
) -> int | None:
    """The child's exit status; None when it outran ``timeout_s`` (and was killed).

    ``group``: the child leads a process group of its own, and every signal goes to the
    whole group: mpiexec's ranks must not outlive a killed mpiexec on the GPU.
    """
    stderr = subprocess.STDOUT if merge_stderr else None
    child = subprocess.Popen(argv, stdout=stdout, stderr=stderr, start_new_session=group)

    def send(signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(child.pid, signum)
            else:
                child.send_signal(signum)

    try:
        return child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        if group:
            # mpiexec passes SIGTERM on to its ranks; what is left is killed.
            send(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=_TERM_GRACE_S)
        send(signal.SIGKILL)
        child.wait()
        return None
    except KeyboardInterrupt:
        # Ctrl-C reached the child too (or, in a group of its own, is passed on): let it
        # stop its own ranks before it is killed.
        try:
            send(signal.SIGINT)
            child.wait(timeout=_INTERRUPT_GRACE_S)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            send(signal.SIGKILL)
            child.wait()
        raise


def _tail(path: Path) -> str:
    lines = [line.strip() for line in reading.tail_text(path, 4096).splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    return f": {last[:200]}" if last else ""


def nccl_tests_side(
    plan: cross.Plan, directory: Path, timeout_s: float | None, say: Callable[[str], None]
) -> Outcome:
    """Run nccl-tests into nccl-tests.log and import it; a failure keeps the log."""
    from colbench.importers import nccl_tests

    log = directory / NCCL_TESTS_LOG
    argv = plan.nccl_tests_argv()
    say(f"running {' '.join(argv)} > {log}")
    with open(log, "wb") as stdout:
        status = run_child(argv, stdout, timeout_s, merge_stderr=True, group=True)

    def failed(code: ExitCode, error: str) -> Outcome:
        return Outcome(int(code), directory, error=error)

    if status is None:
        return failed(
            ExitCode.TIMEOUT,
            f"{plan.binary.name} did not finish within --nccl-tests-timeout {timeout_s:g} s "
            f"and was stopped; its output is in {log}",
        )
    if status != 0:
        return failed(
            ExitCode.RANK_FAILURE,
            f"{plan.binary.name} exited with status {status}; its output is in {log}{_tail(log)}",
        )
    try:
        _, imported = nccl_tests.import_log(
            log, out_dir=directory / NCCL_TESTS_RUN, op=plan.coll.name
        )
    except UsageError as exc:
        return failed(ExitCode.RANK_FAILURE, f"cannot read nccl-tests' output: {exc}")
    worlds = {t["world_size"] for t in imported.facts["tables"]}
    hosts = {h for t in imported.facts["tables"] for h in t["hosts"]}
    if plan.ranks_per_gpu > 1 and (worlds != {plan.ranks} or len(hosts) > 1):
        # Without MPI=1 (or under another MPI's launcher) each process is a world of its
        # own; a launcher that placed ranks on other nodes broke the one-node emulation.
        where = f" on {len(hosts)} hosts" if len(hosts) > 1 else ""
        return failed(
            ExitCode.RANK_FAILURE,
            f"nccl-tests ran world(s) of {', '.join(map(str, sorted(worlds)))} rank(s)"
            f"{where}, not one of {plan.ranks} on this node: under mpiexec it needs an MPI "
            "build (make MPI=1 MPI_HOME=...) started by that MPI's own mpiexec, on one node; "
            f"its output is in {log}",
        )
    for line in imported.notes:
        say(f"note: {line}")
    for line in imported.warnings:
        say(f"warning: {line}")
    return Outcome(int(ExitCode.OK), directory)


def failure_code(status: int | None) -> int:
    # A child killed by a signal has a negative status, which is no exit code of ours.
    return status if status is not None and status > 0 else int(ExitCode.RANK_FAILURE)


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
