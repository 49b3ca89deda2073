"""One GPU per task: which device a rank picks, and ranks refused for sharing one GPU.

No GPU here: device counts and device properties are fakes that record what the code
asked for; the picking rule, the launched-rank preflight and the rank's own device
choice (rank_life._device_for) are the real code.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from colbench.errors import UsageError
from colbench.host import child as rank_life
from colbench.host.launchers import devices, gpus, preflight
from colbench.host.launchers.devices import check_distinct_gpus, gpu_uuid, pick_cuda_index
from colbench.host.launchers.env import LaunchEnv

LOCAL_VARS = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE",
              "MPI_LOCALNRANKS")  # fmt: skip


@pytest.mark.parametrize(
    ("local_rank", "local_world", "visible", "expected"),
    [
        (3, 8, 8, 3),  # torchrun / --gpus-per-node: every process sees the node's GPUs
        (3, 4, 8, 3),  # fewer ranks than GPUs
        (3, 8, 1, 0),  # srun --gpus-per-task=1 / CUDA_VISIBLE_DEVICES per rank
        (0, 1, 1, 0),
        (0, 1, 4, 0),
        (2, None, 4, 2),  # the launcher does not say how many ranks share the node
        (5, None, 1, 0),
    ],
)
def test_pick(local_rank: int, local_world: int | None, visible: int, expected: int) -> None:
    assert pick_cuda_index(local_rank, local_world, visible) == expected


@pytest.mark.parametrize(
    ("local_rank", "local_world", "visible", "numbers"),
    [
        (1, 4, 2, ("4 ranks on this node", "2 GPU(s) visible")),
        (0, 2, 0, ("2 ranks on this node", "0 GPU(s) visible")),
        (3, None, 2, ("local rank 3", "2 GPU(s) visible")),
    ],
)
def test_pick_refuses_with_both_numbers(
    local_rank: int, local_world: int | None, visible: int, numbers: tuple[str, str]
) -> None:
    with pytest.raises(UsageError) as info:
        pick_cuda_index(local_rank, local_world, visible)
    message = str(info.value)
    assert all(n in message for n in numbers), message
    assert "\n" not in message and "--gpus-per-task=1" in message


def test_preflight_accepts_one_gpu_per_task() -> None:
    """srun --ntasks-per-node 8 --gpus-per-task=1: local rank 5 sees one GPU (refused on main)."""
    # One node, so the gloo half of the preflight (it runs for NCCL jobs too) has
    # nothing to object to on this test machine.
    task = LaunchEnv("slurm", 5, 8, 5, 8, "127.0.0.1", 29500, node_rank=0, nnodes=1)
    preflight.check(task, "nccl", 1)


class FakeCuda:
    """Records every device the rank asked torch to use."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
        self.set_devices: list[Any] = []
        monkeypatch.setattr(gpus, "gpu_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_devices.append)


def device_for(backend: str, local_rank: int, world_size: int) -> Any:
    """The device rank_main picks for a rank of a world of ``world_size`` (its job is plain
    data: only these fields are read)."""
    launch = types.SimpleNamespace(ranks_per_gpu=1)
    job = types.SimpleNamespace(backend=backend, world_size=world_size, launch=launch)
    return rank_life._device_for(job, local_rank)  # type: ignore[arg-type]


@pytest.fixture
def no_local_vars(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in LOCAL_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_rank_with_one_visible_gpu_uses_it(no_local_vars: pytest.MonkeyPatch) -> None:
    """Local rank 5 of 8, one GPU visible: cuda:0, not cuda:5 (which does not exist)."""
    no_local_vars.setenv("LOCAL_WORLD_SIZE", "8")
    cuda = FakeCuda(no_local_vars, count=1)
    device = device_for("nccl", 5, 8)
    assert device == torch.device("cuda", 0)
    assert cuda.set_devices == [torch.device("cuda", 0)]


def test_rank_seeing_the_node_uses_its_local_rank(no_local_vars: pytest.MonkeyPatch) -> None:
    no_local_vars.setenv("LOCAL_WORLD_SIZE", "8")
    cuda = FakeCuda(no_local_vars, count=8)
    assert device_for("nccl", 5, 8) == torch.device("cuda", 5)
    assert cuda.set_devices == [torch.device("cuda", 5)]


def test_rank_refused_before_touching_a_device(no_local_vars: pytest.MonkeyPatch) -> None:
    no_local_vars.setenv("SLURM_NTASKS_PER_NODE", "4")
    cuda = FakeCuda(no_local_vars, count=2)
    with pytest.raises(UsageError, match=r"4 ranks on this node but 2 GPU\(s\)"):
        device_for("nccl", 3, 4)
    assert cuda.set_devices == []


def test_spawned_ranks_take_one_gpu_each(no_local_vars: pytest.MonkeyPatch) -> None:
    """Spawned: no launcher variables, local rank = rank, as many GPUs as ranks or more."""
    cuda = FakeCuda(no_local_vars, count=4)
    picked = [device_for("nccl", rank, 2) for rank in range(2)]
    assert picked == [torch.device("cuda", 0), torch.device("cuda", 1)]
    assert cuda.set_devices == picked


def test_multi_node_world_without_local_count_is_not_over_counted(
    no_local_vars: pytest.MonkeyPatch,
) -> None:
    """16 ranks on 2 nodes started by hand (no local count): rank 3 of this node, 8 GPUs.
    rank_main passes the world size as local world size when none is declared."""
    FakeCuda(no_local_vars, count=8)
    assert device_for("nccl", 3, 16) == torch.device("cuda", 3)


def test_cpu_ranks_never_touch_cuda(no_local_vars: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(no_local_vars, count=0)
    no_local_vars.setenv("OMP_NUM_THREADS", "1")
    assert device_for("gloo", 1, 2) == torch.device("cpu")
    assert cuda.set_devices == []


def ident(rank: int, host: str, bus: str, nccl_host: str | None = None, uuid: str = "") -> Any:
    return devices.GpuIdentity(rank, host, nccl_host or f"{host}boot", bus, uuid)


def test_two_ranks_on_one_physical_gpu_are_refused() -> None:
    identities = [
        ident(0, "node01", "0000:17:00.0"),
        ident(1, "node01", "0000:65:00.0"),
        ident(2, "node01", "0000:17:00.0"),
        ident(3, "node02", "0000:17:00.0"),
    ]
    with pytest.raises(UsageError) as info:
        check_distinct_gpus(identities)
    message = str(info.value)
    assert message.startswith("ranks 0, 2 share GPU 0000:17:00.0 on node01:")
    assert "65:00" not in message and "node02" not in message
    assert "\n" not in message and "--ranks-per-gpu" in message


def test_distinct_gpus_pass() -> None:
    # One GPU each; the same PCI address on another node is another GPU; unknown GPUs
    # ("" bus id and UUID) are never a match.
    check_distinct_gpus(
        [
            ident(0, "n1", "0000:17:00.0"),
            ident(1, "n1", "0000:65:00.0"),
            ident(2, "n2", "0000:17:00.0"),
            ident(3, "n1", ""),
            ident(4, "n1", ""),
        ]
    )


def test_emulated_nodes_share_a_gpu_but_one_shared_hostid_does_not() -> None:
    """NCCL compares (host identity, bus id): ranks with their own NCCL_HOSTID may share a
    GPU (--ranks-per-gpu); one NCCL_HOSTID set alike for both may not."""
    check_distinct_gpus(
        [ident(0, "h", "0000:17:00.0", "h-rank0"), ident(1, "h", "0000:17:00.0", "h-rank1")]
    )
    with pytest.raises(UsageError, match=r"ranks 0, 1 share GPU 0000:17:00\.0 on h"):
        check_distinct_gpus(
            [ident(0, "h", "0000:17:00.0", "mine"), ident(1, "h", "0000:17:00.0", "mine")]
        )


def test_mig_slices_of_one_gpu_are_one_gpu_to_nccl() -> None:
    """Two MIG instances have different UUIDs and one PCI bus id, which is what NCCL
    compares: main compared UUIDs only and let them through to NCCL's own failure."""
    with pytest.raises(UsageError, match=r"share GPU 0000:17:00\.0"):
        check_distinct_gpus(
            [
                ident(0, "h", "0000:17:00.0", uuid="MIG-aaaa"),
                ident(1, "h", "0000:17:00.0", uuid="MIG-bbbb"),
            ]
        )


def test_every_shared_gpu_is_named() -> None:
    with pytest.raises(UsageError) as info:
        check_distinct_gpus(
            [ident(r, "h", "0000:17:00.0" if r < 2 else "0000:65:00.0") for r in range(4)]
        )
    assert "ranks 0, 1 share GPU 0000:17:00.0 on h; ranks 2, 3 share GPU 0000:65:00.0 on h" in (
        str(info.value)
    )


def test_nccl_host_identity_is_hostid_else_host_and_boot_id() -> None:
    import socket

    assert devices.nccl_host_identity({"NCCL_HOSTID": "node-7"}, "b") == "node-7"
    assert devices.nccl_host_identity({}, "boot-1") == socket.gethostname() + "boot-1"


def test_identities_travel_through_a_real_store() -> None:
    import datetime
    import threading

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=20))  # fmt: skip
    client = dist.TCPStore("127.0.0.1", store.port, 2, is_master=False,
                           timeout=datetime.timedelta(seconds=20))  # fmt: skip
    mine = [ident(0, "h", "0000:17:00.0", "h-rank0"), ident(1, "h", "0000:17:00.0", "h-rank1")]
    seen: dict[int, list[Any]] = {}
    other = threading.Thread(
        target=lambda: seen.__setitem__(1, devices.exchange_identities(client, 1, 2, mine[1]))
    )
    other.start()
    seen[0] = devices.exchange_identities(store, 0, 2, mine[0])
    other.join(20)
    assert seen[0] == seen[1] == mine


def test_bus_id_from_device_properties() -> None:
    props = FakeProperties(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    assert devices.gpu_bus_id(torch.device("cuda", 0), props) == "0000:1b:00.0"
    assert devices.gpu_bus_id(torch.device("cuda", 1), FakeProperties()) == ""


@pytest.mark.parametrize(
    ("local_rank", "local_world", "visible", "per_gpu", "expected"),
    [(0, 2, 1, 2, 0), (1, 2, 1, 2, 0), (2, 4, 2, 2, 1), (3, 4, 2, 2, 1), (5, 8, 2, 4, 1)],
)
def test_ranks_per_gpu_take_consecutive_pairs(
    local_rank: int, local_world: int, visible: int, per_gpu: int, expected: int
) -> None:
    assert pick_cuda_index(local_rank, local_world, visible, per_gpu) == expected


def test_ranks_per_gpu_refuses_more_ranks_than_it_allows() -> None:
    with pytest.raises(UsageError, match=r"3 ranks on this node but 1 GPU.*runs at most 2"):
        pick_cuda_index(2, 3, 1, 2)


class FakeProperties:
    """Stands in for torch.cuda.get_device_properties; records the devices asked for."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.asked: list[Any] = []

    def __call__(self, device: Any) -> Any:
        self.asked.append(device)
        return types.SimpleNamespace(name="H100", **self.fields)


def test_uuid_from_device_properties() -> None:
    props = FakeProperties(uuid="5a7c2f1e-0000-1111-2222-333344445555")
    device = torch.device("cuda", 3)
    assert gpu_uuid(device, props) == "GPU-5a7c2f1e-0000-1111-2222-333344445555"
    assert props.asked == [device]


def test_uuid_falls_back_to_the_pci_address_then_to_unknown() -> None:
    """torch 2.3's device properties have no uuid field."""
    props = FakeProperties(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    assert gpu_uuid(torch.device("cuda", 0), props) == "pci-0000:1b:00"
    bare = FakeProperties()
    assert gpu_uuid(torch.device("cuda", 1), bare) == ""
    assert bare.asked == [torch.device("cuda", 1)]


def test_devices_module_reads_torch_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    props = FakeProperties(uuid="GPU-1234")
    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    assert devices.gpu_uuid(torch.device("cuda", 0)) == "GPU-1234"
    assert props.asked == [torch.device("cuda", 0)]
