"""How a run ends, in meta.json and on the terminal: rows kept, done, failed; and what a
world leaves behind that must go (empty rank logs, the job file of --python ranks)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from colbench.errors import ExitCode, WriteFailed
from colbench.host.launchers.gpus import FABRIC_EMULATED
from colbench.output import plural
from colbench.results.rows import SCHEMA_VERSION
from colbench.results.rundir import RunDir

#: The job file, in the world's run directory while its ranks run.
JOB_FILE = ".rank-job.pickle"


def record_nccl_log(run_dir: Path) -> None:
    """meta.json's ``nccl``: what NCCL's own start-up logs (nccl-rank*.log) say about the
    run (version, ranks, nodes, channels, each transport, the network, verdicts). The
    logs stay beside it; nothing is recorded where there are none (gloo, a user's own
    NCCL_DEBUG). Then meta.json's ``verdicts``, every one the run's evidence gives
    (NCCL's log, the hardware, the ceiling: docs/explain.md), each also printed."""
    from colbench.hardware.node import run_verdicts
    from colbench.nccl.log import parse_log, summary

    files = RunDir(run_dir)
    try:
        meta = files.read_meta()
    except (OSError, ValueError):  # no meta.json to add to (a failed start): logs stay
        return
    logs = files.nccl_logs()
    found = None
    if logs:
        text = "".join(path.read_text(encoding="utf-8", errors="replace") for path in logs)
        # The sweep writes ``fabric``; every task's config has ranks_per_gpu (p2p, health).
        per_gpu = (meta.get("config") or {}).get("ranks_per_gpu") or 1
        emulated = (meta.get("fabric") or {}).get("kind") == FABRIC_EMULATED or per_gpu > 1
        found = summary(parse_log(text), emulated_nodes=emulated)
        found.pop("algorithms", None)  # start-up logs have no TUNING lines
        meta["nccl"] = {"logs": [p.name for p in logs], **found}
    verdicts = run_verdicts(meta)
    for line in verdicts:
        print(f"colbench: verdict: {line}", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        files.update_meta(verdicts=verdicts, **({"nccl": meta["nccl"]} if found else {}))


def report_done(run_dir: Path) -> int:
    files = RunDir(run_dir)
    meta = files.read_meta()
    wrong = int(meta.get("wrong_total") or 0)
    rows = meta.get("rows", 0)
    print(f"colbench: {plural(int(rows), 'row')} in {files.table_path()}", file=sys.stderr)
    if wrong:
        print(f"colbench: {wrong} wrong element(s): results are not trustworthy", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    if meta.get("rows_oom"):
        print(
            f"colbench: {meta['rows_oom']} row(s) could not allocate their buffers (status oom)",
            file=sys.stderr,
        )
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.OK)


def end_meta(run_dir: Path, status: str, fields: dict[str, Any]) -> None:
    """meta.json of a run that did not complete: its status, why, and the rows it kept
    (a reader of results.csv checks the file against that count). The run ends with its own
    exit code (a signal, a failed rank): a write that fails now (a full disk) is said in
    one line, and the exit code stays the run's, so a SIGTERM still reads as 143 to its job."""
    files = RunDir(run_dir)
    try:
        meta = files.read_meta()
    except (OSError, ValueError):  # missing or broken: start afresh
        meta = {"run_id": files.name, "schema_version": SCHEMA_VERSION}
    if files.has_table():
        # An interleaved variant's world keeps its rows in the run's one results.csv.
        kept, planned = files.rows_kept(), meta.get("rows_planned")
        meta.update(rows=kept, rows_complete=_complete(kept, planned))
    meta.update(status=status, **fields)
    try:
        files.write_meta(meta)
    except WriteFailed as exc:
        print(f"colbench: {exc}: the run's end is not recorded in meta.json", file=sys.stderr)


def _complete(kept: int, planned: object) -> bool:
    return isinstance(planned, int) and kept >= planned > 0


def kept_line(run_dir: Path) -> str:
    """What a failed or interrupted run kept, for its last words: every planned row (the
    failure came after the last), or how many were measured before it."""
    files = RunDir(run_dir)
    kept = files.rows_kept()
    try:
        planned = files.read_meta().get("rows_planned")
    except (OSError, ValueError):
        planned = None
    if _complete(kept, planned):
        return (
            f"every row was measured before the failure: all {kept} are in "
            f"{files.table_path()}, which is complete"
        )
    of = f" (of {planned} planned)" if isinstance(planned, int) else ""
    verb = "is" if kept == 1 else "are"
    return f"{plural(kept, 'row')} measured before the failure{of} {verb} in {run_dir}"


def forget_job(run_dir: Path) -> None:
    """Remove the job file once the world's ranks are done with it."""
    (run_dir / JOB_FILE).unlink(missing_ok=True)
