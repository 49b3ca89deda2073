"""What runs between the side group's barrier and the timed batch's first timestamp.

colbench.bench.timing.wait_in passes the barrier, reads each barrier thread's schedstat run
delay (to take the rank's own CPU starvation out of its wait), then runs the batch.
Whatever runs in between delays the batch's start after the ranks were aligned, by a
different amount in each rank. This script measures that gap in one real process: a
gloo world of one with colbench's side group (and --groups more gloo groups, as
--group-size makes), so the threads read are the real ones; the barrier returns at
once, so the figures are the harness's own cost.

Printed: the threads on the barrier's path, the gap (barrier return -> the batch's
first instruction) and the snapshot taken before the barrier, median / p90 / p99 in us.
For comparison, before the schedstat files were kept open (main at 68e919d) the gap
was a full snapshot: list the threads, open and read each file. Measured on the 2-core
development machine (7 threads, under flock, 2500 rounds, two runs each): 112 us
median, p99 175 us before; 11 us median, p99 20 us after (18 us with 13 threads).

    python benchmarks/barrier_gap.py [--rounds 3000] [--groups 0]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import torch.distributed as dist

from colbench.bench.groups import SideGroup
from colbench.bench.timing import BarrierThreads, thread_run_delays_ns, wait_in
from colbench.host.launchers.rendezvous import free_port


def _figures(samples_us: list[float]) -> str:
    cuts = statistics.quantiles(samples_us, n=100)
    return f"median {statistics.median(samples_us):7.1f}  p90 {cuts[89]:7.1f}  p99 {cuts[98]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--groups", type=int, default=0, help="extra gloo groups (threads)")
    args = parser.parse_args()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    side = SideGroup.create(1, 60.0)
    timeout = datetime.timedelta(seconds=60)
    extra = [dist.new_group(backend="gloo", timeout=timeout) for _ in range(args.groups)]
    # gloo starts a group's threads on its first use: the measured group's, the side's.
    for group in [None, *extra]:
        dist.barrier(group=group)
    side.barrier()
    threads = BarrierThreads()
    marks: dict[str, int] = {}

    def barrier() -> None:
        side.barrier()
        marks["returned"] = time.perf_counter_ns()

    def batch() -> None:
        marks["batch"] = time.perf_counter_ns()

    gaps_us, before_us = [], []
    for _ in range(args.rounds):
        wait_in(barrier, batch, threads)
        gaps_us.append((marks["batch"] - marks["returned"]) / 1e3)
        started = time.perf_counter_ns()
        thread_run_delays_ns(threads)
        before_us.append((time.perf_counter_ns() - started) / 1e3)
    on_path = len(thread_run_delays_ns(threads) or {})
    dist.destroy_process_group()
    print(f"threads on the barrier's path: {on_path} ({args.groups} extra gloo groups)")
    print(f"barrier return -> batch, us     {_figures(gaps_us)}")
    print(f"snapshot before the barrier, us {_figures(before_us)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
