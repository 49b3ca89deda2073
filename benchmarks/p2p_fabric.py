"""Does ``colbench p2p`` name nothing on a uniform fabric and the slow node on a throttled one?

Four "nodes" (network namespaces, one launched-mode rank each, as torchrun starts them)
behind one bridge (tests/netns.py ``fabric``), every link shaped with htb to --rate-mbit
both ways. RUNS runs of ``colbench p2p --backend gloo`` on the uniform fabric, and
--slow-runs with node C's link throttled to a quarter of the others', alternating so
that the machine's load hits both alike; everything else at p2p's defaults (passes,
thresholds, -n, -w) but the message size (--size; the default 64M takes 1.3 s a message
at 400 Mbit/s). Printed per run: the verdict's lines; then

- uniform runs that named nothing (goal: all of them, issue 21's 10 of 10);
- throttled runs that named node C, and nothing else (goal: all of them);
- for comparison, how often the rule colbench used before (one pass, a link more than
  25% below the median bandwidth or 100% above the median latency) would have named
  something in the same passes of the uniform runs.

With ``--defaults`` it runs instead what issue 33 saw hang: one run of ``colbench p2p``
at every default (64M messages, 5 passes, --max-time 600 s) on the uniform fabric, and
prints when rank 0 stated its time, the gaps between its progress lines, the time taken
against the time stated, and the verdict. Goals: stated within 90 s, a line at least
every 30 s, a verdict within 10 minutes, taken within 50% of stated.

Needs root (namespaces). docs/p2p.md, "How well it works" and "Long runs", holds the
figures of a run.

    .venv/bin/python benchmarks/p2p_fabric.py --runs 10 --slow-runs 5
    .venv/bin/python benchmarks/p2p_fabric.py --defaults
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from colbench.commands.p2p import load  # noqa: E402
from colbench.commands.p2p.report import samples_of  # noqa: E402
from colbench.host.launchers.rendezvous import free_port  # noqa: E402
from tests import netns  # noqa: E402

SLOW_NODE = 2
SLOW_LABEL = "nodeC"
PROGRESS = "colbench: progress: "
STATED = "colbench: this run takes about "


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs on the uniform fabric")
    parser.add_argument("--slow-runs", type=int, default=5, help="runs with node C at 1/4")
    parser.add_argument("--rate-mbit", type=float, default=400.0, help="every node's link")
    parser.add_argument("--size", default="1M", help="p2p --size")
    parser.add_argument(
        "--defaults", action="store_true", help="one run at p2p's defaults: its time and lines"
    )
    parser.add_argument("extra", nargs="*", help="more p2p arguments (after --)")
    return parser.parse_args(argv)


def run_p2p(fabric: netns.Fabric, out: Path, extra: Sequence[str]) -> dict[str, object]:
    """One p2p run across the fabric; its meta.json verdict (exit codes checked)."""
    argv = ["p2p", "--backend", "gloo", "--no-plot", *extra, "--out", str(out)]
    results = fabric.colbench(argv, timeout_s=900)
    codes = [proc.returncode for proc in results]
    if codes != [0] * len(results):
        tails = "".join(f"\n[rank {r}] {p.stderr[-1500:]}" for r, p in enumerate(results))
        raise RuntimeError(f"p2p exit codes {codes}{tails}")
    verdict: dict[str, object] = json.loads((out / "meta.json").read_text())["verdict"]
    return verdict


def former_rule_names(out: Path) -> tuple[int, int]:
    """(passes in which the one-pass median rule colbench used before would have named a
    link, passes), on the same measurements."""
    bw, lat = samples_of(load(out))
    passes = min(len(v) for v in bw.values())
    named = 0
    for i in range(passes):
        worst_bw: dict[tuple[int, int], float] = {}
        worst_lat: dict[tuple[int, int], float] = {}
        for (src, dst), values in bw.items():
            key = (min(src, dst), max(src, dst))
            worst_bw[key] = min(values[i], worst_bw.get(key, values[i]))
            worst_lat[key] = max(lat[(src, dst)][i], worst_lat.get(key, 0.0))
        median_bw = statistics.median(worst_bw.values())
        median_lat = statistics.median(worst_lat.values())
        named += any(
            worst_bw[k] < 0.75 * median_bw or worst_lat[k] > 2 * median_lat for k in worst_bw
        )
    return named, passes


def launch_timed(
    fab: netns.Fabric, argv: Sequence[str], timeout_s: float
) -> tuple[list[int], list[tuple[float, str]], str]:
    """``colbench ARGV`` as one launched job across the fabric (as Fabric.colbench), with
    rank 0's stderr lines timed as they arrive: exit codes, (seconds since the launch,
    line), rank 0's stdout."""
    port = str(free_port())
    procs = []
    begun = time.monotonic()
    for rank, (ns, label) in enumerate(zip(fab.namespaces, fab.labels, strict=True)):
        env = {
            **os.environ, "PYTHONUNBUFFERED": "1", "RANK": str(rank),
            "WORLD_SIZE": str(len(fab.namespaces)), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": fab.addresses[0], "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "eth0",
            "COLBENCH_NODE_LABEL": label,
        }  # fmt: skip
        command = ["ip", "netns", "exec", ns, sys.executable, "-m", "colbench", *argv]
        out = subprocess.PIPE if rank == 0 else subprocess.DEVNULL
        procs.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=out,
                                      stderr=out, text=True))  # fmt: skip
    lines: list[tuple[float, str]] = []
    stdout: list[str] = []
    first = procs[0]
    assert first.stderr is not None and first.stdout is not None
    errs, outs = first.stderr, first.stdout

    def read_err() -> None:
        for line in errs:
            lines.append((time.monotonic() - begun, line.rstrip("\n")))

    readers = [threading.Thread(target=read_err),
               threading.Thread(target=lambda: stdout.append(outs.read()))]  # fmt: skip
    for reader in readers:
        reader.start()
    deadline = begun + timeout_s
    try:
        codes = [proc.wait(timeout=max(1.0, deadline - time.monotonic())) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for reader in readers:
        reader.join()
    return codes, lines, "".join(stdout)


def run_defaults(rate_mbit: float, extra: Sequence[str]) -> int:
    """One p2p run at its defaults: when it said its time, its lines, its end."""
    with tempfile.TemporaryDirectory(prefix="p2p-fabric-") as tmp, netns.fabric(4, "pd") as fab:
        fab.shape(rate_mbit)
        out = Path(tmp) / "run"
        argv = ["p2p", "--backend", "gloo", "--no-plot", *extra, "--out", str(out)]
        begun = time.monotonic()
        codes, lines, stdout = launch_timed(fab, argv, timeout_s=1200)
        took_s = time.monotonic() - begun
        for at, line in lines:
            print(f"{at:7.1f} s  {line}")
        print(stdout)
        if codes != [0, 0, 0, 0]:
            print(f"FAIL: exit codes {codes}")
            return 1
        meta = json.loads((out / "meta.json").read_text())
    stated_at = next(at for at, line in lines if line.startswith(STATED))
    progress = [at for at, line in lines if line.startswith(PROGRESS)]
    gaps = [b - a for a, b in itertools.pairwise([stated_at, *progress])]
    timing, plan = meta["timing"], meta["plan"]
    ratio = took_s / timing["stated_s"]
    print(f"plan asked: {plan['asked']} (about {plan['asked_s']:.0f} s); ran: {plan['ran']}")
    print(f"cut: {', '.join(plan['cut']) or 'none'}")
    print(f"stated {timing['stated_s']:.0f} s, {stated_at:.1f} s after the launch")
    print(f"progress lines: {len(progress)}, gaps {min(gaps):.1f}-{max(gaps):.1f} s "
          f"(median {statistics.median(gaps):.1f} s)")  # fmt: skip
    print(f"took {took_s:.0f} s: {ratio:.2f} of the time stated")
    goals = {
        "stated within 90 s": stated_at <= 90,
        "a line at least every 30 s": max(gaps) <= 30 + 1,
        "a verdict within 10 minutes": took_s <= 600 and "verdict:" in stdout,
        "taken within 50% of stated": abs(ratio - 1) <= 0.5,
    }
    for goal, met in goals.items():
        print(f"{'PASS' if met else 'FAIL'}: {goal}")
    return 0 if all(goals.values()) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.defaults:
        return run_defaults(args.rate_mbit, args.extra)
    extra = ["--size", args.size, *args.extra]
    # Alternating while both last: uniform, slow, uniform, slow, ...
    kinds = [k for i in range(max(args.runs, args.slow_runs)) for k in ("uniform", "slow")
             if i < (args.runs if k == "uniform" else args.slow_runs)]  # fmt: skip
    clean = caught = former = former_passes = 0
    with tempfile.TemporaryDirectory(prefix="p2p-fabric-") as tmp, netns.fabric(4, "pb") as fab:
        for step, kind in enumerate(kinds):
            slow = {SLOW_NODE: args.rate_mbit / 4} if kind == "slow" else None
            fab.shape(args.rate_mbit, node_mbit=slow)
            out = Path(tmp) / f"run{step}"
            started = time.monotonic()
            verdict = run_p2p(fab, out, extra)
            took = time.monotonic() - started
            nodes, links = verdict["slow_nodes"], verdict["slow_links"]
            if kind == "uniform":
                clean += not nodes and not links
                named, passes = former_rule_names(out)
                former += named
                former_passes += passes
            else:
                caught += nodes == [SLOW_LABEL] and not links
            print(f"run {step + 1}/{len(kinds)} ({kind}, {took:.0f} s):")
            for line in verdict["lines"]:  # type: ignore[attr-defined]
                print(f"    {line}")
            sys.stdout.flush()
    print()
    print(f"uniform fabric at {args.rate_mbit:g} Mbit/s: named nothing in {clean}/{args.runs}")
    print(f"node C at a quarter: named node C alone in {caught}/{args.slow_runs}")
    print(
        "the former one-pass median rule, on the uniform runs' passes: named something in "
        f"{former}/{former_passes} passes"
    )
    ok = clean == args.runs and caught == args.slow_runs
    print(f"{'PASS' if ok else 'FAIL'}: goal {args.runs}/{args.runs} and "
          f"{args.slow_runs}/{args.slow_runs}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
