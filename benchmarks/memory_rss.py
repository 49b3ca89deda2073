"""Memory: peak RSS per rank against the bytes the buffers need, at 2 ranks.

Each rank runs colbench's real per-rank loop (RankBench) for one op at the largest size
and reads its own peak RSS (VmHWM) before and after. The figure is
(peak - baseline) / buffer bytes, where baseline is the rank's RSS after joining the
process group (torch's own) and buffer bytes are what colbench.bench.memory says the op needs.

Target (issue #6): <= 1.15 for all_reduce and all_gather up to 1 GiB.

    python benchmarks/memory_rss.py [--size 1G]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.memory import buffer_bytes
from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import RunInfo, plan
from colbench.config.model import SweepConfig
from colbench.config.sizes import parse_size
from colbench.host.child import share_cpu_threads
from colbench.host.launchers.rendezvous import free_port

TARGET = 1.15


def vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


class _Quiet:
    def rows(self, coll: Any, rows: Any) -> None:
        pass

    def note(self, message: str) -> None:
        pass


def _rank(rank: int, port: int, op: str, size_bytes: int, out: Any) -> None:
    store = dist.TCPStore(
        "127.0.0.1", port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=600)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    share_cpu_threads(2)  # what colbench's own ranks do
    dist.barrier()
    baseline = vm_hwm_bytes()
    cfg = SweepConfig.of(ops=(op,), sizes_bytes=(size_bytes,), iters=2, warmup=1)
    work = plan(cfg, 2, "gloo")
    info = RunInfo("bench", "gloo", "cpu", 2, 1)
    RankBench(BenchContext.on_cpu(cfg, info, rank), _Quiet()).run(work)
    item = work[0]
    # The buffers alone: the plan's figure less its verification scratch (the figure
    # for elements of no bytes).
    need = buffer_bytes(item.coll, item.layouts[-1], DTYPES["float32"].elem_bytes, item.placements)
    need -= buffer_bytes(item.coll, item.layouts[-1], 0, item.placements)
    if rank == 0:
        out.put((baseline, vm_hwm_bytes(), need))
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G")
    args = parser.parse_args()
    size_bytes = parse_size(args.size)
    print(f"{'op':<14}{'buffers MiB':>12}{'peak-base MiB':>15}{'ratio':>8}{'target':>8}  verdict")
    failed = 0
    for op in ("all_reduce", "all_gather"):
        queue = mp.get_context("spawn").SimpleQueue()
        mp.start_processes(
            _rank, args=(free_port(), op, size_bytes, queue), nprocs=2, start_method="spawn"
        )
        baseline, peak, need = queue.get()
        ratio = (peak - baseline) / need
        ok = ratio <= TARGET
        failed += not ok
        verdict = "PASS" if ok else "FAIL"
        grown_mib = (peak - baseline) / 2**20
        print(
            f"{op:<14}{need / 2**20:>12.0f}{grown_mib:>15.0f}{ratio:>8.3f}{TARGET:>8.2f}  {verdict}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
