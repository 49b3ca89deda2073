"""NCCL worlds on fewer GPUs than ranks (--ranks-per-gpu), and NCCL's start in general,
as far as a machine without a GPU can follow them.

The GPUs, NVML and NCCL's start are fakes (tests/fakegpu): every process of the run sees
the fake GPUs through torch.cuda and pynvml, and a rank's ``init_process_group("nccl")``
records its device and every NCCL variable, then stops the rank. Everything before it is
real: the CLI, the parent's checks, spawned (and hand-launched) rank processes, their
rendezvous store, the GPU pick, the emulated node's environment, the pre-NCCL
identity exchange. The runs therefore end with exit 3 at NCCL's start, except where
colbench must refuse first (exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench.host.launchers.rendezvous import free_port
from tests.fakegpu import (
    EMULATION_FIXED,
    REPO,
    FakeRun,
    fake_env,
    gpu,
    records,
    run_on_fake_gpus,
)

SWEEP = ("sweep", "--backend", "nccl", "--sizes", "1K", "--no-table", "--no-nccl-probe")


@pytest.fixture(scope="module")
def four_ranks_on_two_gpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FakeRun]:
    """--ranks-per-gpu 2 on two fake GPUs, as a cluster profile leaves the environment
    (TORCH_NCCL_BLOCKING_WAIT=1): the tests of the emulated nodes, of what the ranks set
    and unset and of NCCL's log files share it, as each run costs an interpreter
    importing torch per process (five here)."""
    tmp = tmp_path_factory.mktemp("four-ranks")
    run = run_on_fake_gpus(
        tmp, [gpu(0), gpu(1)], *SWEEP, "--ranks-per-gpu", "2", "--out", str(tmp / "run"),
        env={"TORCH_NCCL_BLOCKING_WAIT": "1"},
    )  # fmt: skip
    return tmp, run


def test_two_ranks_per_gpu_are_two_emulated_nodes(
    four_ranks_on_two_gpus: tuple[Path, FakeRun],
) -> None:
    _, run = four_ranks_on_two_gpus
    assert run.returncode == 3, run.stderr
    inits = run.inits()
    # --nprocs defaults to K x GPUs.
    assert [r["rank"] for r in inits] == [0, 1, 2, 3]
    host_ids = [r["env"]["NCCL_HOSTID"] for r in inits]
    assert len(set(host_ids)) == 4 and all("rank" in h for h in host_ids)
    for record in inits:
        assert EMULATION_FIXED.items() <= record["env"].items(), record["env"]
    # The parent read the GPUs through NVML and never touched CUDA.
    assert run.calls("nvml", role="parent")
    assert not run.calls("set_device", role="parent")
    assert not run.calls("mem_get_info", role="parent")


def test_four_ranks_on_two_gpus_take_consecutive_pairs(
    four_ranks_on_two_gpus: tuple[Path, FakeRun],
) -> None:
    _, run = four_ranks_on_two_gpus
    assert run.returncode == 3, run.stderr
    assert [r["device"] for r in run.inits()] == [0, 0, 1, 1]


def test_more_ranks_than_the_gpus_can_hold_are_refused_before_starting(tmp_path: Path) -> None:
    run = run_on_fake_gpus(tmp_path, [gpu(0)], *SWEEP, "--ranks-per-gpu", "2",
                           "--nprocs", "3", "--out", str(tmp_path / "run"))  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "colbench: error: --nprocs 3 but only 1 GPU(s): --ranks-per-gpu 2 allows 2; "
        "--backend gloo runs 3 ranks on the CPU"
    ]
    assert not run.calls("nccl_init")


def test_a_gpu_in_exclusive_process_mode_is_refused_by_nvml(tmp_path: Path) -> None:
    run = run_on_fake_gpus(tmp_path, [gpu(0, mode="Exclusive_Process")], *SWEEP,
                           "--ranks-per-gpu", "2", "--out", str(tmp_path / "run"))  # fmt: skip
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("colbench: error: --ranks-per-gpu 2: GPU 0 (0000:17:00.0) is in ")
    assert "Exclusive_Process compute mode" in line and "nvidia-smi -i 0 -c DEFAULT" in line
    assert not run.calls("set_device") and not run.calls("nccl_init")
    assert not (tmp_path / "run").exists()


def test_p2p_runs_emulated_nodes_too(tmp_path: Path) -> None:
    run = run_on_fake_gpus(
        tmp_path, [gpu(0)], "p2p", "--backend", "nccl", "--ranks-per-gpu", "2",
        "--out", str(tmp_path / "run"), env={"NCCL_SOCKET_IFNAME": "eth7"},
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    inits = run.inits()
    # --nprocs defaults to K x GPUs; both ranks drive GPU 0.
    assert [r["device"] for r in inits] == [0, 0]
    assert len({r["env"]["NCCL_HOSTID"] for r in inits}) == 2
    # The user's own value wins over the emulation's; the rest of it holds.
    fixed = {k: v for k, v in EMULATION_FIXED.items() if k != "NCCL_SOCKET_IFNAME"}
    for record in inits:
        assert record["env"]["NCCL_SOCKET_IFNAME"] == "eth7"
        assert fixed.items() <= record["env"].items(), record["env"]


def test_torch_blocking_wait_is_unset_in_the_ranks_with_a_note(
    four_ranks_on_two_gpus: tuple[Path, FakeRun],
) -> None:
    """TORCH_NCCL_BLOCKING_WAIT=1 (cluster profiles export it) makes wait() poll on the
    host, which breaks graph capture: failed on main, where the ranks kept it."""
    _, run = four_ranks_on_two_gpus
    assert run.returncode == 3, run.stderr
    notes = [line for line in run.stderr.splitlines() if "BLOCKING_WAIT" in line]
    assert len(notes) == 1 and notes[0].startswith(
        "colbench: note: TORCH_NCCL_BLOCKING_WAIT=1 is unset in colbench's ranks"
    )
    inits = run.inits()
    assert len(inits) == 4
    assert all("TORCH_NCCL_BLOCKING_WAIT" not in r["env"] for r in inits)


@pytest.fixture(scope="module")
def interleaved_users_debug(tmp_path_factory: pytest.TempPathFactory) -> FakeRun:
    """Two interleaved variants on two fake GPUs, with a user's own NCCL_DEBUG: every
    rank of every world sets NCCL's log up alike (colbench.host.launchers.devices), so the test
    of the parent and the test of the user's NCCL_DEBUG share one run of five processes."""
    tmp = tmp_path_factory.mktemp("interleaved")
    return run_on_fake_gpus(tmp, [gpu(0), gpu(1)], *SWEEP, "--env", "NCCL_ALGO=Ring,Tree",
                            "--out", str(tmp / "run"), env={"NCCL_DEBUG": "WARN"})  # fmt: skip


