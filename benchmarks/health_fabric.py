"""Does ``colbench health`` name nothing on a uniform fabric, keep its floors' stated
false-alarm rates, and name the slow node, whether its link or its CPU is slow?

Six "nodes" (network namespaces behind one bridge, tests/netns.py), each with its own
host name and its own torchrun (one rank per node), every link shaped to --rate-mbit.
In order, all at ``--level quick`` (or --level):

1. --learn-runs uniform runs, from which ``colbench health learn`` learns floors;
2. --runs more uniform runs judged against those floors: CRITICAL and WARN counts per
   node-check, against the WARN rate the floors state and its 95% binomial bound; the
   same runs' samples judged against the fleet's median too (no floors), and whether
   each run kept to the time its level stated;
3. --slow-runs with node C's link at a third: was node C CRITICAL, alone, exit 1, and
   in the drain list;
4. --slow-runs with node D's CPU held to --cpu-pct of one core (a cgroup quota over a
   10 ms period), links unshaped: was node D named, and nothing else?
5. --slow-runs uniform with two ranks per node (12 ranks): the intra-node checks and two
   rails of sendrecv; was nothing named, and did each run keep to its stated time?

Needs root (namespaces, cgroups). docs/health.md holds the figures of a run.

    .venv/bin/python benchmarks/health_fabric.py --learn-runs 10 --runs 20 --slow-runs 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from colbench.commands.health import floors as floor_files  # noqa: E402
from colbench.commands.health.judge import against_fleet, samples_of  # noqa: E402
from colbench.results.reporters.stragglers import binomial_tail  # noqa: E402
from tests import cgroups, netns  # noqa: E402
from tests.torchrun_fabric import torchrun  # noqa: E402

SLOW_LINK, SLOW_CPU = 2, 3


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--learn-runs", type=int, default=10, help="uniform runs to learn from")
    parser.add_argument("--runs", type=int, default=20, help="uniform runs judged on floors")
    parser.add_argument("--slow-runs", type=int, default=3, help="runs of each slow case")
    parser.add_argument("--rate-mbit", type=float, default=400.0, help="every node's link")
    parser.add_argument("--cpu-pct", type=float, default=20.0, help="node D's CPU quota")
    parser.add_argument("--level", default="quick")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep every run directory here (a new folder)"
    )
    parser.add_argument("--cases", default="uniform,link,cpu,ranks2", help="which, comma-separated")
    return parser.parse_args(argv)


def health(
    fabric: netns.Fabric,
    out: Path,
    level: str,
    *extra: str,
    cgroup_procs: dict[int, Path] | None = None,
    nproc_per_node: int = 1,
) -> dict[str, Any]:
    """One run; what it said and wrote."""
    drain = out.parent / f"{out.name}.drain"
    argv = [
        "health",
        "--backend",
        "gloo",
        "--level",
        level,
        "--out",
        str(out),
        "--drain-list",
        str(drain),
        *extra,
    ]
    results = torchrun(fabric, argv, nproc_per_node, timeout_s=600, cgroup_procs=cgroup_procs)
    codes = [p.returncode for p in results]
    if codes[1:] != [0] * (len(codes) - 1) or codes[0] not in (0, 1):
        tails = "".join(f"\n[node {n}] {p.stderr[-1500:]}" for n, p in enumerate(results))
        raise SystemExit(f"run {out.name} failed: exit codes {codes}{tails}")
    meta = json.loads((out / "meta.json").read_text())
    findings = [json.loads(line) for line in (out / "health.jsonl").read_text().splitlines()]
    return {
        "exit": codes[0],
        "meta": meta,
        "findings": findings,
        "drain": drain.read_text().split(),
        "lines": meta["verdict"]["lines"],
    }


def upper_95(n: int, rate: float) -> int:
    """The largest count a binomial(n, rate) exceeds with at most 2.5% chance."""
    k = 0
    while k <= n and binomial_tail(k + 1, n, rate) > 0.025:
        k += 1
    return k


def named(findings: Sequence[dict[str, Any]], verdict: str) -> list[tuple[str, str]]:
    return [(f["node"], f["check"]) for f in findings if f["verdict"] == verdict]


def uniform(fabric: netns.Fabric, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Learn floors from uniform runs, then judge more uniform runs against them (and,
    from the same samples, against the fleet)."""
    fabric.shape(args.rate_mbit)
    timing, learn = [], []
    for i in range(args.learn_runs):
        run = health(fabric, root / f"learn{i}", args.level)
        timing.append((run["meta"]["measured_s"], run["meta"]["estimate_s"]))
        learn.append(str(root / f"learn{i}"))
        print(f"learn {i}: exit {run['exit']}; {run['lines'][0]}", flush=True)
    floors = root / "floors.json"
    floor_files.learn(learn, str(floors))
    counts: Counter[str] = Counter()
    for i in range(args.runs):
        out = root / f"judge{i}"
        run = health(fabric, out, args.level, "--floors", str(floors))
        timing.append((run["meta"]["measured_s"], run["meta"]["estimate_s"]))
        judged = [f for f in run["findings"] if f["floor_gbps"] is not None]
        counts["judged"] += len(judged)
        counts["WARN"] += len(named(judged, "WARN"))
        counts["CRITICAL"] += len(named(judged, "CRITICAL"))
        counts["exit 1"] += run["exit"] == 1
        doc = json.loads((out / "health.samples.json").read_text())
        by_fleet = [f for f in against_fleet(samples_of(doc)) if f.verdict == "CRITICAL"]
        counts["fleet named"] += bool(by_fleet)
        print(
            f"judge {i}: exit {run['exit']}; WARN {named(judged, 'WARN')}, CRITICAL "
            f"{named(judged, 'CRITICAL')}; against the fleet: "
            f"{[(f.node, f.check) for f in by_fleet]}",
            flush=True,
        )
    return {"counts": counts, "timing": timing, "floors": json.loads(floors.read_text())}


