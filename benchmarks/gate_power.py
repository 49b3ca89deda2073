"""Does ``colbench gate`` against a stored baseline keep its promises on this machine?

A stored baseline (the last K accepted runs, pooled, as scripts/ci-gate.sh keeps it) is
measured first. Then RUNS identical runs and RUNS runs slowed for real by a CPU quota on
the ranks (a cgroup of our own: cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``),
alternating so that the machine's drift hits both kinds alike, each gated with the real
CLI. Printed, with PASS/FAIL against the goals of issue 13:

- false alarms among identical runs (goal: at most 1 in 20);
- slowed runs caught (goal: at least 19 in 20), the slowdown the quota realized (median
  bus bandwidth against the baseline's) and the slowdown the gate said it could see.

The runs measure the performance part of configs/smoke-cpu.yaml (the suite file, with
--op and --sizes narrowed by flags so that a run takes seconds, not a minute):

    .venv/bin/python benchmarks/gate_power.py --runs 20 --out /tmp/gate-power

Needs root (cgroups). The numbers in docs/gate.md, "How well it works", come from it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "configs" / "smoke-cpu.yaml"
_SENSITIVE = re.compile(r"sensitive to slowdowns >= (\d+)%")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="identical and slowed runs, each")
    parser.add_argument("--keep", type=int, default=3, help="runs pooled in the baseline")
    parser.add_argument("--cpus", type=float, default=0.5, help="CPU quota of slowed runs")
    parser.add_argument("--ops", default="all_reduce,all_gather,broadcast")
    parser.add_argument("--sizes", default="4M,16M")
    parser.add_argument("--check", default="busbw_gbps:-25%", help="the gate's check")
    parser.add_argument("--min-size", default="4M", help="gate --min-size")
    parser.add_argument("--out", type=Path, default=Path("/tmp/colbench-gate-power"))
    return parser.parse_args()


@contextmanager
def cpu_cgroup(name: str, cpus: float | None) -> Iterator[Path]:
    """A cgroup of our own with a CPU quota (None: unlimited); removed afterwards."""
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    group = Path("/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu") / name
    group.mkdir()
    try:
        period_us = 100_000
        quota = "max" if cpus is None else str(int(cpus * period_us))
        if v2:
            (group / "cpu.max").write_text(f"{quota} {period_us}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{period_us}\n")
            (group / "cpu.cfs_quota_us").write_text(("-1" if cpus is None else quota) + "\n")
        yield group
    finally:
        # Our processes have exited by now; an empty cgroup can be removed.
        group.rmdir()


def sweep(args: argparse.Namespace, out: Path, group: Path) -> None:
    """One run of the suite's performance part, its ranks inside ``group``."""
    argv = [sys.executable, "-m", "colbench", "run", str(SUITE), "--op", args.ops]
    argv += ["--sizes", args.sizes, "--no-table", "--out", str(out)]
    procs = group / "cgroup.procs"
    proc = subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        # Children (the ranks) inherit the cgroup of the process that joins it here.
        preexec_fn=lambda: procs.write_text(f"{os.getpid()}\n"),
    )
    if proc.returncode != 0:
        raise SystemExit(f"gate_power: sweep {out.name} failed:\n{proc.stderr[-2000:]}")


def gate(args: argparse.Namespace, baseline: Path, run: Path, *extra: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "colbench", "gate", str(baseline), str(run)]
    argv += [f"--check={args.check}", "--min-size", args.min_size, *extra]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"gate_power: gate failed to run:\n{proc.stderr}")
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, lines[-1] if lines else ""


def median_busbw(run: Path, min_bytes: int) -> float:
    """The median over rows (at min_bytes and up) of each row's median bus bandwidth."""
    from colbench.results import load

    frame = load(run)
    frame = frame[(frame["size_bytes"] >= min_bytes) & (frame["status"] == "ok")]
    keys = ["op", "in_place", "size_bytes"]
    return float(statistics.median(frame.groupby(keys)["busbw_gbps"].median()))


def measure_baseline(args: argparse.Namespace, free: Path) -> Path:
    baseline = args.out / "baseline"
    for i in range(args.keep):
        run = args.out / f"base-{i}"
        sweep(args, run, free)
        gate(args, baseline, run, "--update-baseline", f"--keep={args.keep}")
        print(f"baseline run {i + 1}/{args.keep} accepted", flush=True)
    return baseline


def trial(args: argparse.Namespace, baseline: Path, kind: str, i: int, group: Path) -> dict:
    from colbench.sizes import parse_size

    run = args.out / f"{kind}-{i}"
    sweep(args, run, group)
    code, summary = gate(args, baseline, run)
    floor = parse_size(args.min_size)
    realized = 1 - median_busbw(run, floor) / median_busbw(baseline, floor)
    stated = _SENSITIVE.search(summary)
    record = {
        "kind": kind,
        "run": i,
        "exit": code,
        "realized_slowdown": round(realized, 3),
        "stated_detectable": int(stated.group(1)) / 100 if stated else None,
        "summary": summary,
    }
    print(f"{kind}-{i}: exit {code}, slowdown {realized:+.0%}: {summary}", flush=True)
    return record


def report(args: argparse.Namespace, records: list[dict]) -> int:
    same = [r for r in records if r["kind"] == "identical"]
    slow = [r for r in records if r["kind"] == "slowed"]
    alarms = sum(r["exit"] == 1 for r in same)
    caught = sum(r["exit"] == 1 for r in slow)
    beyond = [r for r in slow if r["stated_detectable"] is not None]
    beyond = [r for r in beyond if r["realized_slowdown"] > r["stated_detectable"]]
    alarm_ok = alarms <= len(same) / 20
    catch_ok = bool(slow) and caught >= 0.95 * len(slow)
    realized = statistics.median(r["realized_slowdown"] for r in slow) if slow else 0.0
    stated = [r["stated_detectable"] for r in records if r["stated_detectable"] is not None]
    print(
        f"false alarms: {alarms}/{len(same)} identical runs (goal <= 1 in 20): "
        f"{'PASS' if alarm_ok else 'FAIL'}"
    )
    print(
        f"caught: {caught}/{len(slow)} slowed runs, median realized slowdown {realized:.0%} "
        f"(goal >= 19 in 20): {'PASS' if catch_ok else 'FAIL'}"
    )
    told = f"median {statistics.median(stated):.0%} over {len(stated)} gates" if stated else "none"
    print(f"stated detectable slowdown: {told}")
    print(
        f"slowed runs beyond their stated figure: {len(beyond)}, caught "
        f"{sum(r['exit'] == 1 for r in beyond)}"
    )
    summary = {"args": {k: str(v) for k, v in vars(args).items()}, "runs": records}
    (args.out / "gate_power.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if alarm_ok and catch_ok else 1


def main() -> int:
    args = parse_args()
    if os.geteuid() != 0:
        print("gate_power: needs root for its cgroups", file=sys.stderr)
        return 2
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    tag = f"colbench-gate-power-{os.getpid()}"
    records = []
    with cpu_cgroup(f"{tag}-free", None) as free, cpu_cgroup(f"{tag}-slow", args.cpus) as slow:
        baseline = measure_baseline(args, free)
        for i in range(args.runs):
            records.append(trial(args, baseline, "identical", i, free))
            records.append(trial(args, baseline, "slowed", i, slow))
    return report(args, records)


if __name__ == "__main__":
    raise SystemExit(main())
