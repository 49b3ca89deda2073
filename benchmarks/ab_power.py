"""False-alarm and catch rates of the paired gate on this machine (issue 13's in-run A/B goal).

Each trial is one interleaved run, ``colbench sweep --python A=...,B=...``, judged by
``colbench gate RUN --variant-a python=A --variant-b python=B --check busbw_gbps:-10%``.

Each variant's interpreter is a wrapper that moves the rank into a cgroup (v1 ``cpu`` or
v2) with a CPU quota and a raised weight, then exec's this Python:

- A against A: both variants capped at the same quota (``--cpus``, two cgroups).
- A against a slow B: B capped at 0.75 of A's quota, so B's ranks really run on 25% less
  CPU: a real slowdown, not an edited number. The slowdown realized is B's median busbw
  change over every pair of the slow trials, printed below.

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
    "--op", "all_reduce", "--sizes", "4M,16M", "--repeat", "12", "--iters", "10",
    "--warmup", "2", "--backend", "gloo", "--nprocs", "2", "--no-table",
]  # fmt: skip


def make_cgroup(name: str, cpus: float, period_us: int = 10_000) -> tuple[Path, Path]:
    """A cgroup capping its members to ``cpus`` CPUs; returns (its procs file, its dir).

    Its weight is raised too, so that under other jobs' load its ranks still get their
    quota: the quota, not the neighbours, sets how fast they run.
    """
    v1 = Path("/sys/fs/cgroup/cpu")
    if v1.is_dir():
        group = v1 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(int(cpus * period_us)))
        (group / "cpu.shares").write_text("8192")
    else:
        group = Path("/sys/fs/cgroup") / name
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{int(cpus * period_us)} {period_us}")
        (group / "cpu.weight").write_text("800")
    return group / "cgroup.procs", group


def capped_python(procs: Path, where: Path, name: str) -> str:
    """An interpreter path that joins a cgroup, then runs this Python."""
    wrapper = where / f"python-{name}"
    wrapper.write_text(f'#!/bin/sh\necho $$ > {procs}\nexec {PYTHON} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def trial(a_python: str, b_python: str, out: Path) -> tuple[bool, float, float]:
    """One interleaved run and its paired gate: (gate failed, B's median change, seconds)."""
    started = time.monotonic()
    run = [PYTHON, "-m", "colbench", "sweep", *SWEEP, "--out", str(out)]
    run += ["--python", f"A={a_python},B={b_python}"]
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


def series(
    label: str, pythons: tuple[str, str], trials: int, work: Path
) -> tuple[int, list[float]]:
    fails, changes = 0, []
    for i in range(trials):
        failed, change, seconds = trial(*pythons, work / f"{label}-{i}")
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
    parser.add_argument("--cpus", type=float, default=0.8, help="A's CPU quota (CPUs)")
    args = parser.parse_args()
    slow_cpus = round(0.75 * args.cpus, 3)
    quotas = {"a": args.cpus, "a2": args.cpus, "b": slow_cpus}
    groups = {k: make_cgroup(f"colbench-ab-{k}-{os.getpid()}", v) for k, v in quotas.items()}
    try:
        with tempfile.TemporaryDirectory(prefix="ab-power-") as tmp:
            work = Path(tmp)
            py = {k: capped_python(procs, work, k) for k, (procs, _) in groups.items()}
            print(
                f"# {' '.join(SWEEP)}; gate --check {CHECK}; A and A' capped at "
                f"{args.cpus} CPU, B at {slow_cpus} CPU (x0.75)",
                flush=True,
            )
            same, same_changes = series("A-vs-A", (py["a"], py["a2"]), args.trials, work)
            slowed, slow_changes = series("A-vs-slow-B", (py["a"], py["b"]), args.trials, work)
    finally:
        for _, group in groups.values():
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
