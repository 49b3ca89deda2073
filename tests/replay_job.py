"""A small gloo job for tests/dist/test_replay.py: one rank (RANK, WORLD_SIZE, MASTER_*
from the environment) makes a known set of collectives under the torch profiler for
STEPS steps and writes its trace to argv[1]. The test states what the set is."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 2


def step(rank: int) -> None:
    f32, bf16, f64 = torch.float32, torch.bfloat16, torch.float64
    for _ in range(3):
        dist.all_reduce(torch.ones(1024, dtype=f32))
    for _ in range(2):
        dist.all_reduce(torch.ones(64, dtype=bf16))
    dist.all_gather_into_tensor(torch.empty(1024), torch.ones(512))
    dist.all_gather([torch.empty(128, dtype=f64) for _ in range(2)], torch.ones(128, dtype=f64))
    for _ in range(2):
        dist.reduce_scatter_tensor(torch.empty(1024), torch.ones(2048))
    dist.broadcast(torch.ones(100, dtype=torch.int64), src=0)
    dist.all_to_all_single(torch.empty(1024), torch.ones(1024))
    dist.reduce(torch.ones(256, dtype=torch.float16), dst=0)
    dist.barrier()
    # Uneven: rank 0 sends 4 elements to itself and 12 to rank 1, rank 1 sends 8 and 20.
    sent = [[4, 12], [8, 20]]
    got = [sent[0][rank], sent[1][rank]]
    dist.all_to_all_single(torch.empty(sum(got)), torch.ones(sum(sent[rank])), got, sent[rank])
    if rank == 0:
        dist.send(torch.ones(16, dtype=torch.int32), dst=1)
    else:
        dist.recv(torch.empty(16, dtype=torch.int32), src=0)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # A schedule makes the profiler mark each step (ProfilerStep#N), as in a training loop;
    # kineto wants a warm-up step before the recorded ones.
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=STEPS),
        on_trace_ready=lambda done: done.export_chrome_trace(sys.argv[1]),
    ) as prof:
        for _ in range(1 + STEPS):  # a warm-up step the profiler does not record, then STEPS
            step(rank)
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
