"""Stability: how much busbw moves between identical sweeps on this machine.

1. The coefficient of variation (stdev / mean) of all_reduce busbw at 16 MiB over 5
   repeated sweeps at 2 ranks (issue #6 asks for the figure; there is no pass mark).
2. Fixed iterations against --time-budget at equal total time: a 1K-16M all_reduce
   sweep repeated, once with -n 20 and once with a per-size budget equal to what the
   fixed sweep spent per size on average; the median CoV across sizes is compared.

    python benchmarks/stability.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from colbench.results.rows import load


def sweep(out: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "colbench", "sweep", "--op", "all_reduce", "--nprocs", "2",
         "--no-table", "--out", str(out), *args],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def cov(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def per_size_cov(runs: list[Path]) -> dict[int, float]:
    frames = [load(r) for r in runs]
    sizes = sorted(set(frames[0]["size_bytes"]))
    return {
        s: cov([float(f[f["size_bytes"] == s]["busbw_gbps"].iloc[0]) for f in frames])
        for s in sizes
        if s > 0
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        at16 = [root / f"s{i}" for i in range(args.repeats)]
        for run in at16:
            sweep(run, "--sizes", "16M")
        busbw = [float(load(r)["busbw_gbps"].iloc[0]) for r in at16]
        print(
            f"all_reduce 16M busbw over {args.repeats} sweeps: median "
            f"{statistics.median(busbw):.3f} GB/s, CoV {cov(busbw) * 100:.1f}%"
        )
        fixed = [root / f"f{i}" for i in range(args.repeats)]
        for run in fixed:
            sweep(run, "--sizes", "1K-16M", "-n", "20")
        spent_s = statistics.mean(
            float((load(r)["time_us"] * load(r)["iters"]).mean()) / 1e6 for r in fixed
        )
        budget = [root / f"b{i}" for i in range(args.repeats)]
        for run in budget:
            sweep(run, "--sizes", "1K-16M", "-n", "5", "--time-budget", f"{spent_s:.4f}")
        fixed_cov = statistics.median(per_size_cov(fixed).values())
        budget_cov = statistics.median(per_size_cov(budget).values())
        print(
            f"1K-16M, equal time per size ({spent_s * 1e3:.1f} ms): median CoV of busbw "
            f"across sizes: fixed -n 20 {fixed_cov * 100:.1f}%, "
            f"--time-budget {budget_cov * 100:.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
