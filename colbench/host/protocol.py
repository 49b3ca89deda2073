"""The parent<->rank protocol: what ranks report, and the verdict read from it.

Every rank publishes its step in the rendezvous store (:class:`colbench.host.job.InFlight`),
so when a rank dies without a word (SIGKILL, the OOM killer) or hangs, whoever reads the
store still knows what it was doing; a rank that fails with an exception writes
``rankN.error.json``. :func:`diagnose` turns exit codes, reports and progress into one line
and an exit code; the hang watchdog reads the same reports when no parent watches.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.errors import ExitCode
from colbench.host.job import Failure, InFlight
from colbench.host.launchers.rendezvous import shown_ranks
from colbench.results.rundir import RunDir

#: Error kinds a rank reports (``kind`` in rankN.error.json).
KIND_USAGE = "usage"
KIND_TIMEOUT = "timeout"
KIND_ERROR = "error"
#: A file of the run could not be written: the run stops with exit 6, naming the file.
KIND_WRITE = "write"

#: What torch writes when its NCCL watchdog gives up on a hang (ProcessGroupNCCL.cpp:
#: ``WorkNCCL::checkTimeout`` "Watchdog caught collective operation timeout: WorkNCCL(...)
#: ran for N milliseconds before timing out.", and the heartbeat monitor's "Heartbeat
#: monitor timed out!" / "watchdog got stuck for N seconds"). It then aborts the process
#: (SIGABRT) before Python sees an exception, so the rank's log is the only witness.
TORCH_WATCHDOG_TEXTS = (
    "watchdog caught collective operation timeout",
    "milliseconds before timing out",
    "heartbeat monitor timed out",
    "watchdog got stuck for",
)
#: Exception texts of a timeout: gloo's "Timed out waiting ...", torch's NCCL watchdog as
#: an exception (blocking wait), and its non-blocking communicator start-up
#: ("NCCL timeout when waiting for nonblocking call to become successful").
TIMEOUT_TEXTS = (*TORCH_WATCHDOG_TEXTS, "timed out", "timeout when waiting for nonblocking")
#: Exception texts of a rank that lost a peer (gloo's pair.cc "Connection closed by peer",
#: a reset or broken socket, NCCL's remote error): the peer failed, not this rank.
PEER_LOST_TEXTS = (
    "closed by peer",
    "connection reset",
    "broken pipe",
    "remote process exited",
    "ncclremoteerror",
)
#: How much of a rank log's end is searched for torch's watchdog message.
LOG_TAIL_BYTES = 1 << 20


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify(exc: BaseException) -> str:
    """The kind of a rank's exception, for the parent's verdict."""
    from colbench.errors import UsageError, WriteFailed

    if isinstance(exc, UsageError):
        return KIND_USAGE
    if isinstance(exc, WriteFailed):
        return KIND_WRITE
    text = str(exc).lower()
    if any(t in text for t in TIMEOUT_TEXTS) or "timeout" in type(exc).__name__.lower():
        return KIND_TIMEOUT
    return KIND_ERROR


def make_report(
    rank: int, doing: str, kind: str, error: str, time_s: float, **extra: Any
) -> dict[str, Any]:
    """A rank's account of its failure, as ``rankN.error.json`` holds it."""
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "doing": doing,
        "kind": kind,
        "error": error[:500],
        "time": time_s,
        **extra,
    }


def write_report(run_dir: Path, report: Mapping[str, Any]) -> None:
    RunDir(run_dir).error_report(int(report["rank"])).write_text(json.dumps(report))


#: The store key of a rank's failure report (beside its file, which a full disk loses).
REPORT_KEY = "failure/{rank}"


def publish_report(store: Any, report: Mapping[str, Any]) -> None:
    """Put a rank's report in the parent's store, if the rank has one and it answers."""
    if store is None:
        return
    with contextlib.suppress(Exception):  # a store that is gone already: the file remains
        store.set(REPORT_KEY.format(rank=report["rank"]), json.dumps(report))


def store_reports(store: Any, world_size: int) -> list[dict[str, Any]]:
    """The reports ranks published in ``store`` (see :func:`publish_report`)."""
    found = []
    for rank in range(world_size):
        key = REPORT_KEY.format(rank=rank)
        with contextlib.suppress(Exception):
            if store.check([key]):
                report = json.loads(store.get(key).decode())
                if _well_formed(report):
                    found.append(report)
    return found


def torch_watchdog_line(log_text: str) -> str | None:
    """The line where torch's NCCL watchdog reported a hang, from its message on."""
    lines = log_text.splitlines()
    for pattern in TORCH_WATCHDOG_TEXTS:
        for line in lines:
            at = line.lower().find(pattern)
            if at >= 0:
                start = line.rfind("[Rank", 0, at)
                return line[start if start >= 0 else at :].strip()
    return None


