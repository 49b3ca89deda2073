"""NCCL's newer knobs without a process group (issue 37 item 4): --register (nccl-tests'
-R) and --cta-policy (-x) as parsed, the releases that have them, what NCCL's log says it
did with them (lines in NCCL's own wording, from its sources), and the direct engine's
registration through the recording nccl4py (tests/fakenccl). Over real ranks:
tests/dist/test_direct_knobs.py; on a GPU: tests/gpu/test_direct_nccl.py."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from colbench.bench.groups import Refused, TorchEngine, knobbed
from colbench.bench.ops import BY_NAME
from colbench.bench.ops.base import Context
from colbench.bench.ops.data import DTYPES
from colbench.config.options import merge
from colbench.config.validate import from_options
from colbench.direct.engine import TORCH_CANNOT_REGISTER, DirectEngine
from colbench.direct.knobs import parse_cta_policies, parse_register, refusal
from colbench.direct.nccl4py import DirectComm, Nccl
from colbench.direct.register import Registrations
from colbench.errors import UsageError
from colbench.nccl import log as nccl_log
from colbench.nccl.knobs import evidence
from colbench.nccl.tuning import parse_call
from tests.conftest import run_main


def test_register_takes_names_and_nccl_tests_digits() -> None:
    assert [parse_register(t) for t in ("0", "1", "2", "local", " Symmetric")] == [
        "none", "local", "symmetric", "local", "symmetric",
    ]  # fmt: skip
    for bad in ("3", "window", ""):
        with pytest.raises(UsageError, match=r"^bad --register .*nccl-tests' -R 0, 1 or 2\)$"):
            parse_register(bad)


def test_cta_policies_are_a_list_by_number_or_nccls_name() -> None:
    assert parse_cta_policies("0,efficiency, ZERO") == ("0", "1", "2")
    for bad in ("3", "0,0", "fast"):
        with pytest.raises(UsageError, match="--cta-policy"):
            parse_cta_policies(bad)


def test_the_options_map_nccl_tests_r_and_x() -> None:
    cfg = from_options(merge({}, {"register": "2", "engine": "nccl", "cta_policy": "0,1"}))
    assert cfg.measure.register == "symmetric"
    # -x is a variant axis of NCCL's own variable: each policy a world of fresh ranks.
    assert cfg.launch.env_axes == (("NCCL_CTA_POLICY", ("0", "1")),)
    with pytest.raises(UsageError, match="not both"):
        from_options(merge({}, {"cta_policy": "1", "env": ["NCCL_CTA_POLICY=0"]}))


def test_register_without_the_direct_engine_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_main(
        capsys, "sweep", "-R", "1", "--backend", "gloo", "--nprocs", "1", "--sizes", "1K",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 2
    assert err.strip().splitlines() == [
        "colbench: error: --register local (nccl-tests' -R) registers buffers through NCCL's "
        "own API, which only the direct engine calls: add --engine nccl"
    ]


def test_each_knob_needs_the_release_that_has_it() -> None:
    assert refusal("local", {}, (2, 18, 5)) == (
        "--register local needs ncclCommRegister, NCCL 2.19.0+; this NCCL is 2.18.5"
    )
    assert "ncclCommWindowRegister, NCCL 2.27.0+" in (refusal("symmetric", {}, (2, 26, 6)) or "")
    assert refusal("symmetric", {}, (2, 27, 3)) is None
    old = refusal("none", {"NCCL_CTA_POLICY": "2"}, (2, 27, 7))
    assert old == (
        "NCCL_CTA_POLICY=2 (zero) needs NCCL 2.28.0+; this NCCL is 2.27.7, which ignores "
        "the variable"
    )
    assert refusal("none", {"NCCL_CTA_POLICY": "1"}, (2, 27, 7)) is None
    # Unknown (a CPU run): nothing is refused on a guess.
    assert refusal("symmetric", {"NCCL_CTA_POLICY": "2"}, None) is None


def test_the_torch_engine_refuses_register_and_an_old_nccls_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = knobbed(TorchEngine(), "local", (2, 28, 9))
    assert isinstance(refused, Refused) and refused.name == "torch"
    assert refused.unsupported(BY_NAME["all_reduce"]) == TORCH_CANNOT_REGISTER
    monkeypatch.setenv("NCCL_CTA_POLICY", "1")
    old = knobbed(TorchEngine(), "none", (2, 26, 2))
    assert "NCCL_CTA_POLICY=1 (efficiency) needs NCCL 2.27.0+" in (
        old.unsupported(BY_NAME["broadcast"]) or ""
    )
    kept = TorchEngine()
    assert knobbed(kept, "none", (2, 28, 9)) is kept


# NCCL 2.28.9's lines, as src/misc/param.cc, src/init.cc, src/transport/nvls.cc and
# src/register/register.cc print them (after the host:pid:tid NCCL INFO prefix).
PREFIX = "node1:4242:4242 [0] NCCL INFO "


def _log(*messages: str) -> nccl_log.NcclLog:
    return nccl_log.parse_log("".join(PREFIX + m + "\n" for m in messages))


def _said(found: nccl_log.NcclLog, env: dict[str, str], register: str) -> Any:
    return evidence(found, env, register)


def test_what_nccl_says_of_the_cta_policy() -> None:
    read = _log("NCCL_CTA_POLICY set by environment to 1.")
    assert _said(read, {"NCCL_CTA_POLICY": "1"}, "none") == (
        ["NCCL_CTA_POLICY=1 (NCCL read it)"],
        None,
    )
    invalid = _log("CTAPolicy 7 is not a valid value, set it to 0")
    assert _said(invalid, {"NCCL_CTA_POLICY": "7"}, "none")[1] == (
        "NCCL says: CTAPolicy 7 is not a valid value, set it to 0"
    )
    silent = _said(_log("Bootstrap: Using eth0"), {"NCCL_CTA_POLICY": "0"}, "none")
    assert silent == (["NCCL_CTA_POLICY=0 asked (NCCL's log has no line for it)"], None)


def test_what_nccl_says_of_nvls() -> None:
    off = _log(
        "NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)",
        "comm 0x5f0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, "
        "32 p2p channels per peer",
    )
    said, refused = _said(off, {"NCCL_NVLS_ENABLE": "1"}, "none")
    assert said == ["NVLS off (NVLS multicast support is not available on dev 0 "
                    "(NVLS_NCHANNELS 0))"]  # fmt: skip
    assert refused is not None and refused.startswith("NCCL_NVLS_ENABLE=1 asked, and NCCL made")
    on = _log(
        "NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)",
        "comm 0x5f0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
        "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, "
        "32 p2p channels per peer",
    )
    assert _said(on, {"NCCL_NVLS_ENABLE": "2"}, "none")[0][0].startswith("NVLS on")


def test_what_nccl_says_of_registration() -> None:
    local = _log(
        "register comm 0x7f00 buffer 0x7e00000 size 1048576",
        "register comm 0x7f00 buffer 0x7f00000 size 1048576",
    )
    assert _said(local, {}, "local") == (["2 buffer(s) registered"], None)
    skipped = _log(
        "Skipping registration for buffer 0x7e00000 size 1048576 (LocalRegister=0, P2pUsesMemcpy=0)"
    )
    assert _said(skipped, {}, "local")[1] == (
        "NCCL skipped the registration: Skipping registration for buffer 0x7e00000 size "
        "1048576 (LocalRegister=0, P2pUsesMemcpy=0)"
    )


def test_a_symmetric_kernels_tuning_line_reads_as_algorithm_symmetric() -> None:
    line = "AllReduce [Symmetric]: 1024 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2 " \
        "nthreads 512 nWorks 1"  # fmt: skip
    call = parse_call(line, (2, 28, 9), False)
    assert call is not None
    assert (call.op, call.size_bytes, call.algo, call.proto, call.per_rank) == (
        "all_reduce", 1024, "Symmetric", "AllReduce_AGxLL_R", True,
    )  # fmt: skip
    found = _log(line, "AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}")
    assert _said(found, {}, "symmetric") == (["symmetric kernels in 1 call(s)"], None)


def _engine(nccl: Any, mode: str) -> tuple[DirectEngine, Any]:
    from nccl import core

    communicator = core.Communicator.init(1, 0, core.UniqueId(b"x"))
    comm = DirectComm(nccl.bindings.nccl, "COMM", 0, 22809, 0, 1, core.NcclDataType,
                      core.NcclRedOp)  # fmt: skip
    wrapped = Nccl(nccl)
    return DirectEngine(
        wrapped, communicator, comm, Registrations(wrapped, communicator, mode)
    ), core


@pytest.fixture
def one_rank(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A one-process gloo world, which the fake communicator moves its data over."""
    import torch.distributed as dist

    from colbench.host.launchers.rendezvous import free_port

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize(("mode", "call", "flags"), [
    ("local", "comm_register", None),
    ("symmetric", "comm_window_register", 1),  # NCCL_WIN_COLL_SYMMETRIC
])  # fmt: skip
def test_every_allocation_is_registered_whole_and_released_before_it_is_freed(
    fake_nccl: Any, one_rank: None, mode: str, call: str, flags: int | None
) -> None:
    from nccl import _fake

    engine, _ = _engine(fake_nccl, mode)
    coll = BY_NAME["all_gather"]
    ctx = Context(rank=0, world_size=2, root=0, dtype=DTYPES["float32"], redop="sum",
                  seed=0, device=torch.device("cpu"))  # fmt: skip
    layout = coll.layout(4096, 1, 2)
    before = len(_fake.CALLS)
    storage = engine.allocate(coll, layout, ctx, False)
    made = _fake.CALLS[before:]
    allocs = [c for c in made if c["call"] == "mem_alloc"]
    registered = [c for c in made if c["call"] == call]
    # One registration per ncclMemAlloc (send and receive), of the whole allocation.
    assert len(allocs) == 2 and len(registered) == 2
    assert [r["size"] for r in registered] == [a["numel"] * 4 for a in allocs]
    assert all(r.get("flags") == flags for r in registered)
    assert not [c for c in _fake.CALLS[before:] if c["call"].endswith("deregister")]
    del storage
    gc.collect()
    released = [c for c in _fake.CALLS[before:] if c["call"] == call.replace("reg", "dereg")]
    assert sorted(c["ptr"] for c in released) == sorted(r["ptr"] for r in registered)


