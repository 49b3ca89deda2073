"""The NCCL path's decisions, on CPU: NCCL_ALGO support, --cuda-graph and barrier, the
plan digest, the --debug warning, and what sendrecv builds outside the timed call."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from colbench.bench import ops
from colbench.bench.groups import Groups
from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.ops.base import Collective, Context
from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import RunInfo, plan, plan_digest
from colbench.commands.sweep.lead import measurement_warnings
from colbench.config.model import SweepConfig
from colbench.config.validate import build, validate_for_world
from colbench.errors import UsageError
from colbench.host.job import InFlight
from colbench.nccl.algo import CommFacts
from tests.unit.test_bench_order import FakeSide, FakeTimer, Log, Recorded, Rows

EVERY_SIZED_OP = tuple(op.name for op in ops.REGISTRY if op.sized)


#: A 4-rank communicator of one-GPU nodes (emulated nodes, or 4 real ones): NCCL's rules
#: then leave AllGather Ring, PAT and CollNetDirect (without a CollNet plugin: Ring, PAT).
FOUR_NODES = CommFacts(ranks=4, nodes=4, ranks_per_node=1, nvswitch=False, nvls=False,
                       collnet=False, version=(2, 28, 9), compute_capability=90)  # fmt: skip


def test_tree_rows_are_unsupported_and_call_nothing() -> None:
    cfg = SweepConfig.of(ops=EVERY_SIZED_OP, sizes_bytes=(1024, 4096), iters=2, warmup=1)
    work = plan(cfg, 4, "nccl", env={"NCCL_ALGO": "Tree"}, facts=FOUR_NODES)
    refused = {w.coll.name for w in work if w.unsupported}
    assert refused == {"all_gather", "reduce_scatter", "broadcast", "reduce"}
    # Point-to-point based collectives are not governed by NCCL_ALGO.
    assert {"all_to_all", "gather", "scatter", "sendrecv", "all_reduce"}.isdisjoint(refused)
    reason = next(w.unsupported for w in work if w.coll.name == "all_gather")
    assert "AllGather" in reason and "NCCL_ALGO=Tree" in reason
    # gloo ignores NCCL_ALGO; a world of one never communicates, and NCCL ignores it there;
    # the parent, before any rank says what it found (facts None), judges nothing.
    tree = {"NCCL_ALGO": "Tree"}
    assert not any(w.unsupported for w in plan(cfg, 4, "gloo", env=tree, facts=FOUR_NODES))
    one = CommFacts(ranks=1, nodes=1)
    assert not any(w.unsupported for w in plan(cfg, 1, "nccl", env=tree, facts=one))
    assert not any(w.unsupported for w in plan(cfg, 4, "nccl", env=tree))

    log = Log()
    refused_work = [w for w in work if w.unsupported]
    sink = Rows()
    info = RunInfo("t", "nccl", "gpu", world_size=4, nnodes=1)
    timer = FakeTimer(log, 1.0, None)
    groups = Groups(FakeSide(log))  # type: ignore[arg-type]
    bench = RankBench(
        BenchContext(cfg, info, 0, torch.device("cpu"), timer, groups, InFlight()),
        sink,
    )
    bench.run(refused_work)
    # Nothing is allocated, agreed, timed or gathered for them: the run goes on.
    assert log == []
    assert {r["status"] for r in sink.written} == {"unsupported"}
    assert all(r["time_us"] is None and r["busbw_gbps"] is None for r in sink.written)
    assert len(sink.written) == sum(len(w.layouts) * len(w.placements) for w in refused_work)
    assert any(n.startswith("all_gather float32: unsupported: NCCL 2.28.9 has no algorithm")
               for n in sink.notes), sink.notes  # fmt: skip


def test_an_explicit_barrier_under_cuda_graph_is_refused() -> None:
    common: dict[str, Any] = {"sizes": (1024,), "dtype": "float32", "redop": "sum"}
    with pytest.raises(UsageError, match="--cuda-graph cannot capture barrier"):
        build(op="all_reduce,barrier", cuda_graph=True, **common)
    # Without --cuda-graph, or with the whole set of ops, it is accepted.
    build(op="barrier", **common)
    cfg = build(op="all", cuda_graph=True, **common)
    notes = validate_for_world(cfg, 2, "nccl")
    assert "skipping barrier: a CUDA graph cannot capture it (--cuda-graph)" in notes
    assert "barrier" not in {w.coll.name for w in plan(cfg, 2, "nccl", env={})}
    no_graph = cfg.replace(cuda_graph=False)
    assert "barrier" in {w.coll.name for w in plan(no_graph, 2, "nccl", env={})}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_budget_s", 0.5),
        ("memory_check", "off"),
        ("memory_check", "refuse"),
        ("cuda_graph", True),
        ("rotate", 2),
        ("repeat", 2),
        ("iters", 7),
    ],
)
def test_the_digest_covers_every_option_that_changes_the_collectives(
    field: str, value: object
) -> None:
    base = SweepConfig.of(sizes_bytes=(1024,))
    other = base.replace(**{field: value})
    assert plan_digest(base, plan(base, 2, "gloo")) != plan_digest(other, plan(other, 2, "gloo"))


@pytest.mark.parametrize(
    ("field", "value"),
    [("out_dir", "/tmp/x"), ("table", False), ("timeout_s", 9.0), ("progress", True)],
)
def test_the_digest_ignores_what_only_changes_output_or_waiting(field: str, value: object) -> None:
    base = SweepConfig.of(sizes_bytes=(1024,))
    other = base.replace(**{field: value})
    assert plan_digest(base, plan(base, 2, "gloo")) == plan_digest(other, plan(other, 2, "gloo"))


def test_debug_says_it_changes_timings() -> None:
    cfg = SweepConfig.of(sizes_bytes=(1024,), debug=True)
    (warning,) = measurement_warnings(cfg, "nccl")
    assert warning.startswith("--debug: torch's NCCL flight recorder")
    assert measurement_warnings(cfg, "gloo") == []
    assert measurement_warnings(cfg.replace(debug=False), "nccl") == []


def test_sendrecv_builds_its_p2p_ops_when_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    log: list[tuple[str, Any]] = []

    class P2POp:
        def __init__(self, op: Any, tensor: Any, peer: int, group: Any = None) -> None:
            log.append(("P2POp", (op.__name__, peer)))

    class Work:
        def wait(self) -> None:
            log.append(("wait", None))

    def batch_isend_irecv(p2p_ops: list[Any]) -> list[Work]:
        log.append(("batch", id(p2p_ops)))
        return [Work(), Work()]

    monkeypatch.setattr(dist, "P2POp", P2POp)
    monkeypatch.setattr(dist, "batch_isend_irecv", batch_isend_irecv)
    coll = ops.get("sendrecv")
    ctx = Context(1, 4, 0, DTYPES["float32"], "none", 0, torch.device("cpu"))
    layout = coll.layout(64, 4, 4)
    storage = coll.allocate(layout, ctx, False)
    call = coll.bind(coll.views(storage, layout, ctx, False), ctx)
    assert log == [("P2POp", ("isend", 2)), ("P2POp", ("irecv", 0))]
    log.clear()
    call()
    call()
    # The timed call only posts the same prepared list and waits.
    batches = [entry for entry in log if entry[0] == "batch"]
    assert len(batches) == 2 and batches[0][1] == batches[1][1]
    assert [name for name, _ in log] == ["batch", "wait", "wait", "batch", "wait", "wait"]


class HostBlocking(Recorded):
    """A recorded op that blocks the host, as torch's barrier does on NCCL."""

    name = "barrier"
    blocks_host = True