def test_interleaved_variants_never_touch_cuda_in_the_parent(
    interleaved_users_debug: FakeRun,
) -> None:
    """The memory check of interleaved variants asked torch.cuda.mem_get_info in the
    parent, a CUDA context on every GPU for the whole run: failed on main."""
    run = interleaved_users_debug
    assert run.returncode == 3, run.stderr
    assert "2 variants interleaved" in run.stderr
    assert not run.calls("mem_get_info", role="parent")
    assert run.calls("nvml", role="parent")


def test_exclusive_gpus_run_variants_one_after_the_other(tmp_path: Path) -> None:
    run = run_on_fake_gpus(
        tmp_path, [gpu(0, mode="Exclusive_Process"), gpu(1, mode="Exclusive_Process")],
        *SWEEP, "--env", "NCCL_ALGO=Ring,Tree", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert "interleaved" not in run.stderr.replace("--no-interleave", "")
    assert (
        "colbench: note: GPU 0 is in Exclusive_Process compute mode (one process per GPU): "
        "the variants' worlds cannot be alive at once; running them one after the other "
        "instead (--no-interleave)"
    ) in run.stderr
    assert "variant 1/2: NCCL_ALGO=Ring" in run.stderr


def _launch_by_hand(tmp_path: Path, per_rank: list[dict[str, str]], *args: str) -> list[int]:
    """Two ranks started as torchrun starts them, each with its own extra variables, on
    a machine with one fake GPU."""
    port = str(free_port())
    env = {**os.environ, **fake_env(tmp_path, [gpu(0)])}
    procs = []
    for rank, extra in enumerate(per_rank):
        rank_env = {
            **env, "RANK": str(rank), "WORLD_SIZE": str(len(per_rank)), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(len(per_rank)), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, **extra,
        }  # fmt: skip
        cmd = [sys.executable, "-m", "colbench", *SWEEP, *args]
        procs.append(
            subprocess.Popen(cmd, env=rank_env, cwd=REPO, stderr=subprocess.PIPE, text=True)
        )
    return [proc.wait(timeout=180) for proc in procs]


def test_two_ranks_on_one_gpu_are_refused_before_nccl_starts(tmp_path: Path) -> None:
    """srun handing both ranks GPU 0: refused (exit 2) before any communicator exists,
    where NCCL would fail with its own 'Duplicate GPU detected'. On main the check ran
    after init_process_group: NCCL's start came first (here: exit 3)."""
    codes = _launch_by_hand(tmp_path, [{"CUDA_VISIBLE_DEVICES": "0"}] * 2,
                            "--out", str(tmp_path / "run"))  # fmt: skip
    assert codes == [2, 2]
    assert not [r for r in records(tmp_path) if r["call"] == "nccl_init"]


def test_one_nccl_hostid_shared_on_one_gpu_is_still_refused(tmp_path: Path) -> None:
    """--ranks-per-gpu makes one node per rank only while each rank has its own
    NCCL_HOSTID: a user's one value for both puts them on one node and one GPU again."""
    same = {"CUDA_VISIBLE_DEVICES": "0", "NCCL_HOSTID": "mine"}
    codes = _launch_by_hand(tmp_path, [same, same], "--ranks-per-gpu", "2",
                            "--out", str(tmp_path / "run"))  # fmt: skip
    assert codes == [2, 2]
    assert not [r for r in records(tmp_path) if r["call"] == "nccl_init"]


@pytest.fixture(scope="module")
def launched_emulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """Two hand-launched ranks sharing one fake GPU (--ranks-per-gpu 2), run once for the
    tests of their check and of their logs."""
    tmp = tmp_path_factory.mktemp("launched")
    codes = _launch_by_hand(tmp, [{}, {}], "--ranks-per-gpu", "2", "--out", str(tmp / "run"))
    return tmp, codes


def test_launched_emulated_ranks_pass_the_check(launched_emulated: tuple[Path, list[int]]) -> None:
    tmp_path, codes = launched_emulated
    assert codes == [3, 3]
    inits = sorted((r for r in records(tmp_path) if r["call"] == "nccl_init"),
                   key=lambda r: r["rank"])  # fmt: skip
    assert [r["device"] for r in inits] == [0, 0]
    assert len({r["env"]["NCCL_HOSTID"] for r in inits}) == 2


@pytest.mark.parametrize("backend", ["nccl", "auto"])
def test_no_gpu_is_said_in_one_line(tmp_path: Path, backend: str) -> None:
    run = run_on_fake_gpus(tmp_path, [], "sweep", "--backend", backend, "--ranks-per-gpu", "2",
                           "--sizes", "1K", "--out", str(tmp_path / "run"))  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "colbench: error: --ranks-per-gpu 2 shares GPUs among NCCL ranks, and no GPU is "
        "visible; without GPUs, --backend gloo runs CPU ranks (--nprocs)"
    ]


