"""Hangs for real: a gloo rank whose main thread blocks for ever (COLBENCH_FAULT ``hang``),
in a timed batch or as its communicator starts, spawned and under a launcher.

The blocked rank never raises and gloo's own timeout is later than colbench's, so only
the ranks' hang watchdogs can end the run: exit 4, one line naming the stuck rank, the
op and the size (or the start-up phase), every finished row kept.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from colbench.results.rows import load
from tests.conftest import REPO, finish_ranks, process_alive, run_colbench, start_ranks

SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1K-64K", "-n", "5", "-w", "1", "--no-table"]
TIMED = r"timed batch of all_reduce float32 size (\d+) B"
STUCK = r"rank\(s\) 1 \(busy outside communication at job\.py:\d+ in _fail\)"


def test_spawned_hang_in_a_timed_batch_is_exit_4_naming_the_rank(tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = run_colbench(
        *SWEEP, "--timeout", "4", "--out", str(out), env={"COLBENCH_FAULT": "1:3:hang"}
    )
    elapsed_s = time.monotonic() - started
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "timed out" in line]
    assert len(lines) == 1, proc.stderr
    match = re.fullmatch(
        rf"colbench: timed out after 4 s \(--timeout\) during {TIMED}: {STUCK} did not "
        "complete the collective",
        lines[0],
    )
    assert match is not None, lines[0]
    assert int(match.group(1)) == 4096  # 1K and 2K finished; the third batch hangs
    assert elapsed_s < 4 + 20  # torch's start-up on a busy 2-core machine is the rest
    assert len(load(out)) == 2
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["status"], meta["exit_code"], meta["failed_rank"]) == ("failed", 4, 1)
    assert (meta["failed_op"], meta["failed_size_bytes"]) == ("all_reduce", 4096)
    assert not any(process_alive(int(pid)) for pid in meta["rank_pids"])


def launch_by_hand(tmp_path: Path, fault: str, *args: str) -> list[tuple[int, str]]:
    """Two ranks started like torchrun's workers (env://, rank 0 hosts the store)."""

    def argv(rank: int) -> list[str]:
        return [*SWEEP, *args, *(["--out", str(tmp_path / "run")] if rank == 0 else [])]

    return finish_ranks(start_ranks(2, argv, lambda rank: {"COLBENCH_FAULT": fault}), 120)


#: What a start-up hang ended with: (run directory's parent, exit codes, stderrs, seconds).
Ended = tuple[Path, list[int], list[str], float]


def _start_up_hang(tmp_path: Path, launched: bool, stage: str) -> Ended:
    args = ("--init-timeout", "3", "--timeout", "120")
    fault = f"1:{stage}:hang"
    started = time.monotonic()
    if launched:
        results = launch_by_hand(tmp_path, fault, *args)
        codes, stderrs = [code for code, _ in results], [err for _, err in results]
    else:
        proc = run_colbench(
            *SWEEP, *args, "--out", str(tmp_path / "run"), env={"COLBENCH_FAULT": fault}
        )
        stderrs, codes = [proc.stderr], [proc.returncode]
    return tmp_path, codes, stderrs, time.monotonic() - started


@pytest.fixture(scope="module")
def start_up_hangs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Ended]:
    """Each stage's hang, spawned and launched. The runs spend their time waiting out
    --init-timeout, not computing: they run at once, each in its own directory with its
    own port, each timed from its own start."""
    cases = [(stage, launched) for stage in ("init", "side") for launched in (False, True)]
    dirs = {case: tmp_path_factory.mktemp(f"{case[0]}-{int(case[1])}") for case in cases}
    with ThreadPoolExecutor(len(cases)) as pool:
        futures = {
            (stage, launched): pool.submit(_start_up_hang, dirs[stage, launched], launched, stage)
            for stage, launched in cases
        }
        return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize("launched", [False, True], ids=["spawned", "launched"])
@pytest.mark.parametrize(
    ("stage", "phase"),
    [("init", "communicator start-up"), ("side", "side group start-up")],
    ids=["communicator", "side-group"],
)
def test_communicator_start_up_is_bounded_by_init_timeout(
    start_up_hangs: dict[tuple[str, bool], Ended], launched: bool, stage: str, phase: str
) -> None:
    """Rank 1 blocks as its communicator (or its gloo side group, right after) starts;
    rank 0 waits inside init_process_group (new_group). --timeout (120 s, which gloo's
    start-up obeys) is far away: --init-timeout ends it. The four cases start together, each
    importing torch in two or three processes: on a loaded 2-core machine that took 34-37 s
    (load 16), so the bound is half of --timeout, not --init-timeout plus a guess."""
    tmp_path, codes, stderrs, elapsed_s = start_up_hangs[stage, launched]
    assert codes == [4] * len(codes), stderrs
    assert elapsed_s < 120 / 2, elapsed_s
    for rank, stderr in enumerate(stderrs):
        lines = [line for line in stderr.splitlines() if "timed out" in line]
        assert len(lines) == 1 and "Traceback" not in stderr, stderr
        prefix = rf"colbench: error: rank {rank} on \S+ \(pid \d+\): " if launched else "colbench: "
        assert re.fullmatch(
            rf"{prefix}timed out after 3 s \(--init-timeout\) during {phase}: "
            rf"{STUCK} did not complete it",
            lines[0],
        ), lines[0]
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert (meta["status"], meta["exit_code"], meta["failed_rank"]) == ("failed", 4, 1)


def test_torchrun_hang_is_exit_4_and_every_rank_names_the_stuck_one(tmp_path: Path) -> None:
    """No colbench parent: each rank's watchdog must say it all by itself."""
    out, logs = tmp_path / "run", tmp_path / "logs"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "--log-dir", str(logs), "--redirects", "3", "-m", "colbench", *SWEEP,
        "--timeout", "4", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
           "COLBENCH_FAULT": "1:3:hang"}  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=180, env=env, cwd=REPO, check=False
    )
    assert proc.returncode != 0
    # torchrun's summary: workers end with colbench's timeout code. Both watchdogs fire
    # at about the same moment; torchrun stops a worker still running (SIGTERM) once the
    # other has exited, so the later one may be reported as killed.
    found = re.findall(r"rank\s*: (\d) \(local_rank: \d\)\s*exitcode\s*: (-?\d+)", proc.stderr)
    codes = {int(rank): int(code) for rank, code in found}
    assert set(codes) == {0, 1} and set(codes.values()) <= {4, -15}, proc.stderr[-3000:]
    assert 4 in codes.values(), proc.stderr[-3000:]
    by_rank: dict[int, str] = {}
    for path in logs.rglob("stderr.log"):  # <log-dir>/<run>/attempt_0/<rank>/stderr.log
        by_rank[int(path.parent.name)] = path.read_text()
    assert set(by_rank) == {0, 1}
    for rank, stderr in by_rank.items():
        if codes[rank] != 4:
            continue
        lines = [line for line in stderr.splitlines() if "timed out" in line]
        assert len(lines) == 1 and "Traceback" not in stderr, stderr
        match = re.fullmatch(
            rf"colbench: error: rank {rank} on \S+ \(pid \d+\): timed out after 4 s "
            rf"\(--timeout\) during {TIMED}: {STUCK} did not complete the collective",
            lines[0],
        )
        assert match is not None and int(match.group(1)) == 4096, lines[0]
    assert len(load(out)) == 2
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["status"], meta["failed_rank"], meta["failed_size_bytes"]) == ("failed", 1, 4096)
