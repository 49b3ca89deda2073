"""Start-up reliability: back-to-back 4-rank gloo starts, each under an external timeout.

Each start is `python -m colbench sweep --backend gloo --nprocs 4 --sizes 1K -n 1 -w 0`
as a user would type it, in its own session so a hung start is killed with all its ranks.
A start that outlives --timeout counts as hung (with --dump DIR, the stacks of its
processes are saved there first, through py-spy when it is installed); one that exits
non-zero counts as failed.

Target (issue #11): every start completes with exit 0 (200 of 200).

    python benchmarks/startup_hangs.py [--starts 200] [--timeout 30] [--dump DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["sweep", "--backend", "gloo", "--nprocs", "4", "--op", "all_reduce",
           "--sizes", "1K", "-n", "1", "-w", "0", "--no-table", "--no-progress"]  # fmt: skip


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _dump_stacks(pid: int, path: Path) -> None:
    """Where every process of a hung start is: kernel wait channel and Python stack."""
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    lines = []
    for proc in _tree(pid):
        try:
            wchan = Path(f"/proc/{proc}/wchan").read_text()
            threads = len(list(Path(f"/proc/{proc}/task").iterdir()))
        except OSError:
            continue
        lines.append(f"=== pid {proc} wchan {wchan} threads {threads}")
        if py_spy:
            dump = subprocess.run(
                [py_spy, "dump", "--native", "--pid", str(proc)],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            lines.append(dump.stdout + dump.stderr)
    path.write_text("\n".join(lines))


def one_start(out: Path, timeout_s: float, dump: Path | None, index: int) -> tuple[str, float]:
    """('ok' | 'hung' | 'failed', seconds) for one start."""
    started = time.monotonic()
    with open(out.with_suffix(".log"), "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "colbench", *COMMAND, "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )  # fmt: skip
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            if dump is not None:
                _dump_stacks(proc.pid, dump / f"hang-{index}.txt")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "hung", time.monotonic() - started
    return ("ok" if code == 0 else "failed"), time.monotonic() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per start")
    parser.add_argument("--dump", type=Path, help="save stacks of hung starts here")
    args = parser.parse_args()
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, list[float]] = {"ok": [], "hung": [], "failed": []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.starts):
            out = Path(tmp) / f"run{index}"
            outcome, took_s = one_start(out, args.timeout, args.dump, index)
            outcomes[outcome].append(took_s)
            if outcome != "ok":
                tail = out.with_suffix(".log").read_text().strip().splitlines()[-1:]
                print(f"start {index}: {outcome} after {took_s:.1f} s {' '.join(tail)}")
    ok = outcomes["ok"]
    print(
        f"{args.starts} starts of 4 gloo ranks: {len(ok)} completed, "
        f"{len(outcomes['hung'])} hung (> {args.timeout:g} s), {len(outcomes['failed'])} failed"
    )
    if ok:
        print(
            f"command -> exit 0, s: p50 {statistics.median(ok):.2f}  p90 {percentile(ok, 0.9):.2f}"
            f"  p99 {percentile(ok, 0.99):.2f}  max {max(ok):.2f}"
        )
    passed = len(ok) == args.starts
    print(f"every start completes with exit 0: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