def _bench_on_nccl(
    op: Collective, log: Log, warmup: int, cuda_timer: FakeTimer, host_timer: FakeTimer
) -> Rows:
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=3, warmup=warmup)
    work = [w.__class__(**{**w.__dict__, "coll": op}) for w in plan(cfg, 1, "gloo")]
    sink = Rows()
    info = RunInfo("t", "nccl", "gpu", world_size=2, nnodes=1)
    groups = Groups(FakeSide(log))  # type: ignore[arg-type]
    bench = RankBench(
        BenchContext(cfg, info, 0, torch.device("cpu"), cuda_timer, groups, InFlight()),
        sink,
        host_timer=host_timer,
    )
    bench.run(work)
    return sink


def test_a_host_blocking_op_is_timed_by_the_host_clock() -> None:
    """CUDA events around torch's NCCL barrier (which waits on the device inside the call)
    would time a stream synchronisation and a relaunch: failed on main, which timed every
    op with the device timer."""
    cuda_log, host_log = Log(), Log()
    cuda, host = FakeTimer(cuda_log, 5.0, 1.0), FakeTimer(host_log, 40.0, None)
    rows = _bench_on_nccl(HostBlocking(Log()), Log(), 1, cuda, host)
    assert host_log.count("timer.time_batch(3)") == 1
    assert "timer.time_batch(3)" not in cuda_log
    (row,) = rows.written
    assert row["time_us"] == 40.0 and row["enqueue_us"] is None
    # Other ops keep the device timer.
    cuda_log.clear(), host_log.clear()
    rows = _bench_on_nccl(Recorded(Log()), Log(), 1, cuda, host)
    assert "timer.time_batch(3)" in cuda_log and host_log == []


