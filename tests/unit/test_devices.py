"""One GPU per task: which device a rank picks, and ranks refused for sharing one GPU.

No GPU here: device counts and device properties are fakes that record what the code
asked for; the picking rule, the launched-rank preflight and the rank's own device
choice (startup._device_for) are the real code.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from colbench import devices, preflight
from colbench.devices import check_distinct_gpus, gpu_uuid, pick_cuda_index
from colbench.errors import UsageError
from colbench.launch import LaunchEnv
from colbench.run import startup

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
        monkeypatch.setattr(startup, "_gpu_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_devices.append)


@pytest.fixture
def no_local_vars(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in LOCAL_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_rank_with_one_visible_gpu_uses_it(no_local_vars: pytest.MonkeyPatch) -> None:
    """Local rank 5 of 8, one GPU visible: cuda:0, not cuda:5 (which does not exist)."""
    no_local_vars.setenv("LOCAL_WORLD_SIZE", "8")
    cuda = FakeCuda(no_local_vars, count=1)
    device = startup._device_for("nccl", 5, 8)
    assert device == torch.device("cuda", 0)
    assert cuda.set_devices == [torch.device("cuda", 0)]


def test_rank_seeing_the_node_uses_its_local_rank(no_local_vars: pytest.MonkeyPatch) -> None:
    no_local_vars.setenv("LOCAL_WORLD_SIZE", "8")
    cuda = FakeCuda(no_local_vars, count=8)
    assert startup._device_for("nccl", 5, 8) == torch.device("cuda", 5)
    assert cuda.set_devices == [torch.device("cuda", 5)]


def test_rank_refused_before_touching_a_device(no_local_vars: pytest.MonkeyPatch) -> None:
    no_local_vars.setenv("SLURM_NTASKS_PER_NODE", "4")
    cuda = FakeCuda(no_local_vars, count=2)
    with pytest.raises(UsageError, match=r"4 ranks on this node but 2 GPU\(s\)"):
        startup._device_for("nccl", 3, 4)
    assert cuda.set_devices == []


def test_spawned_ranks_take_one_gpu_each(no_local_vars: pytest.MonkeyPatch) -> None:
    """Spawned: no launcher variables, local rank = rank, as many GPUs as ranks or more."""
    cuda = FakeCuda(no_local_vars, count=4)
    picked = [startup._device_for("nccl", rank, 2) for rank in range(2)]
    assert picked == [torch.device("cuda", 0), torch.device("cuda", 1)]
    assert cuda.set_devices == picked


def test_multi_node_world_without_local_count_is_not_over_counted(
    no_local_vars: pytest.MonkeyPatch,
) -> None:
    """16 ranks on 2 nodes started by hand (no local count): rank 3 of this node, 8 GPUs.
    rank_main passes the world size as local world size when none is declared."""
    FakeCuda(no_local_vars, count=8)
    assert startup._device_for("nccl", 3, 16) == torch.device("cuda", 3)


def test_cpu_ranks_never_touch_cuda(no_local_vars: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(no_local_vars, count=0)
    no_local_vars.setenv("OMP_NUM_THREADS", "1")
    assert startup._device_for("gloo", 1, 2) == torch.device("cpu")
    assert cuda.set_devices == []


def test_two_ranks_on_one_physical_gpu_are_refused() -> None:
    uuids = {0: "GPU-aaaa", 1: "GPU-bbbb", 2: "GPU-aaaa", 3: "GPU-cccc"}
    hosts = {0: "node01", 1: "node01", 2: "node01", 3: "node02"}
    with pytest.raises(UsageError) as info:
        check_distinct_gpus(uuids, hosts)
    message = str(info.value)
    assert message.startswith("ranks 0, 2 share GPU GPU-aaaa on node01:")
    assert "GPU-bbbb" not in message and "GPU-cccc" not in message
    assert "\n" not in message


def test_distinct_gpus_pass() -> None:
    # One GPU each; the same identity on another node is another GPU (PCI addresses
    # repeat across nodes); unknown identities ("") are never a match.
    check_distinct_gpus(
        {0: "GPU-aaaa", 1: "GPU-bbbb", 2: "pci-0000:1b:00", 3: "pci-0000:1b:00", 4: "", 5: ""},
        {0: "n1", 1: "n1", 2: "n1", 3: "n2", 4: "n1", 5: "n1"},
    )


def test_every_shared_gpu_is_named() -> None:
    with pytest.raises(UsageError) as info:
        check_distinct_gpus({0: "U1", 1: "U1", 2: "U2", 3: "U2"}, dict.fromkeys(range(4), "h"))
    assert "ranks 0, 1 share GPU U1 on h; ranks 2, 3 share GPU U2 on h" in str(info.value)


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