def test_nccls_start_up_log_goes_to_a_file_per_rank(
    four_ranks_on_two_gpus: tuple[Path, FakeRun],
) -> None:
    tmp_path, run = four_ranks_on_two_gpus
    inits = run.inits()
    assert [r["env"]["NCCL_DEBUG_FILE"] for r in inits] == [
        str((tmp_path / "run" / f"nccl-rank{r}.log").resolve()) for r in range(4)
    ]
    assert {r["env"]["NCCL_DEBUG"] for r in inits} == {"INFO"}
    # Start-up subsystems only: TUNING logs every call, which would be timed.
    assert {r["env"]["NCCL_DEBUG_SUBSYS"] for r in inits} == {"INIT,ENV,NET,GRAPH"}


def test_launched_ranks_log_where_rank_0_runs(launched_emulated: tuple[Path, list[int]]) -> None:
    tmp_path, codes = launched_emulated
    assert codes == [3, 3]
    inits = sorted((r for r in records(tmp_path) if r["call"] == "nccl_init"),
                   key=lambda r: r["rank"])  # fmt: skip
    assert [Path(r["env"]["NCCL_DEBUG_FILE"]).name for r in inits] == [
        "nccl-rank0.log",
        "nccl-rank1.log",
    ]
    assert {Path(r["env"]["NCCL_DEBUG_FILE"]).parent for r in inits} == {
        (tmp_path / "run").resolve()
    }


def test_a_users_nccl_debug_is_left_alone(interleaved_users_debug: FakeRun) -> None:
    run = interleaved_users_debug
    assert len(run.inits()) == 4  # both variants' worlds
    assert {r["env"]["NCCL_DEBUG"] for r in run.inits()} == {"WARN"}
    assert all("NCCL_DEBUG_FILE" not in r["env"] for r in run.inits())


def test_a_probe_world_records_nccls_choices_first(tmp_path: Path) -> None:
    """On NCCL, each variant's probe world (TUNING log on, a file per process) starts
    before the measured world; here it stops at NCCL's fake start, and the run says so
    instead of measuring."""
    run = run_on_fake_gpus(
        tmp_path, [gpu(0)], "sweep", "--backend", "nccl", "--sizes", "1K", "--no-table",
        "--ranks-per-gpu", "2", "--env", "NCCL_ALGO=Ring,Tree", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert "colbench: probing NCCL's choices for NCCL_ALGO=Ring" in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "colbench: the NCCL probe world failed (exit 3); nothing measured"
    )
    inits = run.inits()
    assert len(inits) == 2  # the first variant's probe world only
    probe_dir = (tmp_path / "run" / "nccl-probe" / "0").resolve()
    for record in inits:
        env = record["env"]
        assert env["NCCL_ALGO"] == "Ring" and env["NCCL_DEBUG"] == "INFO"
        assert env["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,TUNING,REG"
        assert env["NCCL_DEBUG_FILE"] == str(probe_dir / "nccl-%h-%p.log")
        assert env["NCCL_P2P_DISABLE"] == "1"  # the same emulated nodes as measured
