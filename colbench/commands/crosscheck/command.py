"""``colbench crosscheck`` as a plain function: plan both sides, run them, print the table.

Each side is a child process; one that outruns its time is killed, one interrupted by
the terminal's Ctrl-C gets a grace period to stop its own ranks. What a side left on
disk stays there when it fails, and the error says where. The report joins the two runs
(A = nccl-tests, B = colbench) on time, the one metric that means something at every world
size (busbw is 0 at one rank), busbw beside it; nccl-tests' rows of a placement colbench
did not measure are left out, with one line saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colbench import reading, text
from colbench.commands.compare import comparison as compare
from colbench.commands.compare import pairs
from colbench.commands.crosscheck import plan as cross
from colbench.commands.crosscheck.plan import MULTI_NODE, Plan
from colbench.config.sizes import format_size
from colbench.errors import ExitCode, UsageError
from colbench.results import tables
from colbench.results.rundir import RunDir
from colbench.results.series import PLACEMENT_NAMES, Run
from colbench.text import Column

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
    """The child's exit status; None when it outran ``timeout_s`` (and was killed). ``group``: the
    child leads a process group of its own, and every signal goes to the whole group: mpiexec's
    ranks must not outlive a killed mpiexec on the GPU."""
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


#: What a cross-check writes beside the two runs.
JOINED_CSV = "crosscheck.csv"
_COLUMNS = (
    Column("placement", 14, "<", ""), Column("size", 8, gap=""),
    Column("nccl-tests us", 15, gap=""), Column("colbench us", 13, gap=""),
    Column("ratio", 8, gap=""), Column("nccl-tests busbw", 18, gap=""),
    Column("colbench busbw", 16, gap=""), Column("note", gap="  "),
)  # fmt: skip
JOINED_TEXT = "crosscheck.txt"
FIGURE = "crosscheck.png"
#: The joined table's columns, in the CSV's order.
CSV_COLUMNS = (
    "op",
    "dtype",
    "redop",
    "in_place",
    "size_bytes",
    "world_size",
    "nccl_tests_time_us",
    "colbench_time_us",
    "time_ratio",
    "nccl_tests_busbw_gbps",
    "colbench_busbw_gbps",
    "comparable",
    "note",
)


def join(plan: Plan, nccl_tests_dir: Path, colbench_dir: Path) -> tuple[pairs.Comparison, Any]:
    """The time comparison (for the summary and figure) and the joined table."""
    # colbench on gloo tests the cross-check itself against a real log, which may be of
    # ranks sharing a GPU (an emulated fabric): its times are not compared as a fabric's.
    # An emulated cross-check ran both sides in one emulation, which older nccl-tests
    # (bus number alone in its device table) cannot show in its log.
    across = plan.cfg.launch.backend != "nccl"
    emulated = across or plan.ranks_per_gpu > 1
    by_time = pairs.compare_runs(
        nccl_tests_dir, colbench_dir, "time", across_backends=across, allow_emulated=emulated
    )
    by_busbw = pairs.compare_runs(
        nccl_tests_dir, colbench_dir, "busbw", across_backends=across, allow_emulated=emulated
    )
    kept = [int(p == "in") for p in plan.cfg.placements_for(plan.coll)]

    def placed(frame: Any) -> Any:
        return frame[frame["in_place"].isin(kept)]

    keys = list(by_time.keys)
    busbw = by_busbw.table[[*keys, "value_a", "value_b"]].rename(
        columns={"value_a": "nccl_tests_busbw_gbps", "value_b": "colbench_busbw_gbps"}
    )
    renamed = {"value_a": "nccl_tests_time_us", "value_b": "colbench_time_us"}
    renamed |= {"ratio": "time_ratio", "reason": "note"}
    # A merge on columns numbers its rows afresh: no index left over from placed().
    table = placed(by_time.table).merge(busbw, on=keys, how="left").rename(columns=renamed)
    a, b = by_time.a, by_time.b
    comparison = dataclasses.replace(
        by_time,
        a=Run(a.label, a.path, placed(a.frame)),
        b=Run(b.label, b.path, placed(b.frame)),
        table=placed(by_time.table),
    )
    return comparison, table


def format_text(plan: Plan, comparison: pairs.Comparison, table: Any, run_dir: Path) -> str:
    """The side-by-side table with what was run, what was left out and the summary."""
    cfg, coll = plan.cfg, plan.coll
    redop = f" {cfg.measure.redops[0]}" if coll.uses_redop else ""
    out = [f"# crosscheck {coll.name} {cfg.measure.dtypes[0]}{redop} at {plan.ranks} rank(s)"]
    out += [f"# {line}" for line in comparison.context]
    out.append(f"# nccl-tests: {' '.join(plan.nccl_tests_argv())}")
    out.append(f"# colbench:   colbench {' '.join(plan.colbench_argv(run_dir)[3:])}")
    if cfg.launch.backend != "nccl":
        out.append(
            f"# colbench ran on {cfg.launch.backend}, nccl-tests on NCCL: the ratios test the "
            "cross-check, they say nothing about NCCL"
        )
    measured = cfg.placements_for(coll)
    left_out = [PLACEMENT_NAMES[int(p == "in")] for p in ("out", "in") if p not in measured]
    if left_out:
        out.append(
            f"# nccl-tests' {left_out[0]} rows are left out: colbench measured no {left_out[0]} "
            f"{coll.name} (see colbench explain {coll.name})"
        )
    out.append(
        "# time in us, busbw in GB/s; ratio = colbench time / nccl-tests time "
        "(above 1: colbench is slower); x = not comparable"
    )
    out.append(text.header(_COLUMNS))
    for row in table.itertuples(index=False):
        ratio = f"{row.time_ratio:.3f}" if row.comparable else "x"
        cells = (
            PLACEMENT_NAMES[int(row.in_place)], format_size(int(row.size_bytes)),
            text.number(row.nccl_tests_time_us), text.number(row.colbench_time_us), ratio,
            text.number(row.nccl_tests_busbw_gbps), text.number(row.colbench_busbw_gbps), row.note,
        )  # fmt: skip
        out.append(text.line(cells, _COLUMNS))
    out += [f"# {line}" for line in compare.summary(comparison)]
    if plan.ranks_per_gpu > 1:
        out.append(
            f"# both sides ran one emulated world: {plan.ranks} ranks, {plan.ranks_per_gpu} per "
            "GPU, each an NCCL node of its own (nccl-tests under mpiexec); an emulated world's "
            "time per call is a whole number of the GPU's time slices, which two worlds can "
            "differ by (docs/gpu.md)"
        )
    else:
        out.append(
            f"# nccl-tests ran as one process driving {plan.ranks} GPU(s) (-g); {MULTI_NODE}"
        )
    return "\n".join(out)


def write_report(
    plan: Plan, directory: Path, nccl_tests_name: str, colbench_name: str
) -> tuple[str, bool]:
    """Write crosscheck.csv, crosscheck.txt and crosscheck.png; the text and whether either
    tool reported wrong elements."""
    from colbench.results.reporters.figures import save

    run_dir = directory / colbench_name
    comparison, table = join(plan, directory / nccl_tests_name, run_dir)
    table[list(CSV_COLUMNS)].to_csv(directory / JOINED_CSV, index=False)
    text = format_text(plan, comparison, table, run_dir)
    try:
        save(compare.figure(comparison), directory / FIGURE)
    except UsageError as exc:
        text += f"\n# no figure: {exc}"
    tables.write_text(directory / JOINED_TEXT, text + "\n")
    wrong = bool(table["wrong_a"].fillna(0).any() or table["wrong_b"].fillna(0).any())
    return text, wrong


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
