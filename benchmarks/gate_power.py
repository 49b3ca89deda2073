"""How often does ``colbench gate`` pass identical runs and catch genuinely slower ones?

Two network namespaces joined by a veth pair shaped with ``tc`` (see tests/netns.py)
carry a 2-rank gloo job. One baseline run at RATE, then RUNS identical runs at RATE
and RUNS runs at SLOW x RATE, alternating so that any drift of the machine hits both
kinds alike. Each run is gated against the baseline with the real CLI; the script
prints the pass rate of the identical runs and the catch rate of the slower ones.
The numbers in docs/gate.md, "How well it works", come from this script.

    sudo .venv/bin/python benchmarks/gate_power.py --runs 10 --out /tmp/gate-power

Needs root (namespaces, tc). The defaults are those of tests/dist/test_gate_throttle.py;
about 50 s per run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.netns import unavailable, veth_pair  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="identical and slower runs, each")
    parser.add_argument("--rate-mbit", type=float, default=400.0, help="link rate of the baseline")
    parser.add_argument("--slow", type=float, default=0.7, help="slower runs' rate, x baseline")
    parser.add_argument("--repeat", type=int, default=5, help="sweep --repeat of every run")
    parser.add_argument("--ops", default="all_reduce,all_gather,broadcast")
    parser.add_argument("--sizes", default="512K-4M")
    parser.add_argument("--iters", default="5")
    parser.add_argument(
        "--check",
        action="append",
        default=None,
        help="gate checks (default: busbw_gbps:-15%% and time_p50_us:+25%%)",
    )
    parser.add_argument("--min-size", default="1M", help="gate --min-size")
    parser.add_argument("--out", type=Path, default=Path("/tmp/colbench-gate-power"))
    args = parser.parse_args()
    checks = args.check or ["busbw_gbps:-15%", "time_p50_us:+25%"]
    reason = unavailable()
    if reason:
        print(f"gate_power: cannot run: {reason}", file=sys.stderr)
        return 2
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    sweep = [
        "--op", args.ops, "--sizes", args.sizes, "-n", args.iters, "-w", "1",
        "--repeat", str(args.repeat), "--backend", "gloo", "--no-table",
    ]  # fmt: skip
    gate_flags = [f"--check={c}" for c in checks] + ["--min-size", args.min_size]
    records = []
    with veth_pair("p") as pair:

        def measure(name: str, rate: float) -> Path:
            pair.set_rate(rate)
            out = args.out / name
            started = time.monotonic()
            proc = pair.sweep(sweep, out)
            if proc.returncode != 0:
                raise SystemExit(f"gate_power: sweep {name} failed:\n{proc.stderr[-2000:]}")
            print(f"{name}: {rate:g} mbit, {time.monotonic() - started:.0f} s", flush=True)
            return out

        baseline = measure("baseline", args.rate_mbit)
        plan = [(kind, i) for i in range(args.runs) for kind in ("identical", "slower")]
        for kind, i in plan:
            rate = args.rate_mbit * (args.slow if kind == "slower" else 1.0)
            run = measure(f"{kind}-{i}", rate)
            gate = subprocess.run(
                [sys.executable, "-m", "colbench", "gate", str(baseline), str(run), *gate_flags],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if gate.returncode not in (0, 1):
                raise SystemExit(f"gate_power: gate failed to run:\n{gate.stderr}")
            summary = gate.stdout.strip().splitlines()[-1]
            records.append(
                {
                    "kind": kind,
                    "run": i,
                    "rate_mbit": rate,
                    "exit": gate.returncode,
                    "summary": summary,
                }
            )
            print(f"  gate exit {gate.returncode}: {summary}", flush=True)
    identical = [r for r in records if r["kind"] == "identical"]
    slower = [r for r in records if r["kind"] == "slower"]
    passed = sum(r["exit"] == 0 for r in identical)
    caught = sum(r["exit"] == 1 for r in slower)
    result = {
        "rate_mbit": args.rate_mbit,
        "slow_factor": args.slow,
        "repeat": args.repeat,
        "ops": args.ops,
        "sizes": args.sizes,
        "checks": checks,
        "min_size": args.min_size,
        "identical_passed": passed,
        "identical_runs": len(identical),
        "slower_caught": caught,
        "slower_runs": len(slower),
        "runs": records,
    }
    (args.out / "gate_power.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"identical runs passed: {passed}/{len(identical)}; "
        f"{1 - args.slow:.0%}-slower runs caught: {caught}/{len(slower)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