def _where(step: InFlight | None) -> tuple[str, str | None, int | None]:
    if step is None:
        return "start-up", None, None
    return step.describe(), step.op or None, step.size_bytes


def _ended(
    rank: int,
    exit_codes: Mapping[int, int | None],
    progress: Mapping[int, InFlight],
    host: str,
    pids: Mapping[int, int],
) -> Failure:
    """The verdict on a rank killed by a signal, or one that exited with an error code
    and no report of its own."""
    code = exit_codes[rank]
    assert code is not None
    doing, op, size = _where(progress.get(rank))
    who = f"rank {rank} on {host} (pid {pids.get(rank, '?')})"
    if code >= 0:
        message = f"{who} exited with code {code} during {doing}"
        return Failure(message, int(ExitCode.RANK_FAILURE), rank, op, size, message)
    name = signal_name(-code)
    hint = (
        " (SIGKILL is what the kernel's out-of-memory killer sends: check memory limits and dmesg)"
        if -code == signal.SIGKILL
        else ""
    )
    message = f"{who} was killed by {name} during {doing}{hint}"
    return Failure(message, int(ExitCode.RANK_FAILURE), rank, op, size, f"killed by {name}")


def diagnose(
    exit_codes: Mapping[int, int | None],
    reports: Sequence[Mapping[str, Any]],
    progress: Mapping[int, InFlight],
    host: str,
    pids: Mapping[int, int],
    timeout_s: float,
) -> Failure:
    """One verdict from how every rank ended.

    ``exit_codes``: rank -> exit code (negative: killed by that signal; None: was still
    running and had to be killed). A rank killed by a signal is the culprit over ranks
    that merely lost their peer, unless its log shows torch's NCCL watchdog killed it
    over a hang (see :func:`read_reports`); a timeout names the stuck ranks (see
    :func:`diagnose_timeout`); otherwise the earliest exception wins.
    """
    # Refused input, then a file of the run that could not be written (the rank measured
    # well: the file is the culprit), each in the rank's own words.
    for kind, code in ((KIND_USAGE, ExitCode.USAGE), (KIND_WRITE, ExitCode.WRITE_FAILED)):
        first = next((r for r in reports if r.get("kind") == kind), None)
        if first is not None:
            return Failure(str(first["error"]), int(code), error=str(first["error"]))
    timed_out = {int(r["rank"]) for r in reports if r.get("kind") == KIND_TIMEOUT}
    lost = {int(r["rank"]) for r in reports if lost_a_peer(str(r.get("error", "")))}
    # A rank aborted after it lost a peer (its log says so) is a survivor, not a culprit.
    survivors = timed_out | lost
    killed = sorted(
        r for r, code in exit_codes.items() if code is not None and code < 0 and r not in survivors
    )
    if killed:
        return _ended(killed[0], exit_codes, progress, host, pids)
    reported = {int(r["rank"]) for r in reports}
    if timed_out:
        # A rank that left no report and did not finish is one the others waited for.
        silent = [r for r, code in exit_codes.items() if r not in reported and code != 0]
        return diagnose_timeout(reports, silent, progress, timeout_s)
    vanished = sorted(
        r for r, code in exit_codes.items() if code not in (0, None) and r not in reported
    )
    if vanished and lost == reported:
        # A rank that exited without a word while the others only lost it is the culprit.
        return _ended(vanished[0], exit_codes, progress, host, pids)
    if reports:
        first = min(reports, key=lambda r: float(r["time"]))
        rank = int(first["rank"])
        doing, op, size = _where(progress.get(rank))
        message = (
            f"rank {rank} on {first['host']} (pid {first['pid']}) failed during "
            f"{first.get('doing') or doing}: {first['error']}"
        )
        return Failure(message, int(ExitCode.RANK_FAILURE), rank, op, size, str(first["error"]))
    bad = sorted(r for r, code in exit_codes.items() if code not in (0, None))
    if bad:
        return _ended(bad[0], exit_codes, progress, host, pids)
    return Failure("ranks stopped for an unknown reason", int(ExitCode.RANK_FAILURE))


def lost_a_peer(error: str) -> bool:
    """Whether an error's text says a peer went away (not that this rank failed)."""
    text = error.lower()
    return any(t in text for t in PEER_LOST_TEXTS)


