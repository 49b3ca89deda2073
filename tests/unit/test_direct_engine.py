"""The direct NCCL engine's pieces without a process group: --engine, the refusals, the
variant axis, each op's direct call as bound (through the recording nccl4py of
tests/fakenccl), the graph timer's stream, the torch tax and what meta.json records.
The engine over real ranks: tests/dist/test_direct_engine.py."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import torch

from colbench.bench.cuda_timing import CudaGraphTimer
from colbench.bench.ops import BY_NAME
from colbench.bench.ops.base import Context
from colbench.bench.ops.data import DTYPES
from colbench.bench.timing import make_timer
from colbench.commands.compare.pairs import compare_runs
from colbench.config.model import parse_engines
from colbench.config.validate import engine_refusal
from colbench.config.variants import expand
from colbench.direct.engine import DirectEngine
from colbench.direct.nccl4py import DirectComm, Nccl, missing
from colbench.errors import UsageError
from colbench.results.join import nccl_dominates_from, taxes, torch_tax_lines, without_engine
from colbench.results.rows import load
from colbench.results.rundir import torch_per_call
from tests.conftest import run_main
from tests.unit.rows import row, write_run

STREAM = 0x5EED


def test_engines_parse_in_order_and_refuse_the_unknown() -> None:
    assert parse_engines("torch") == ("torch",)
    assert parse_engines("nccl, torch") == ("nccl", "torch")
    for bad in ("mpi", "torch,torch", ""):
        with pytest.raises(UsageError, match="--engine"):
            parse_engines(bad)


def test_the_direct_engine_is_refused_on_gloo_and_without_nccl4py(fake_nccl: Any) -> None:
    assert engine_refusal(("torch",), "gloo") is None
    why = engine_refusal(("torch", "nccl"), "gloo")
    assert why is not None and "backend is gloo" in why and "\n" not in why
    assert engine_refusal(("nccl",), "nccl") is None  # the fake is importable


def test_a_missing_nccl4py_names_the_extra() -> None:
    # This machine has no nccl4py (the fake is on the path only inside fake_nccl).
    assert missing() == (
        "--engine nccl needs nccl4py, which is not installed: pip install 'colbench[nccl]'"
    )
    assert engine_refusal(("nccl",), "nccl") == missing()


def test_engine_nccl_on_a_cpu_machine_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_main(
        capsys, "sweep", "--engine", "torch,nccl", "--backend", "gloo", "--nprocs", "1",
        "--sizes", "1K", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 2
    assert err.strip().splitlines() == [
        "colbench: error: --engine nccl calls NCCL on GPUs, and this run's backend is gloo: "
        "use --engine torch (the default) here"
    ]
    assert not (tmp_path / "run" / "results.csv").exists()


def test_two_engines_are_a_variant_axis_and_one_is_none() -> None:
    names = [v.name for v in expand((("NCCL_ALGO", ("Ring", "Tree")),), engines=("torch", "nccl"))]
    assert names == [
        "NCCL_ALGO=Ring,engine=torch",
        "NCCL_ALGO=Ring,engine=nccl",
        "NCCL_ALGO=Tree,engine=torch",
        "NCCL_ALGO=Tree,engine=nccl",
    ]
    assert [v.name for v in expand((), engines=("nccl",))] == [""]
    assert without_engine("NCCL_ALGO=Ring,engine=nccl") == "NCCL_ALGO=Ring"
    assert without_engine("engine=torch") == ""


def _comm(nccl: Any, version: int = 22809) -> DirectComm:
    raw = nccl.bindings.nccl
    return DirectComm(raw, "COMM", STREAM, version, 0, 4, nccl.core.NcclDataType,
                      nccl.core.NcclRedOp)  # fmt: skip


def _bound(nccl: Any, op: str, in_place: bool, comm: DirectComm) -> tuple[Any, Any]:
    coll = BY_NAME[op]
    ctx = Context(rank=1, world_size=4, root=0, dtype=DTYPES["bfloat16"], redop="max",
                  seed=0, device=torch.device("cpu"))  # fmt: skip
    layout = coll.layout(4096, 2, 4)
    engine = DirectEngine(Nccl(nccl), None, comm)
    bufs = coll.views(engine.allocate(coll, layout, ctx, in_place), layout, ctx, in_place)
    return engine.bind(coll, bufs, ctx), bufs


@pytest.mark.parametrize(
    ("op", "in_place", "function"),
    [
        ("all_reduce", True, "all_reduce"),
        ("all_gather", False, "all_gather"),
        ("all_gather", True, "all_gather"),
        ("reduce_scatter", False, "reduce_scatter"),
        ("broadcast", True, "broadcast"),
        ("reduce", True, "reduce"),
        ("all_to_all", False, "allto_all"),
        ("gather", False, "gather"),
        ("scatter", False, "scatter"),
    ],
)
def test_one_call_is_the_binding_itself_with_every_argument_resolved(
    fake_nccl: Any, op: str, in_place: bool, function: str
) -> None:
    call, bufs = _bound(fake_nccl, op, in_place, _comm(fake_nccl))
    # Nothing of colbench's between the timed loop and NCCL's C call: a partial of the
    # binding over plain integers, the communicator and the engine's stream last.
    assert isinstance(call, functools.partial) and not call.keywords
    assert call.func is getattr(fake_nccl.bindings.nccl, function)
    *numbers, handle, stream = call.args
    assert (handle, stream) == ("COMM", STREAM)
    assert all(type(n) is int for n in numbers)
    assert numbers[:2] == [bufs.send.data_ptr(), bufs.recv.data_ptr()]
    assert numbers[3] == int(fake_nccl.core.NcclDataType.BFLOAT16)
    if in_place:
        # The input is the output buffer, or this rank's slot of it.
        assert bufs.recv.data_ptr() <= numbers[0] < bufs.recv.data_ptr() + 4096


def test_before_nccl_2_28_exchanges_are_grouped_send_recv(
    fake_nccl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    comm = _comm(fake_nccl, version=22703)
    posted: list[tuple[Any, ...]] = []
    raw = fake_nccl.bindings.nccl
    monkeypatch.setattr(raw, "group_start", lambda: posted.append(("start",)))
    monkeypatch.setattr(raw, "group_end", lambda: posted.append(("end",)))
    for name in ("send", "recv"):
        monkeypatch.setattr(raw, name, lambda *a, _n=name: posted.append((_n, *a)))
    call, bufs = _bound(fake_nccl, "all_to_all", False, comm)
    call()
    b, step = bufs.layout.count, bufs.layout.count * 2
    send, recv = bufs.send.data_ptr(), bufs.recv.data_ptr()
    expected = [("start",)]
    for peer in range(4):
        expected += [("send", send + peer * step, b, 9, peer, "COMM", STREAM),
                     ("recv", recv + peer * step, b, 9, peer, "COMM", STREAM)]  # fmt: skip
    assert posted == [*expected, ("end",)]


def test_barrier_has_no_direct_call() -> None:
    assert "no barrier" in (BY_NAME["barrier"].direct_unsupported() or "")
    assert BY_NAME["all_reduce"].direct_unsupported() is None


def test_a_graph_is_captured_on_the_engines_stream() -> None:
    stream = object()
    timer = make_timer("cuda", 5, lambda: None, stream)
    assert isinstance(timer, CudaGraphTimer)
    capture = timer._capture
    assert isinstance(capture, functools.partial) and capture.keywords == {"stream": stream}
    assert capture.func is torch.cuda.graph
    assert timer._replays == 5


def _both(tmp_path: Path, times: dict[int, tuple[float, float]]) -> Path:
    rows = []
    for size, (torch_us, nccl_us) in times.items():
        for engine, t in (("torch", torch_us), ("nccl", nccl_us)):
            rows.append(row("all_gather", size, t, variant=f"engine={engine}", engine=engine))
    return write_run(tmp_path / "run", rows)


def test_the_torch_tax_per_row_pair_and_where_torch_dominates(tmp_path: Path) -> None:
    times = {1024: (50.0, 5.0), 65536: (55.0, 20.0), 1 << 20: (90.0, 60.0), 1 << 24: (800, 790)}
    frame = load(_both(tmp_path, times))
    found = {t.size_bytes: round(t.tax_us, 3) for t in taxes(frame)}
    assert found == {1024: 45.0, 65536: 35.0, 1 << 20: 30.0, 1 << 24: 10.0}
    assert nccl_dominates_from(taxes(frame)) == 1 << 20
    lines = torch_tax_lines(frame, "RUN")
    assert "torch adds +32.50 us per call (median over 4 size(s))" in lines[-2]
    assert lines[-2].endswith("torch's cost dominates below 1M")
    assert (
        lines[-1]
        == "# is it real? colbench gate RUN --variant-a engine=torch --variant-b engine=nccl"
    )


def test_compare_across_the_engines_joins_the_pairs_and_gives_the_tax(tmp_path: Path) -> None:
    run = _both(tmp_path, {1024: (50.0, 5.0), 4096: (52.0, 6.0)})
    comparison = compare_runs(run, run, "time", variant_a="engine=torch", variant_b="engine=nccl")
    assert comparison.table["comparable"].all() and len(comparison.table) == 2
    assert any("torch adds +45.50 us per call" in line for line in comparison.context)


def test_meta_records_torch_settings_that_change_its_cost_per_call() -> None:
    seen = torch_per_call({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "PATH": "/bin"})
    assert seen["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    assert seen["TORCH_NCCL_ENABLE_TIMING"] is None and "PATH" not in seen
    assert set(seen) >= {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_DESYNC_DEBUG",
                         "TORCH_NCCL_BLOCKING_WAIT"}  # fmt: skip


def test_an_empty_buffer_is_never_a_zero_byte_ncclmemalloc(fake_nccl: Any) -> None:
    from nccl import _fake

    before = len(_fake.CALLS)
    empty = Nccl(fake_nccl).empty(0, torch.float32, torch.device("cpu"))
    assert empty.numel() == 0
    assert [c["numel"] for c in _fake.CALLS[before:] if c["call"] == "mem_alloc"] == [1]


def test_an_imported_nccl_tests_log_is_nccls_own_calls(tmp_path: Path) -> None:
    from colbench.importers.nccl_tests import import_log
    from tests.unit import nccl_logs

    log = tmp_path / "all_reduce_perf.log"
    log.write_text(nccl_logs.new_all_reduce_log())
    run_dir, _ = import_log(log, out_dir=tmp_path / "ar")
    # nccl-tests calls NCCL itself: its rows pair with the direct engine's, and against a
    # torch run, compare gives the torch tax.
    assert set(load(run_dir)["engine"]) == {"nccl"}


def test_an_imported_json_report_says_whose_calls_it_timed() -> None:
    from colbench.importers import nccl_tests
    from colbench.importers.nccl_tests_json import _engine

    real = Path(__file__).resolve().parents[1] / "data" / "nccl-tests-json"
    report = next(real.glob("allreduce-t4-*.json")).read_text()
    assert {r.engine for r in nccl_tests.parse_log(report).rows} == {"nccl"}
    # colbench's own report (sweep -J) says its engine on its command line.
    assert _engine({"args": ["colbench", "sweep", "--op", "all_gather"]}) == "torch"
    assert _engine({"args": ["python", "-m", "colbench", "sweep", "--engine", "nccl"]}) == "nccl"
    assert _engine({"args": ["./build/all_reduce_perf", "-b", "8"]}) == "nccl"
