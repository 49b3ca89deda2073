"""Verification catches a corrupted result: real ranks, a real collective, one bad element."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

import pandas as pd
import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.ops import BY_NAME
from colbench.bench.ops.base import Buffers, Collective, Context
from colbench.bench.plan import RunInfo, plan
from colbench.config.model import SweepConfig
from colbench.host.launchers.rendezvous import free_port
from colbench.results.rows import RESULTS, load
from colbench.results.tables import TableWriter
from tests.corrupting import Corrupting

CORRUPT_RANK = 1


def _on_checked_element(coll: Collective, bufs: Buffers, ctx: Context) -> bool:
    """The element a rank checks: its own output (the root's for rooted ops)."""
    return ctx.rank == (ctx.root if coll.rooted else CORRUPT_RANK)


def _rank(rank: int, op_names: tuple[str, ...], port: int, csv_path: str) -> None:
    store = dist.TCPStore(
        "127.0.0.1", port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=60)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    try:
        cfg = SweepConfig.of(ops=op_names, sizes_bytes=(4096,), iters=2, warmup=1)
        work = [
            dataclasses.replace(w, coll=Corrupting(w.coll, _on_checked_element))
            for w in plan(cfg, 2, "gloo")
        ]
        info = RunInfo("inject", "gloo", "cpu", 2, 1)
        sink = None
        writer = TableWriter(Path(csv_path), RESULTS) if rank == 0 else None
        if writer is not None:

            class Sink:
                def rows(self, coll, rows):
                    for row in rows:
                        writer.write(row)

                def note(self, message):
                    pass

            sink = Sink()
        RankBench(BenchContext.on_cpu(cfg, info, rank), sink).run(work)
        if writer is not None:
            writer.close()
    finally:
        dist.destroy_process_group()


OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "gather", "sendrecv")


@pytest.fixture(scope="module")
def corrupted_rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """One 2-rank job over every op (spawning ranks costs seconds; each op's rows are
    its own: fresh buffers, its own check)."""
    csv_path = tmp_path_factory.mktemp("verify") / "results.csv"
    mp.start_processes(
        _rank, args=(OPS, free_port(), str(csv_path)), nprocs=2, start_method="spawn"
    )
    return load(csv_path)


@pytest.mark.parametrize("op_name", OPS)
def test_one_corrupted_element_is_counted(corrupted_rows: pd.DataFrame, op_name: str) -> None:
    frame = corrupted_rows[corrupted_rows["op"] == op_name]
    assert len(frame) == len(BY_NAME[op_name].placements)
    assert (frame["wrong"] == 1).all(), frame[["op", "in_place", "wrong"]]
