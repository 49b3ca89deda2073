"""Sweep wall time: `colbench sweep --op all_reduce --sizes 1K-64M --nprocs 2` against a
hand-written script that runs the same sizes and iterations (warm-up 5, 20 timed calls)
in 2 spawned gloo ranks, each from the command to its exit. Runs alternate.

Target (issue #6): colbench <= 1.2x the hand-written script. Reported with colbench's
default verification on and with -c 0, since the hand script checks nothing.

    python benchmarks/sweep_walltime.py [--repeats 3] [--sizes 1K-64M]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TARGET = 1.2

_HAND = textwrap.dedent(
    """
    import datetime, sys, time
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    from colbench.config.sizes import parse_sizes

    def rank(r, port, sizes):
        store = dist.TCPStore("127.0.0.1", port, 2, is_master=r == 0,
                              timeout=datetime.timedelta(seconds=300))
        dist.init_process_group("gloo", store=store, rank=r, world_size=2)
        for size in sizes:
            x = torch.ones(size // 4)
            for _ in range(5):
                dist.all_reduce(x)
            dist.barrier()
            t = time.perf_counter_ns()
            for _ in range(20):
                dist.all_reduce(x)
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.start_processes(rank, args=(port, parse_sizes(sys.argv[1])), nprocs=2,
                           start_method="spawn")
    """
)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="1K-64M")
    args = parser.parse_args()
    hand: list[float] = []
    checked: list[float] = []
    unchecked: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        # spawn re-imports the main module, so the hand loop must be a file, not -c.
        script = Path(tmp) / "hand_loop.py"
        script.write_text(_HAND)
        for i in range(args.repeats):
            base = [sys.executable, "-m", "colbench", "sweep", "--op", "all_reduce", "--sizes",
                    args.sizes, "--nprocs", "2", "--no-table"]  # fmt: skip
            hand.append(timed([sys.executable, str(script), args.sizes]))
            checked.append(timed([*base, "--out", str(Path(tmp) / f"c{i}")]))
            unchecked.append(timed([*base, "-c", "0", "--out", str(Path(tmp) / f"u{i}")]))
    floor = statistics.median(hand)
    print(f"{'figure':<44}{'median s':>10}{'ratio':>8}{'target':>8}  verdict")
    print(f"{'hand-written loop, ' + args.sizes:<44}{floor:>10.2f}")
    failed = 0
    for label, runs in (("colbench sweep (check on)", checked), ("colbench sweep -c 0", unchecked)):
        ratio = statistics.median(runs) / floor
        ok = ratio <= TARGET
        failed += not ok
        verdict = "PASS" if ok else "FAIL"
        print(f"{label:<44}{statistics.median(runs):>10.2f}{ratio:>8.2f}{TARGET:>8.1f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