def test_a_registration_nccl_skips_is_said_before_anything_is_measured(
    fake_nccl: Any, one_rank: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _ = _engine(fake_nccl, "local")
    assert engine.registrations is not None
    assert engine.registrations.trial(torch.device("cpu"), torch.float32) is None
    monkeypatch.setenv("COLBENCH_FAKE_NCCL_REGISTER", "skip")
    why = engine.registrations.trial(torch.device("cpu"), torch.float32)
    assert why is not None and why.startswith(
        "--register local: NCCL answered ncclCommRegister with no handle"
    )
    assert "\n" not in why


def _probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cfg: Any, env: dict[str, str], log: str
) -> tuple[Any, list[Any]]:
    """run_probe over a world that writes ``log`` as NCCL would; the tasks it started."""
    from colbench.commands.sweep import probe
    from colbench.config.variants import Variant
    from colbench.host import spawn

    started: list[Any] = []

    def world(task: Any, backend: str, world_size: int, out_dir: Path, variant: Any) -> int:
        started.append(task)
        (out_dir / "nccl-node1-4242.log").write_text(log)
        return 0

    monkeypatch.setattr(spawn, "spawn_and_wait", world)
    variant = Variant(tuple(env.items()))
    return probe.run_probe(cfg, 2, tmp_path, variant, 0), started


