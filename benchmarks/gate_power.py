"""Does ``colbench gate`` against a stored baseline keep its promises on this machine?

A stored baseline of K runs (``--update-baseline --keep K``, the rolling window
scripts/ci-gate.sh keeps) is measured first; with K >= 5 the gate judges performance
on the between-run drift of those runs (colbench.stats.drift), with fewer on the
samples' spread within the runs and the pooled test (colbench.commands.gate.pooled);
``--fresh-baseline`` measures a new baseline before every pair of trials, so that each
false alarm is a trial of its own. Then RUNS identical
runs and RUNS runs slowed for real by a CPU quota on the ranks (a cgroup of our own:
cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), alternating so that the machine's
drift hits both kinds alike, each gated with the real CLI. Every run, baseline ones
included, is made at a varying machine load: the benchmark starts 0, 1 or 2 busy-loop
processes beside it (drawn at random, the same distribution for every kind of run) and
prints the load average it saw. Printed, with PASS/FAIL against issue 13's goals:

- false alarms among identical runs (goal: at most 1 in 20);
- slowed runs caught (goal: at least 19 in 20 of runs slowed beyond the gate's stated
  overall figure): the slowdown the quota realized (the gate's overall statistic, the
  median over rows of log(run / baseline), of the slowed runs against the identical
  ones) and the overall figure the gate stated.

The runs measure the performance part of configs/smoke-cpu.yaml (the suite file, with
--op and --sizes narrowed by flags so that a run takes seconds, not a minute):

    .venv/bin/python benchmarks/gate_power.py --runs 20 --keep 10
    .venv/bin/python benchmarks/gate_power.py --runs 20 --keep 1 --fresh-baseline

Needs root (cgroups). The numbers in docs/gate.md, "How well it works", come from it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
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
_SENSITIVE = re.compile(r"sensitive to slowdowns >= (\d+)% on (\d+) rows")
_OVERALL = re.compile(r"(?:overall|pooled) >= (\d+)%")
ROW = ["op", "in_place", "size_bytes"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="identical and slowed runs, each")
    parser.add_argument("--keep", type=int, default=10, help="runs in the baseline window")
    parser.add_argument(
        "--fresh-baseline",
        action="store_true",
        help="measure a new baseline of --keep runs before each identical/slowed pair "
        "(with --keep 1: the pooled test's false alarms against a single baseline run)",
    )
    parser.add_argument("--cpus", type=float, default=0.25, help="CPU quota of slowed runs")
    parser.add_argument("--max-busy", type=int, default=2, help="busy loops: 0..this per run")
    parser.add_argument("--seed", type=int, default=13, help="seed of the busy-loop draws")
    parser.add_argument("--ops", default="all_reduce,all_gather,broadcast")
    parser.add_argument("--sizes", default="4M")
    parser.add_argument("--check", default="busbw_gbps:-25%", help="the gate's check")
    parser.add_argument("--min-size", default="4M", help="gate --min-size")
    parser.add_argument("--out", type=Path, default=Path("/tmp/colbench-gate-power"))
    return parser.parse_args()


@contextmanager
def cpu_cgroup(name: str, cpus: float | None) -> Iterator[Path]:
    """A cgroup of our own with a CPU quota (None: unlimited); removed afterwards.

    A 10 ms period, so that a throttled rank is slowed evenly rather than stopped for
    most of a 100 ms period in the middle of one timed batch."""
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    group = Path("/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu") / name
    group.mkdir()
    try:
        period_us = 10_000
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


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes spinning beside the run: load of our own making."""
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


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


def measured(args: argparse.Namespace, out: Path, group: Path, busy: int) -> float:
    """A sweep at a load of ``busy`` busy loops; the 1-minute load average after it."""
    with busy_loops(busy):
        sweep(args, out, group)
        return load_average()


def gate(
    args: argparse.Namespace, baseline: Path, run: Path, *extra: str, checked: bool = True
) -> tuple[int, str]:
    argv = [sys.executable, "-m", "colbench", "gate", str(baseline), str(run)]
    # Accepting runs judges none (checked=False): the gate rejects a run it fails from a
    # window, and a window of only the quiet runs would understate the drift measured.
    argv += [f"--check={args.check}", "--min-size", args.min_size] if checked else []
    argv += extra
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"gate_power: gate failed to run:\n{proc.stderr}")
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, lines[-1] if lines else ""


def row_medians(run: Path, min_bytes: int) -> dict[tuple, dict[str, float]]:
    """Row -> run id -> that run's median bus bandwidth of the row (sizes >= min_bytes)."""
    from colbench.results.rows import load

    frame = load(run)
    frame = frame[(frame["size_bytes"] >= min_bytes) & (frame["status"] == "ok")]
    medians = frame.groupby([*ROW, "run_id"])["busbw_gbps"].median()
    out: dict[tuple, dict[str, float]] = {}
    for (*row, run_id), value in medians.items():
        out.setdefault(tuple(row), {})[str(run_id)] = float(value)
    return out


def run_statistic(baseline: dict[tuple, dict[str, float]], run: Path, min_bytes: int) -> float:
    """The gate's overall statistic, computed here from the CSVs: the median over rows of
    log(run's median / geometric mean of the baseline runs' medians)."""
    current = row_medians(run, min_bytes)
    logs = []
    for row, by_run in baseline.items():
        if row in current:
            mean = statistics.fmean(math.log(v) for v in by_run.values())
            logs.append(math.log(next(iter(current[row].values()))) - mean)
    return statistics.median(logs)


