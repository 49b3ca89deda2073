"""False-alarm and catch rates of the paired gate on this machine (issue 13's in-run A/B goal).

Each trial is one interleaved run, ``colbench sweep --python A=...,B=...``, judged by
``colbench gate RUN --variant-a python=A --variant-b python=B --check busbw_gbps:-10%``.

- A against A: both variants run this colbench's interpreter, nothing differs.
- A against a slow B: B's interpreter is a wrapper that moves the rank into a cgroup
  (v1 ``cpu`` or v2) with a CPU quota before exec'ing the same Python, so B's ranks
  really run on less CPU: a real slowdown, not an edited number. The slowdown realized
  is B's median busbw change over every pair of the slow trials, printed below.

Goals: A vs A fails at most 1 of 20 trials; A vs B (25% slower) fails at least 19 of 20.
Needs root (the cgroup). Run: ``.venv/bin/python benchmarks/ab_power.py --trials 20``
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(Path(sys.executable))
CHECK = "busbw_gbps:-10%"
SWEEP = [
    "--op", "all_reduce", "--sizes", "1M-8M", "--repeat", "10", "--iters", "10",
    "--warmup", "2", "--backend", "gloo", "--nprocs", "2", "--no-table",
]  # fmt: skip


def make_cgroup(name: str, cpus: float, period_us: int = 10_000) -> tuple[Path, Path]:
    """A cgroup capping its members to ``cpus`` CPUs; returns (its procs file, its dir)."""
    v1 = Path("/sys/fs/cgroup/cpu")
    if v1.is_dir():
        group = v1 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(int(cpus * period_us)))
    else:
        group = Path("/sys/fs/cgroup") / name
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{int(cpus * period_us)} {period_us}")
    return group / "cgroup.procs", group


def slow_python(procs: Path, where: Path) -> str:
    """An interpreter path that joins the cgroup, then runs this Python."""
    wrapper = where / "python-slow"
    wrapper.write_text(f'#!/bin/sh\necho $$ > {procs}\nexec {PYTHON} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def trial(b_python: str, out: Path) -> tuple[bool, float, float]:
    """One interleaved run and its paired gate: (gate failed, B's median change, seconds)."""
    started = time.monotonic()
    run = [PYTHON, "-m", "colbench", "sweep", *SWEEP, "--out", str(out)]
    run += ["--python", f"A={PYTHON},B={b_python}"]
    swept = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=False)
    if swept.returncode != 0:
        raise SystemExit(f"sweep failed ({swept.returncode}): {swept.stderr.strip()[-500:]}")
    gate = [PYTHON, "-m", "colbench", "gate", str(out), "--check", CHECK]
    gate += ["--variant-a", "python=A", "--variant-b", "python=B"]
    judged = subprocess.run(gate, cwd=ROOT, capture_output=True, text=True, check=False)
    if judged.returncode not in (0, 1):
        raise SystemExit(f"gate failed ({judged.returncode}): {judged.stderr.strip()}")
    match = re.search(r"median change ([+-]?\d+(?:\.\d+)?)%", judged.stdout)
    change = float(match.group(1)) / 100 if match else float("nan")
    return judged.returncode == 1, change, time.monotonic() - started


def series(label: str, b_python: str, trials: int, work: Path) -> tuple[int, list[float]]:
    fails, changes = 0, []
    for i in range(trials):
        failed, change, seconds = trial(b_python, work / f"{label}-{i}")
        fails += failed
        changes.append(change)
        print(
            f"  {label} trial {i + 1:2}/{trials}: B {change:+6.1%}  "
            f"{'FAIL' if failed else 'pass'}  ({seconds:.0f} s)",
            flush=True,
        )
    return fails, changes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--cpus", type=float, default=1.0, help="B's CPU quota (CPUs)")
    args = parser.parse_args()
    name = f"colbench-ab-{os.getpid()}"
    procs, group = make_cgroup(name, args.cpus)
    try:
        with tempfile.TemporaryDirectory(prefix="ab-power-") as tmp:
            work = Path(tmp)
            slow = slow_python(procs, work)
            print(f"# {' '.join(SWEEP)}; gate --check {CHECK}; B capped at {args.cpus} CPU")
            same, same_changes = series("A-vs-A", PYTHON, args.trials, work)
            slowed, slow_changes = series("A-vs-slow-B", slow, args.trials, work)
    finally:
        group.rmdir()
    realized = statistics.median(slow_changes)
    same_goal = same <= max(1, args.trials // 20)
    slow_goal = slowed >= args.trials - max(1, args.trials // 20)
    same_change = statistics.median(same_changes)
    print(
        f"A vs A     : {same}/{args.trials} gates failed (goal <= 1 of 20): "
        f"{'PASS' if same_goal else 'FAIL'}; B's median change {same_change:+.1%}"
    )
    print(
        f"A vs slow B: {slowed}/{args.trials} gates failed (goal >= 19 of 20): "
        f"{'PASS' if slow_goal else 'FAIL'}; slowdown realized: busbw {realized:+.1%}"
    )
    return 0 if same_goal and slow_goal else 1


if __name__ == "__main__":
    sys.exit(main())