def test_a_probe_of_registered_buffers_runs_the_direct_engine_and_reads_symmetric_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from colbench.config.model import SweepConfig

    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(2048,), engines=("nccl",),
                         register="symmetric")  # fmt: skip
    log = "".join(PREFIX + m + "\n" for m in (
        "NCCL version 2.28.9+cuda12.9",
        "NCCL_CTA_POLICY set by environment to 1.",
        "AllReduce [Symmetric]: 1024 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2 "
        "nthreads 512 nWorks 1",
    ))  # fmt: skip
    probed, started = _probe(tmp_path, monkeypatch, cfg, {"NCCL_CTA_POLICY": "1"}, log)
    # Only the direct engine registers: the probe's calls are its, with REG on.
    assert [t.engine_name for t in started] == ["nccl"]
    assert probed.refused is None
    assert probed.choices == {("all_reduce", 1024): ("Symmetric", "AllReduce_AGxLL_R")}
    assert probed.note.endswith(
        "NCCL's log: NCCL_CTA_POLICY=1 (NCCL read it), symmetric kernels in 1 call(s)"
    )


def test_what_nccl_did_not_do_makes_the_variants_rows_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from colbench.commands.sweep.task import SweepTask
    from colbench.config.model import SweepConfig

    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(2048,))
    log = "".join(PREFIX + m + "\n" for m in (
        "NCCL version 2.28.9+cuda12.9",
        "comm 0x5f0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, "
        "32 p2p channels per peer",
        "AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
    ))  # fmt: skip
    probed, started = _probe(tmp_path, monkeypatch, cfg, {"NCCL_NVLS_ENABLE": "1"}, log)
    assert [t.engine_name for t in started] == ["torch"]
    assert probed.refused == (
        "NCCL_NVLS_ENABLE=1 asked, and NCCL made no NVLS channels: 0 nvls channels"
    )
    assert "NOT as asked, so its rows are unsupported" in probed.note
    # The measured world of that variant carries it (its engine then says it for every
    # row: Refused); a variant whose probe found nothing amiss measures.
    from colbench.commands.references import place
    from colbench.commands.sweep import command, probe
    from colbench.commands.sweep.probe import Probed
    from colbench.host import spawn

    cfg = cfg.replace(env_axes=(("NCCL_NVLS_ENABLE", ("0", "1")),), interleave=False)
    found = {"NCCL_NVLS_ENABLE=0": Probed({}, "fine"), "NCCL_NVLS_ENABLE=1": probed}
    tasks: list[SweepTask] = []
    monkeypatch.setattr(probe, "probe_variants", lambda *args: found)
    monkeypatch.setattr(spawn, "spawn_and_wait", lambda task, *args: tasks.append(task) or 0)
    monkeypatch.setattr(place, "record_after_run", lambda run_dir: None)
    assert command._run_variants(cfg, "nccl", 2, tmp_path) == 0
    assert [t.refused for t in tasks] == [None, probed.refused]
