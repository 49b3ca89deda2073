"""``--contend``: the load's spelling, its variants, and where and when the load runs.

The GPU path is checked with recording fakes (this machine has no GPU): a stream that
logs where it was entered, and torch.cuda's Stream/stream replaced by recorders, so the
tests see the load queued on a stream of its own in a thread of its own, started after
the world's turn began and stopped before the turn passed on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from colbench.bench import load as load_module
from colbench.bench.groups import Groups
from colbench.bench.load import GemmLoad, SideStream, row_cells
from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.plan import RunInfo, plan
from colbench.config.contend import LoadSpec, parse_contend
from colbench.config.model import SweepConfig
from colbench.config.variants import expand
from colbench.host.job import InFlight
from tests.unit.test_bench_order import FakeSide, FakeStore, FakeTimer, Log, Recorded, Rows


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("gemm:512", "gemm:512:float32"),
        (" GEMM:64:bf16 ", "gemm:64:bfloat16"),
        ("all_to_all:1M", "all_to_all:1M:float32"),
        ("allreduce:65536:half", "all_reduce:64K:float16"),
        ("all_gather:1536", "all_gather:1536:float32"),
    ],
)
def test_every_spelling_has_one_label(text: str, label: str) -> None:
    spec = parse_contend(text)
    assert spec.label == label
    assert parse_contend(spec.label) == spec


def test_the_variants_are_without_and_with_the_load_for_every_env_combination() -> None:
    names = [v.name for v in expand((("NCCL_ALGO", ("Ring", "Tree")),), (), "gemm:8:float32")]
    assert names == [
        "NCCL_ALGO=Ring,contend=none",
        "NCCL_ALGO=Ring,contend=gemm:8:float32",
        "NCCL_ALGO=Tree,contend=none",
        "NCCL_ALGO=Tree,contend=gemm:8:float32",
    ]
    assert [v.loaded for v in expand((), (), "gemm:8:float32")] == [False, True]
    assert [v.name for v in expand(())] == [""]


class RecordingStream:
    """A side stream that logs where it is entered and counts synchronisations."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.syncs = 0

    @contextmanager
    def active(self) -> Iterator[None]:
        self.log.append(f"stream entered in {threading.current_thread().name}")
        yield
        self.log.append("stream left")

    def synchronize(self) -> None:
        self.syncs += 1


def test_a_gemm_load_runs_in_its_own_thread_on_its_stream_and_counts_products() -> None:
    log = Log()
    stream = RecordingStream(log)
    load = GemmLoad(LoadSpec("gemm", n=32), torch.device("cpu"), stream)
    rate = load.alone(0.01)
    assert log == ["stream entered in colbench-load", "stream left"]
    # A step is one product on the CPU, synchronised before it is counted.
    assert stream.syncs >= 1
    assert load._steps == stream.syncs
    assert rate == pytest.approx(2 * 32**3 * load._steps / load._elapsed_s / 1e12)


def test_on_a_gpu_the_load_asks_for_a_cuda_stream_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[str, Any]] = []

    class FakeCudaStream:
        def __init__(self, device: Any) -> None:
            asked.append(("Stream", device))

        def synchronize(self) -> None:
            asked.append(("synchronize", self))

    @contextmanager
    def stream(chosen: Any) -> Iterator[None]:
        asked.append(("stream", chosen))
        yield

    monkeypatch.setattr(torch.cuda, "Stream", FakeCudaStream)
    monkeypatch.setattr(torch.cuda, "stream", stream)
    side = SideStream(torch.device("cuda", 1))
    assert asked == [("Stream", torch.device("cuda", 1))]
    with side.active():
        side.synchronize()
    assert asked[1:] == [("stream", side.stream), ("synchronize", side.stream)]
    # On the CPU there is no stream: the load's thread is its own.
    assert SideStream(torch.device("cpu")).stream is None


class FakeTurns:
    """An interleaved run's turns, logged."""

    def __init__(self, log: Log) -> None:
        self.log = log

    @contextmanager
    def turn(self, in_flight: Any) -> Iterator[bool]:
        self.log.append("turn begins")
        yield True
        self.log.append("turn passes")