def slow_link(fabric: netns.Fabric, root: Path, args: argparse.Namespace) -> list[bool]:
    fabric.shape(args.rate_mbit, node_mbit={SLOW_LINK: args.rate_mbit / 3})
    found = []
    for i in range(args.slow_runs):
        run = health(fabric, root / f"link{i}", args.level)
        crit = sorted({n for n, _ in named(run["findings"], "CRITICAL")})
        meta = run["meta"]
        found.append(
            run["exit"] == 1
            and crit == ["nodeC"]
            and run["drain"] == ["nodeC"]
            and meta["measured_s"] <= meta["estimate_s"]
        )
        print(
            f"link at a third {i}: exit {run['exit']}, CRITICAL {crit}, drain "
            f"{run['drain']}, {meta['measured_s']} s of {meta['estimate_s']} s stated; "
            f"{run['lines'][0]}",
            flush=True,
        )
    return found


def slow_cpu(fabric: netns.Fabric, root: Path, args: argparse.Namespace) -> list[bool]:
    fabric.shape(None)
    found = []
    with cgroups.cpu_group("hb") as group:
        group.limit(int(args.cpu_pct * 100), 10_000)
        for i in range(args.slow_runs):
            procs = {SLOW_CPU: group.procs}
            run = health(fabric, root / f"cpu{i}", args.level, cgroup_procs=procs)
            bad = sorted(
                {n for n, _ in named(run["findings"], "CRITICAL")}
                | {n for n, _ in named(run["findings"], "WARN")}
            )
            found.append(bad == ["nodeD"])
            print(
                f"cpu at {args.cpu_pct:g}% {i}: exit {run['exit']}, named {bad}; "
                f"{' / '.join(run['lines'][:-1])}",
                flush=True,
            )
    return found


def two_per_node(fabric: netns.Fabric, root: Path, args: argparse.Namespace) -> list[bool]:
    fabric.shape(args.rate_mbit)
    found = []
    for i in range(args.slow_runs):
        run = health(fabric, root / f"ranks2-{i}", args.level, nproc_per_node=2)
        meta, bad = run["meta"], named(run["findings"], "CRITICAL") + named(run["findings"], "WARN")
        within = meta["measured_s"] <= meta["estimate_s"]
        checks = sorted({f["check"] for f in run["findings"]})
        found.append(not bad and within and run["exit"] == 0)
        print(
            f"two ranks per node {i}: exit {run['exit']}, named {bad}, {meta['measured_s']} s "
            f"of {meta['estimate_s']} s stated; checks {checks}",
            flush=True,
        )
        for f in run["findings"]:
            if f["check"].startswith(("intra", "pair")):
                print(f"  {f['node']} {f['check']} {f['busbw_gbps']:.4g} GB/s", flush=True)
    return found


def summary(args: argparse.Namespace, results: dict[str, Any]) -> None:
    if "uniform" in results:
        counts, n = results["uniform"]["counts"], results["uniform"]["counts"]["judged"]
        rate = floor_files.WARN_RATE
        print(
            f"uniform, against floors learned from {args.learn_runs} runs: {args.runs} runs, "
            f"{n} node-checks judged; CRITICAL {counts['CRITICAL']} (stated rate "
            f"{floor_files.CRITICAL_RATE:g}, expected {n * floor_files.CRITICAL_RATE:.2f}); "
            f"runs that exited 1: {counts['exit 1']}"
        )
        print(
            f"  WARN {counts['WARN']} (stated rate {rate:g}: expected {n * rate:.2f}, 95% "
            f"binomial bound {upper_95(n, rate)})"
        )
        print(
            "uniform, the same samples against the fleet's median: runs naming a CRITICAL "
            f"node: {counts['fleet named']} of {args.runs}"
        )
        timing = results["uniform"]["timing"]
        within = sum(m <= e for m, e in timing)
        print(
            f"--level {args.level}: {within} of {len(timing)} uniform runs within their stated "
            f"time (longest {max(m for m, _ in timing):.1f} s of {timing[0][1]:.0f} s stated)"
        )
        for f in results["uniform"]["floors"]["floors"]:
            print("  floor " + floor_files.floor_line(floor_files.Floor(**f)).strip())
    if "link" in results:
        found = results["link"]
        print(f"node C's link at a third: C alone CRITICAL, exit 1, drained, within the "
              f"stated time: {sum(found)} of {len(found)}")  # fmt: skip
    if "cpu" in results:
        found = results["cpu"]
        print(f"node D's CPU at {args.cpu_pct:g}%: D alone named: {sum(found)} of {len(found)}")
    if "ranks2" in results:
        found = results["ranks2"]
        print(f"two ranks per node, uniform: nothing named, exit 0, within the stated time: "
              f"{sum(found)} of {len(found)}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if (why := netns.unavailable()) or (why := cgroups.unavailable()):
        print(f"cannot run: {why}")
        return 2
    cases = {"uniform": uniform, "link": slow_link, "cpu": slow_cpu, "ranks2": two_per_node}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, netns.fabric(6, "hb") as fabric:
        root = Path(tmp)
        if args.keep is not None:
            args.keep.mkdir(parents=True)
            root = args.keep
        for name in args.cases.split(","):
            results[name] = cases[name](fabric, root, args)
    print()
    summary(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
