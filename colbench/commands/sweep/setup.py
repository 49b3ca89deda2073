"""``sweep --init-only``: communicator set-up, timed in every rank, as init.csv's rows.

Each repeat makes a fresh communicator of every rank and throws it away, the way each
engine makes the one it measures through:

- torch: ``dist.new_group``, then one call on it (a one-element all_reduce, waited for):
  torch starts NCCL's communicator lazily, in the first call (gloo's connects in
  ``new_group``), so set-up is both parts.
- nccl (the direct engine): :meth:`DirectEngine.create`, whose ``ncclCommInitRank``
  returns with the communicator ready: there is no first call to time.

Every rank starts together (a barrier of the side group) and times its own part; the
device memory taken is the free memory before minus after (cudaMemGetInfo: NCCL's own
memory statistics exist only from 2.30), the probe buffer allocated before.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from colbench.bench.groups import SideGroup
from colbench.direct.engine import DIRECT, DirectEngine
from colbench.results.init_rows import InitRow


@dataclass(frozen=True)
class SetupSample:
    """One rank's view of one set-up."""

    create_us: float
    #: torch's first call on the new group; None for the direct engine.
    first_call_us: float | None
    #: Free device memory before minus after; None without a GPU.
    device_mem_bytes: int | None

    @property
    def total_us(self) -> float:
        return self.create_us + (self.first_call_us or 0.0)


def measure_setups(
    engine: str, side: SideGroup, rank: int, world_size: int, device: Any, repeats: int
) -> list[list[SetupSample]]:
    """Every rank's samples of ``repeats`` set-ups: [repeat][rank], on every rank."""
    mine = [_one(engine, side, rank, world_size, device) for _ in range(repeats)]
    every = side.gather_objects(mine)
    return [[every[r][k] for r in range(world_size)] for k in range(repeats)]


def _one(engine: str, side: SideGroup, rank: int, world_size: int, device: Any) -> SetupSample:
    import torch
    import torch.distributed as dist

    ranks = list(range(world_size))
    if engine == DIRECT:
        side.barrier()
        before = _free_bytes(device)
        start = time.perf_counter()
        made = DirectEngine.create(side, rank, ranks)
        created = time.perf_counter()
        after = _free_bytes(device)
        made.close()
        return SetupSample((created - start) * 1e6, None, _taken(before, after))
    probe = torch.ones(1, device=device)
    _synchronize(device)
    side.barrier()
    before = _free_bytes(device)
    start = time.perf_counter()
    group = dist.new_group(ranks=ranks)
    created = time.perf_counter()
    dist.all_reduce(probe, group=group)
    _synchronize(device)
    called = time.perf_counter()
    after = _free_bytes(device)
    dist.destroy_process_group(group)
    return SetupSample((created - start) * 1e6, (called - created) * 1e6, _taken(before, after))


def _free_bytes(device: Any) -> int | None:
    if device.type != "cuda":
        return None
    import torch

    return int(torch.cuda.mem_get_info(device)[0])


def _taken(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else before - after


def _synchronize(device: Any) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


#: The run's facts (colbench.bench.plan.RunInfo) that init.csv's rows repeat as they are.
RUN_KEYS = ("run_id", "variant", "backend", "engine", "world_size", "nnodes", "ranks_per_gpu")


def setup_rows(samples: Sequence[Sequence[SetupSample]], info: Any) -> list[InitRow]:
    """init.csv's rows of the gathered samples; ``info``: the run's RunInfo."""
    rows = []
    for repeat, per_rank in enumerate(samples):
        totals = [s.total_us for s in per_rank]
        slowest = max(range(len(totals)), key=totals.__getitem__)
        first_calls = [s.first_call_us for s in per_rank if s.first_call_us is not None]
        memory = [s.device_mem_bytes for s in per_rank if s.device_mem_bytes is not None]
        rows.append(
            InitRow(
                **{key: getattr(info, key) for key in RUN_KEYS},
                device=info.device_name,
                repeat=repeat,
                init_us=totals[slowest],
                init_ranks_avg_us=sum(totals) / len(totals),
                create_us=max(s.create_us for s in per_rank),
                first_call_us=max(first_calls) if first_calls else None,
                slowest_rank=slowest,
                device_mem_bytes=max(memory) if memory else None,
            )
        )
    return rows


def table_lines(frame: Any) -> list[str]:
    """init.csv as the console shows it: one line per set-up."""
    from colbench import text

    columns = [
        text.Column("engine", 7, "<"), text.Column("backend", 7, "<"), text.Column("ranks", 6),
        text.Column("nodes", 6), text.Column("repeat", 6), text.Column("init_us", 11),
        text.Column("create_us", 11), text.Column("first_call_us", 13),
        text.Column("device_MiB", 10),
    ]  # fmt: skip
    lines = [text.header(columns, lead="# ")]
    for row in frame.to_dict("records"):
        mem = row["device_mem_bytes"]
        first = row["first_call_us"]
        cells = (
            row["engine"], row["backend"], row["world_size"], row["nnodes"], row["repeat"],
            f"{row['init_us']:.1f}", f"{row['create_us']:.1f}",
            "-" if first is None or first != first else f"{first:.1f}",
            "-" if mem is None or mem != mem else f"{mem / 2**20:.1f}",
        )  # fmt: skip
        lines.append(text.line(cells, columns, lead="  "))
    return lines
