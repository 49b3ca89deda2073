"""Long runs say how long they take, and how far they are (issue 33), on real gloo ranks.

Every command that starts ranks states its time once it knows it, and where stderr is no
terminal a plain progress line comes at least every COLBENCH_PROGRESS_EVERY_S (30 s by
default; shortened here so that seconds-long runs show several): from the parent on a
timer when colbench spawned the ranks, from rank 0 under a launcher. --no-progress
silences them; a closed stderr, or a reader gone, never stops a run. p2p keeps to
--max-time. Timing assertions leave room for a busy shared 2-core machine.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.p2p import load
from tests.conftest import REPO, call_colbench, finish_ranks, start_ranks

PROGRESS = "colbench: progress: "
STATED = "colbench: this run takes about "
EVERY_S = 0.3
#: The parent polls every 0.1 s; a busy machine may hold it back a little more.
SLACK_S = 3.0
#: Python, torch and the ranks' start-up before the first line can come.
STARTUP_S = 30.0
#: Two spawned ranks, 2 x 5 steps of 25 messages of 16 MiB: 1-2 s of measuring on an
#: idle machine (several lines at EVERY_S), 5 s on a busy one.
P2P = ["p2p", "--nprocs", "2", "--backend", "gloo", "--size", "16M", "--no-plot"]


def _env(**more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "COLBENCH_PROGRESS_EVERY_S": str(EVERY_S),
            **more}  # fmt: skip


def _timed(argv: list[str], timeout_s: float = 180) -> tuple[int, str, list[tuple[float, str]]]:
    """``colbench ARGV`` with stderr a pipe (no terminal): exit code, stdout, and each
    stderr line with the seconds since the start it arrived at."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "colbench", *argv], cwd=REPO, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    begun = time.monotonic()
    lines: list[tuple[float, str]] = []
    out: list[str] = []
    assert proc.stderr is not None and proc.stdout is not None
    errs, outs = proc.stderr, proc.stdout

    def read_err() -> None:
        for line in errs:
            lines.append((time.monotonic() - begun, line.rstrip("\n")))

    readers = [
        threading.Thread(target=read_err),
        threading.Thread(target=lambda: out.append(outs.read())),
    ]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join()
    return code, "".join(out), lines


def _progress(lines: list[tuple[float, str]]) -> list[tuple[float, str]]:
    return [(t, line) for t, line in lines if line.startswith(PROGRESS)]


def _called(argv: list[str]) -> tuple[int, list[str]]:
    """``colbench ARGV`` in this process (no interpreter start, no torch import), stderr a
    file (no terminal): the exit code and stderr's lines. For what the lines say, not
    when they come (:func:`_timed` times them)."""
    env = {"PYTHONUNBUFFERED": "1", "COLBENCH_PROGRESS_EVERY_S": str(EVERY_S)}
    proc = call_colbench(*argv, timeout=180, env=env)
    return proc.returncode, proc.stderr.splitlines()


def test_a_spawned_run_states_its_time_and_the_parent_keeps_the_cadence(tmp_path: Path) -> None:
    code, _, lines = _timed([*P2P, "--out", str(tmp_path / "run")])
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    stated = [t for t, line in lines if line.startswith(STATED)]
    progress = _progress(lines)
    assert len(stated) == 1 and len(progress) >= 2, text
    # At the cadence asked between lines; the first once the host exists (Python and
    # torch are imported first: seconds on a busy machine, and no line can come sooner).
    times = [t for t, _ in progress]
    assert times[0] <= STARTUP_S and max(b - a for a, b in itertools.pairwise(times)) <= (
        EVERY_S + SLACK_S
    ), text
    assert any(" steps, " in line and " left (pass " in line for _, line in progress), text
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert set(meta["timing"]) == {"stated_s", "stated_after_s", "taken_s", "overran"}
    assert 0 < meta["timing"]["stated_after_s"] < meta["timing"]["taken_s"]


def test_no_progress_silences_the_lines(tmp_path: Path) -> None:
    code, lines = _called([*P2P, "--size", "1M", "--no-progress", "--out", str(tmp_path / "r")])
    assert code == 0, lines
    assert not any(line.startswith(PROGRESS) for line in lines), lines
    assert len(load(tmp_path / "r")) == 10


def test_a_sweep_without_a_terminal_gets_lines_in_rows(tmp_path: Path) -> None:
    argv = ["sweep", "--op", "all_reduce", "--sizes", "1K-16M", "-n", "20", "--nprocs", "2",
            "--backend", "gloo", "--no-table", "--out", str(tmp_path / "run")]  # fmt: skip
    code, lines = _called(argv)
    assert code == 0, lines
    assert any(line.startswith(PROGRESS) and " rows, " in line for line in lines), lines