def test_the_load_runs_only_in_its_worlds_turn_through_the_timed_batch() -> None:
    log = Log()
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=2, warmup=1)
    op = Recorded(log)
    work = [w.__class__(**{**w.__dict__, "coll": op}) for w in plan(cfg, 1, "gloo")]
    stream = RecordingStream(log)
    load = GemmLoad(LoadSpec("gemm", n=16), torch.device("cpu"), stream)
    info = RunInfo("t", "gloo", "cpu", world_size=1, nnodes=1, load="gemm:16:float32")
    context = BenchContext(
        cfg, info, 0, torch.device("cpu"), FakeTimer(log, 10.0, None),
        Groups(FakeSide(log)),  # type: ignore[arg-type]
        InFlight(store=FakeStore(log)), turns=FakeTurns(log), load=load,
    )  # fmt: skip
    sink = Rows()
    RankBench(context, sink).run(work)
    assert log == [
        "turn begins",
        "store.set allocation", "side.min_int(1)",
        # The load alone, then beside the collective from its fill to its timed batch.
        "store.set the load alone", "stream entered in colbench-load", "stream left",
        "store.set starting the load", "stream entered in colbench-load",
        "store.set fill", "op.fill", "store.set warm-up", "op.call", "timer.synchronize",
        "store.set timed batch", "side.barrier", "timer.time_batch(2)", "op.call", "op.call",
        "store.set combining times", "side.gather_floats(5)",
        "store.set stopping the load", "stream left",
        "store.set verification", "op.fill", "timer.run_once", "op.call",
        "timer.synchronize", "op.count_wrong", "side.sum_int(0)",
        # Both rates of every rank, for the row.
        "side.gather_floats(2)",
        "turn passes",
    ]  # fmt: skip
    (row,) = sink.written
    assert row.load == "gemm:16:float32"
    assert row.load_alone_tflops > 0 and row.load_beside_tflops > 0
    assert row.load_alone_busbw_gbps is None and row.load_beside_busbw_gbps is None


def test_row_cells_are_the_mean_ranks_rates_in_the_loads_own_unit() -> None:
    gemm, coll = parse_contend("gemm:8"), parse_contend("all_to_all:1M")
    assert row_cells(gemm, [[1.0, 0.5], [3.0, 1.5]]) == {
        "load_alone_tflops": 2.0, "load_beside_tflops": 1.0,
        "load_alone_busbw_gbps": None, "load_beside_busbw_gbps": None,
    }  # fmt: skip
    cells = row_cells(coll, [[4.0, 2.0], [4.0, 1.0]])
    assert (cells["load_alone_busbw_gbps"], cells["load_beside_busbw_gbps"]) == (4.0, 1.5)
    assert cells["load_alone_tflops"] is None
    assert set(row_cells(None, None).values()) == {None}


def test_a_failing_load_fails_the_rank_that_stops_it() -> None:
    class Broken(load_module.Load):
        def _step(self) -> None:
            raise RuntimeError("the load's GPU fell off the bus")

        def rate(self, steps: int, elapsed_s: float) -> float:
            return 0.0

    broken = Broken(LoadSpec("gemm", n=1), SideStream(torch.device("cpu")))
    with pytest.raises(RuntimeError, match="fell off the bus"):
        broken.alone(0.0)


def test_a_loaded_world_takes_its_unloaded_twins_nccl_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from colbench.commands.sweep import probe

    probed: list[str] = []

    def run_probe(cfg: Any, world_size: int, run_dir: Any, variant: Any, index: int) -> Any:
        probed.append(variant.name if variant else "")
        return probe.Probed({("AllReduce", 1024): ("Ring", "LL")}, f"probe {index}")

    monkeypatch.setattr(probe, "run_probe", run_probe)
    cfg = SweepConfig.of(sizes_bytes=(1024,), backend="nccl")
    variants = expand((("NCCL_ALGO", ("Ring", "Tree")),), (), "gemm:8:float32")
    found = probe.probe_variants(cfg, "nccl", 2, tmp_path, variants)
    # One probe world per environment: the load does not change what NCCL chooses.
    assert probed == ["NCCL_ALGO=Ring,contend=none", "NCCL_ALGO=Tree,contend=none"]
    assert found["NCCL_ALGO=Tree,contend=gemm:8:float32"].note == "probe 2"
    assert list(found) == [v.name for v in variants]
