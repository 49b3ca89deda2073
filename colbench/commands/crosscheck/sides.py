"""Running a cross-check's sides: nccl-tests into its log (then imported), and colbench.

Each side is a child process; one that outruns its time is killed, one interrupted by
the terminal's Ctrl-C gets a grace period to stop its own ranks. What a side left on
disk stays there when it fails, and the error says where.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colbench import reading
from colbench.commands.crosscheck.plan import Plan
from colbench.errors import ExitCode, UsageError

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
    plan: Plan, directory: Path, timeout_s: float | None, say: Callable[[str], None]
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