def measure_baseline(
    args: argparse.Namespace, free: Path, rng: random.Random, name: str = "baseline"
) -> Path:
    baseline = args.out / name
    for i in range(args.keep):
        run = args.out / f"{name}-run-{i}"
        busy = rng.randint(0, args.max_busy)
        load = measured(args, run, free, busy)
        code, _ = gate(
            args, baseline, run, "--update-baseline", f"--keep={args.keep}", checked=False
        )
        if code != 0:
            raise SystemExit(f"gate_power: run {run} was not accepted into the baseline")
        print(f"baseline run {i + 1}/{args.keep} accepted (busy {busy}, load {load:.1f})")
    return baseline


def trial(args: argparse.Namespace, baseline: Path, kind: str, i: int, group: Path,
          busy: int) -> dict:  # fmt: skip
    from colbench.config.sizes import parse_size

    run = args.out / f"{kind}-{i}"
    load = measured(args, run, group, busy)
    code, summary = gate(args, baseline, run)
    floor = parse_size(args.min_size)
    stat = run_statistic(row_medians(baseline, floor), run, floor)
    rows = _SENSITIVE.search(summary)
    overall = _OVERALL.search(summary)
    record = {
        "kind": kind,
        "run": i,
        "busy": busy,
        "load": load,
        "exit": code,
        "log_statistic": round(stat, 4),
        "slowdown_vs_baseline": round(1 - math.exp(stat), 3),
        "stated_rows": int(rows.group(1)) / 100 if rows else None,
        "sensitive_rows": int(rows.group(2)) if rows else 0,
        "stated_overall": int(overall.group(1)) / 100 if overall else None,
        "summary": summary,
    }
    print(
        f"{kind}-{i}: busy {busy}, load {load:.1f}, exit {code}, "
        f"{1 - math.exp(stat):+.0%} vs baseline: {summary}",
        flush=True,
    )
    return record


def _loads(records: list[dict]) -> str:
    loads = sorted(r["load"] for r in records)
    busy = [sum(r["busy"] == b for r in records) for b in range(3)]
    return (
        f"load average {loads[0]:.1f}-{loads[-1]:.1f} (median {statistics.median(loads):.1f}), "
        f"busy loops 0/1/2 in {busy[0]}/{busy[1]}/{busy[2]} runs"
    )


def report(args: argparse.Namespace, records: list[dict]) -> int:
    same = [r for r in records if r["kind"] == "identical"]
    slow = [r for r in records if r["kind"] == "slowed"]
    alarms = sum(r["exit"] == 1 for r in same)
    caught = sum(r["exit"] == 1 for r in slow)
    # The quota's effect: slowed against identical runs, which share the drift.
    effect = statistics.median(r["log_statistic"] for r in slow) - statistics.median(
        r["log_statistic"] for r in same
    )
    realized = 1 - math.exp(effect)
    stated = [r["stated_overall"] for r in records if r["stated_overall"] is not None]
    overall = statistics.median(stated) if stated else None
    rows = [r["stated_rows"] for r in records if r["stated_rows"] is not None]
    print(f"identical runs: {_loads(same)}")
    print(f"slowed runs:    {_loads(slow)}")
    alarm_ok = alarms <= len(same) / 20
    print(
        f"false alarms: {alarms}/{len(same)} identical runs (goal <= 1 in 20): "
        f"{'PASS' if alarm_ok else 'FAIL'}"
    )
    told = f"{overall:.0%}" if overall is not None else "none"
    strong = overall is not None and realized > overall
    print(
        f"stated overall detectable slowdown: {told} (median over {len(stated)} gates); "
        f"rows: {f'{statistics.median(rows):.0%}' if rows else 'none'} on a median of "
        f"{statistics.median(r['sensitive_rows'] for r in records):.0f} sensitive rows"
    )
    print(
        f"realized slowdown of the quota ({args.cpus:g} CPU): {realized:.0%} (slowed against "
        f"identical runs' median run statistic): "
        f"{'beyond' if strong else 'NOT beyond'} the stated overall figure"
    )
    catch_ok = strong and bool(slow) and caught >= 0.95 * len(slow)
    print(
        f"caught: {caught}/{len(slow)} slowed runs (goal >= 19 in 20 of runs slowed beyond "
        f"the stated figure): {'PASS' if catch_ok else 'FAIL'}"
    )
    if overall is not None:
        beyond = [r for r in slow if r["slowdown_vs_baseline"] > overall]
        print(
            f"slowed runs whose own slowdown against the baseline exceeds {overall:.0%}: "
            f"{len(beyond)}, caught {sum(r['exit'] == 1 for r in beyond)}"
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
    rng = random.Random(args.seed)
    tag = f"drift-gate-power-{os.getpid()}"
    records = []
    with cpu_cgroup(f"{tag}-free", None) as free, cpu_cgroup(f"{tag}-slow", args.cpus) as slow:
        baseline = measure_baseline(args, free, rng)
        for i in range(args.runs):
            if args.fresh_baseline and i:
                baseline = measure_baseline(args, free, rng, f"baseline-{i}")
            for kind, group in (("identical", free), ("slowed", slow)):
                busy = rng.randint(0, args.max_busy)
                records.append(trial(args, baseline, kind, i, group, busy))
    return report(args, records)


if __name__ == "__main__":
    raise SystemExit(main())