def diagnose_timeout(
    reports: Sequence[Mapping[str, Any]],
    silent: Sequence[int],
    progress: Mapping[int, InFlight],
    timeout_s: float,
) -> Failure:
    """The verdict on a hang: which ranks the others waited for, in which collective.

    ``reports``: every report of the ranks, at least one of kind timeout; ``silent``:
    ranks that left none and did not finish (stopped, wedged, or never started). The
    stuck ranks are the silent ones and those whose watchdog found them busy outside
    communication (``waiting`` false: see :mod:`colbench.host.watchdog`); a rank that timed
    out waiting on its peers, or failed because a peer left, is not one of them.
    """
    timeouts = sorted(
        (r for r in reports if r.get("kind") == KIND_TIMEOUT), key=lambda r: int(r["rank"])
    )
    busy = {int(r["rank"]): r for r in timeouts if r.get("waiting") is False}
    waiting = [r for r in timeouts if int(r["rank"]) not in busy]
    anchor = (waiting or timeouts)[0]
    doing, op, size = _where(progress.get(int(anchor["rank"])))
    doing = str(anchor.get("doing") or doing)
    front = max((step.seq for step in progress.values()), default=0)
    stuck = sorted({*silent, *busy})
    details = []
    for rank in stuck:
        step = progress.get(rank)
        if step is None:
            details.append(f"{rank} (never started)")
        elif step.seq < front:
            details.append(f"{rank} (never reached it; last seen in {step.describe()})")
        elif rank in busy:
            at = busy[rank].get("stuck_at")
            details.append(f"{rank} (busy outside communication{f' at {at}' if at else ''})")
        else:
            details.append(f"{rank} (stuck inside it)")
    if stuck:
        who = f"rank(s) {', '.join(details)} did not complete {'the collective' if op else 'it'}"
    else:
        who = "every rank timed out: a peer or the network is unreachable"
    after = float(anchor.get("timeout_s") or timeout_s)
    flag = f" ({anchor['deadline']})" if anchor.get("deadline") else ""
    message = f"timed out after {after:g} s{flag} during {doing}: {who}"
    return Failure(message, int(ExitCode.TIMEOUT), stuck[0] if stuck else None, op, size, message)


def startup_failure(
    missing: Sequence[int],
    world_size: int,
    pids: Mapping[int, int],
    init_timeout_s: float,
    elapsed_s: float,
) -> Failure:
    """The verdict when ranks never checked in at the rendezvous: start-up, not a collective."""
    named = [f"{rank} (pid {pids.get(rank, '?')})" for rank in missing]
    message = (
        f"start-up failed on {socket.gethostname()}: rank(s) {shown_ranks(named)} never "
        f"joined the rendezvous within --init-timeout {init_timeout_s:g} s "
        f"({world_size - len(missing)} of {world_size} ranks joined; stopped after "
        f"{elapsed_s:.1f} s, before any collective)"
    )
    return Failure(message, int(ExitCode.TIMEOUT), missing[0], None, None, message)


def _well_formed(report: Any) -> bool:
    """A report as :func:`make_report` writes it: what the verdict reads has its type."""
    return (
        isinstance(report, dict)
        and type(report.get("rank")) is int
        and isinstance(report.get("time"), int | float)
        and isinstance(report.get("error"), str)
    )


def read_reports(
    run_dir: Path, published: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Every rank's error report (its file, else what it ``published`` in the store),
    plus one of kind timeout for each rank that left none but whose log holds torch's
    NCCL watchdog message (it aborts the process first)."""
    reports = []
    files = RunDir(run_dir)
    for path in files.error_reports():
        try:
            report = json.loads(reading.read_text(path, reading.REPORT))
        except (ValueError, RecursionError):  # cut short by the rank's death; UsageError too
            continue
        if _well_formed(report):
            reports.append(report)
    filed = {int(r["rank"]) for r in reports}
    reports += [dict(r) for r in published if int(r["rank"]) not in filed]
    reported = {int(r["rank"]) for r in reports}
    for rank, log in files.rank_logs().items():
        if rank in reported:
            continue
        tail = reading.tail_text(log, LOG_TAIL_BYTES)
        line = torch_watchdog_line(tail)
        # torch aborts an NCCL rank whose peer died (ncclRemoteError) before Python
        # reports anything: its log says it lost a peer, and it is no culprit.
        lost = (x.strip() for x in tail.splitlines() if lost_a_peer(x))
        error = line if line is not None else next(lost, None)
        if error is not None:
            reports.append(
                {
                    "rank": rank,
                    "host": socket.gethostname(),
                    "pid": "?",
                    "kind": KIND_TIMEOUT if line is not None else KIND_ERROR,
                    "error": error[:500],
                    "time": log.stat().st_mtime,
                    "waiting": True,
                    "source": log.name,
                }
            )
    return reports


def read_progress(store: Any, world_size: int) -> dict[int, InFlight]:
    progress: dict[int, InFlight] = {}
    for rank in range(world_size):
        key = f"progress/{rank}"
        try:
            if store.check([key]):
                progress[rank] = InFlight.decode(store.get(key).decode())
        except (RuntimeError, ValueError):
            continue
    return progress