def test_health_keeps_its_own_time_and_gets_the_lines(tmp_path: Path) -> None:
    argv = ["health", "--nprocs", "2", "--backend", "gloo", "--no-plot",
            "--out", str(tmp_path / "run")]  # fmt: skip
    code, lines = _called(argv)
    assert code == 0, lines
    said = [line for line in lines if line.startswith("colbench: health --level quick: about")]
    assert len(said) == 1 and not any(line.startswith(STATED) for line in lines), lines
    assert any(line.startswith(PROGRESS) and " steps, " in line for line in lines), lines
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["timing"]["stated_s"] >= meta["estimate_s"]


def test_a_launched_rank_0_keeps_the_cadence_and_the_others_stay_quiet(tmp_path: Path) -> None:
    out = str(tmp_path / "run")
    procs = start_ranks(
        2,
        lambda rank: ["p2p", "--backend", "gloo", "--size", "8M", "--no-plot", "--out", out],
        lambda rank: {"COLBENCH_PROGRESS_EVERY_S": str(EVERY_S)},
    )
    (code0, err0), (code1, err1) = finish_ranks(procs, timeout_s=180)
    assert (code0, code1) == (0, 0), err0 + err1
    assert err0.count(PROGRESS) >= 2 and err0.count(STATED) == 1, err0
    assert PROGRESS not in err1 and STATED not in err1, err1
    assert "timing" in json.loads((tmp_path / "run" / "meta.json").read_text())


def _run_with(stderr: Any, out: Path, preexec: Callable[[], None] | None = None) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "colbench", *P2P, "--size", "1M", "--out", str(out)],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=stderr, text=True,
        preexec_fn=preexec,
    )  # fmt: skip
    if proc.stderr is not None:
        proc.stderr.close()  # the reader goes at once: every line meets a broken pipe
    stdout, _ = proc.communicate(timeout=180)
    return proc.returncode, stdout


def test_a_closed_stderr_never_stops_a_run(tmp_path: Path) -> None:
    code, stdout = _run_with(None, tmp_path / "run", preexec=lambda: os.close(2))
    assert code == 0 and stdout.splitlines()[-1].startswith("verdict:")
    assert len(load(tmp_path / "run")) == 10


def test_a_reader_gone_never_stops_a_run(tmp_path: Path) -> None:
    code, stdout = _run_with(subprocess.PIPE, tmp_path / "run")
    assert code == 0 and stdout.splitlines()[-1].startswith("verdict:")
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["rows"] == 10


def test_p2p_cuts_its_plan_to_keep_to_max_time(tmp_path: Path) -> None:
    # Short: four ranks measure for all of it, on two cores. Long enough for the probe,
    # a pass and the report (REPORT_S) on a busy machine.
    max_time_s = 8.0
    begun = time.monotonic()
    argv = ["p2p", "--nprocs", "4", "--backend", "gloo", "--max-time", f"{max_time_s:g}",
            "--no-plot", "--out", str(tmp_path / "run")]  # fmt: skip
    code, stdout, lines = _timed(argv)
    took_s = time.monotonic() - begun
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    plan = json.loads((tmp_path / "run" / "meta.json").read_text())["plan"]
    # The defaults (5 passes x 25 messages of 64 MiB per ordered pair of 4 ranks) take
    # minutes here: the probe says so, and the plan is cut.
    assert plan["asked"] == {"size_bytes": 64 * 1024**2, "warmup": 5, "iters": 20, "repeat": 5}
    assert plan["asked_s"] > max_time_s and plan["cut"], plan
    assert plan["planned_s"] < max_time_s
    frame = load(tmp_path / "run")
    ran = plan["ran"]
    assert len(frame) == 12 * ran["repeat"]
    assert set(frame["size_bytes"]) == {ran["size_bytes"]} and set(frame["iters"]) == {ran["iters"]}
    assert any(line.startswith("colbench: p2p: a ") and f"past --max-time {max_time_s:g} s"
               in line for _, line in lines), text  # fmt: skip
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("verdict: measured ")
    assert f"to keep to --max-time {max_time_s:g} s" in last, last
    # Within the cap, with the time a busy machine's interpreter start and exit take.
    assert took_s <= max_time_s + 5, text


def test_a_sweep_on_a_terminal_keeps_its_bar_and_no_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.dist.test_progress_terminal import _run_in_terminal

    monkeypatch.setenv("COLBENCH_PROGRESS_EVERY_S", "0.2")
    raw = _run_in_terminal(
        ["sweep", "--op", "all_reduce", "--sizes", "1K-16M", "-n", "20", "--nprocs", "2",
         "--backend", "gloo", "--out", str(tmp_path / "run")],
        columns=160,
    )  # fmt: skip
    assert "━" in raw, "the bar never showed: the test would prove nothing"
    assert PROGRESS not in raw