def test_barrier_blocks_the_host_and_follows_nccl_algo_as_all_reduce() -> None:
    barrier = ops.get("barrier")
    assert barrier.blocks_host and not ops.get("all_reduce").blocks_host
    cfg = SweepConfig.of(ops=("barrier", "all_reduce"), sizes_bytes=(1024,), dtypes=("int8",))
    # NCCL's barrier is a one-element float32 all_reduce: an NCCL_ALGO that leaves
    # all_reduce no algorithm leaves barrier none either (main never checked it).
    pat = {"NCCL_ALGO": "allreduce:pat"}
    work = {w.coll.name: w.unsupported for w in plan(cfg, 4, "nccl", env=pat, facts=FOUR_NODES)}
    assert work["barrier"] and work["all_reduce"]
    assert "AllReduce float32" in work["barrier"]  # its own call's type, not the sweep's
    assert not any(w.unsupported for w in plan(cfg, 4, "nccl", env={}, facts=FOUR_NODES))


@pytest.mark.parametrize(("backend", "warmup", "calls"), [("nccl", 0, 1), ("nccl", 2, 2),
                                                           ("gloo", 0, 0)])  # fmt: skip
def test_nccl_never_times_a_first_call(backend: str, warmup: int, calls: int) -> None:
    """NCCL connects peers on a communicator's first call: with --warmup 0 main timed
    that set-up (and under -G captured it)."""
    log = Log()
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), iters=3, warmup=warmup)
    work = [w.__class__(**{**w.__dict__, "coll": Recorded(log)}) for w in plan(cfg, 1, "gloo")]
    sink = Rows()
    info = RunInfo("t", backend, "gpu", world_size=2, nnodes=1)
    timer = FakeTimer(log, 5.0, None)
    groups = Groups(FakeSide(log))  # type: ignore[arg-type]
    RankBench(
        BenchContext(cfg, info, 0, torch.device("cpu"), timer, groups, InFlight()),
        sink,
    ).run(work)
    before = log[: log.index("timer.time_batch(3)")]
    assert before.count("op.call") == calls
    assert [row["warmup"] for row in sink.written] == [calls]


class GatheringSide:
    """A side group whose gather returns what four ranks would have said."""

    def __init__(self, said: list[tuple[str, int, tuple[int, int, int]]]) -> None:
        self.said = said
        self.asked: list[object] = []

    def gather_objects(self, mine: object) -> list[object]:
        self.asked.append(mine)
        return list(self.said)


def test_the_ranks_agree_on_nccls_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank says its NCCL host identity, GPU generation and NCCL version; the plan's
    facts count NCCL's nodes (emulated ones included) for the measured group."""
    from colbench.bench.plan import nccl_facts

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 28, 9))
    monkeypatch.setenv("NCCL_HOSTID", "h-rank0")
    v = (2, 28, 9)
    side = GatheringSide([("h-rank0", 90, v), ("h-rank1", 90, v), ("h-rank2", 80, v),
                          ("h-rank3", 90, v)])  # fmt: skip
    facts = nccl_facts(side, torch.device("cpu"), (0, 1, 2, 3))  # type: ignore[arg-type]
    assert side.asked == [("h-rank0", 90, v)]
    assert facts == CommFacts(ranks=4, nodes=4, ranks_per_node=1, version=v,
                              compute_capability=80)  # fmt: skip
    # --group-size 2: the first group's two ranks on one real node.
    side = GatheringSide([("node1", 90, v)] * 2 + [("node2", 90, v)] * 2)
    facts = nccl_facts(side, torch.device("cpu"), (0, 1))  # type: ignore[arg-type]
    assert (facts.ranks, facts.nodes, facts.ranks_per_node) == (2, 1, 2)
    # --split mod:2: the first group is ranks 0 and 2, one per node (a rail).
    side = GatheringSide([("node1", 90, v)] * 2 + [("node2", 90, v)] * 2)
    facts = nccl_facts(side, torch.device("cpu"), (0, 2))  # type: ignore[arg-type]
    assert (facts.ranks, facts.nodes, facts.ranks_per_node) == (2, 2, 1)
