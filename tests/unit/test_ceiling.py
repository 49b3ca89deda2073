"""Each row's ceiling (colbench.hardware.node): from recorded hardware facts, where
no rate can be known, tc's rates, and the summary's best share and verdict."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from colbench.hardware import links, node
from tests.unit.test_hardware import FakeNvml, _nvml_gpu, recorded_tree


def facts(tmp_path: Path, *gpus: dict[str, Any], interface: str | None = None) -> dict[str, Any]:
    found = node.read_node(recorded_tree(tmp_path), FakeNvml(list(gpus)), shaped={})
    found["interface"] = interface
    return found


def test_one_node_of_nvlink_gpus_is_bound_by_nvlink(tmp_path: Path) -> None:
    hw = {"n1": facts(tmp_path, _nvml_gpu(":03:00.0", 18), _nvml_gpu(":04:00.0", 18))}
    assert node.ceiling(hw, "nccl", ["n1", "n1"]) == (
        450.0, "NVLink 4.0 x18 at 25 GB/s per link (NVML)",
    )  # fmt: skip


def test_only_the_gpus_the_ranks_drive_bound_the_run(tmp_path: Path) -> None:
    hw = {"n1": facts(tmp_path, _nvml_gpu(":03:00.0", 18), _nvml_gpu(":04:00.0", None))}
    # GPU 1 (PCIe only) is not in the run: GPU 0's NVLink bounds it.
    rate, _ = node.ceiling(hw, "nccl", ["n1"], used_bus_ids={"0000:03:00.0"})
    assert rate == 450.0
    rate, why = node.ceiling(hw, "nccl", ["n1", "n1"])
    assert (rate, why) == (31.504, "PCIe gen5 x8 (GPU 1)")


def test_one_node_of_pcie_gpus_is_bound_by_the_narrowest_link(tmp_path: Path) -> None:
    hw = {"n1": facts(tmp_path, _nvml_gpu(":03:00.0", None))}
    # gen5 x8 (NVML): 8 lanes at 3.938 GB/s.
    assert node.ceiling(hw, "nccl", ["n1"]) == (31.504, "PCIe gen5 x8 (GPU 0)")
    hw = {"n1": facts(tmp_path / "b", _nvml_gpu(":81:00.0", None, pcie=False))}
    rate, why = node.ceiling(hw, "nccl", ["n1"])
    assert rate is None and "PCIe link" in why


def test_across_nodes_a_collective_may_fill_the_nodes_rdma_nics(tmp_path: Path) -> None:
    one = facts(tmp_path / "a", _nvml_gpu(":03:00.0", 18))
    hw = {"n1": one, "n2": one}
    # mlx5_0: 400 Gb/s up (mlx5_1 is down): 50 GB/s for the node, whatever its ranks, as
    # a ring or tree crosses the node once per channel.
    nodes = ["n1", "n1", "n2", "n2"]
    assert node.ceiling(hw, "nccl", nodes) == (
        50.0, "mlx5_0: 400 Gb/s (sysfs), the node's total",
    )  # fmt: skip
    # An exchange's every rank sends its own bytes off the node: the 2 ranks share it.
    sharing = node.ranks_sharing(nodes)
    assert sharing == 2 and node.ranks_sharing(["n1", "n1"]) == 1
    assert node.for_op(50.0, True, sharing) == 25.0
    assert node.for_op(50.0, False, sharing) == 50.0
    assert node.for_op(None, True, sharing) is None


def test_the_netdev_of_an_rdma_device_is_found_under_it(tmp_path: Path) -> None:
    one = facts(tmp_path / "a", interface="ens1np0")
    # ens1np0 belongs to mlx5_1 (RoCE, 400 Gb/s, but DOWN): with gloo its rate is the
    # device's, not "unknown".
    for nic in one["nics"]:
        if "ens1np0" in (nic.get("netdevs") or []):
            nic["rate_gbit_s"] = 100.0
    rate, why = node.ceiling({"a": one, "b": one}, "gloo", ["a", "b"])
    assert rate == 12.5 and why.startswith("ens1np0: 100 Gb/s"), why


def test_gloo_uses_the_interface_toward_the_coordinator(tmp_path: Path) -> None:
    eth = facts(tmp_path / "a", interface="eth0")
    assert node.ceiling({"a": eth, "b": eth}, "gloo", ["a", "b"]) == (
        3.125, "eth0: 25 Gb/s (/sys/class/net/eth0/speed), the node's total",
    )  # fmt: skip
    veth = facts(tmp_path / "b", interface="veth0")
    rate, why = node.ceiling({"a": veth, "b": veth}, "gloo", ["a", "b"])
    assert rate is None and why == "veth0: a virtual interface's speed is made up or absent"


@pytest.mark.parametrize(
    ("hardware", "backend", "nodes", "why"),
    [
        ({"a": {"nics": []}}, "gloo", ["a", "a"], "loopback, which has no rate"),
        ({}, "gloo", ["a", "b"], "the hardware of some node is unknown"),
        ({"a": {"gpus": None}}, "nccl", ["a"], "NVML reports no GPU"),
        ({"a": {"nics": []}, "b": {"nics": []}}, "gloo", ["a", "b"],
         "the interface toward the coordinator is unknown"),
    ],
)  # fmt: skip
def test_no_ceiling_where_no_rate_can_be_known(
    hardware: dict[str, Any], backend: str, nodes: list[str], why: str
) -> None:
    rate, reason = node.ceiling(hardware, backend, nodes)
    assert rate is None and why in reason


def test_the_users_ceiling_wins_and_an_emulated_fabric_has_none() -> None:
    assert node.ceiling({}, "gloo", ["a", "a"], given=12.5) == (12.5, "--ceiling-gbps")
    rate, why = node.ceiling({}, "nccl", ["a", "a"], emulated=True)
    assert rate is None and "emulated" in why


def test_a_shaped_interface_takes_tcs_rate(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def run(argv: list[str]) -> str:
        asked.append(argv)
        if argv[1] == "qdisc":
            return (
                "qdisc noqueue 0: dev lo root refcnt 2\n"
                "qdisc htb 1: dev veth1 root refcnt 3 r2q 10 default 0x10\n"
                "qdisc tbf 8036: dev veth0 root refcnt 3 rate 1Gbit burst 65500b lat 50ms\n"
                "qdisc netem 8037: dev veth2 root refcnt 3 limit 1000 delay 1ms rate 500Kbit\n"
            )
        return (
            "class htb 1:11 root prio 0 rate 200Mbit ceil 200Mbit burst 1600b\n"
            "class htb 1:10 root prio 0 rate 300Mbit ceil 300Mbit burst 1537b\n"
        )

    rates = links.shaped_rates_gbit_s(run)
    assert rates == pytest.approx({"veth0": 1.0, "veth1": 0.3, "veth2": 5e-4})
    # Classes are asked for only where an htb qdisc holds them.
    assert asked == [["tc", "qdisc", "show"], ["tc", "class", "show", "dev", "veth1"]]
    found = node.read_node(recorded_tree(tmp_path), FakeNvml([]), shaped={"veth0": 0.3})
    veth = next(n for n in found["nics"] if n["name"] == "veth0")
    assert (veth["rate_gbit_s"], veth["rate_source"]) == (0.3, "tc's rate on veth0")


def _row(op: str, size: int, pct: float | None, ceiling_gbps: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(op=op, size_bytes=size, pct_of_ceiling=pct, ceiling_gbps=ceiling_gbps)


def test_the_summary_gives_each_ops_best_and_names_a_low_largest_size() -> None:
    counter = node.CeilingCounter()
    big = 256 * 1024**2
    for row in (
        _row("all_reduce", 1024, 2.0), _row("all_reduce", big, 80.0), _row("all_reduce", big, 85.0),
        _row("all_gather", 1024, 1.0), _row("all_gather", big, 40.0), _row("all_gather", big, 45.0),
        _row("broadcast", 1024, 1.0), _row("gather", 1024, None),
    ):  # fmt: skip
        counter.add(row)
    assert counter.lines() == [
        "all_reduce 85% at 256M",
        "all_gather 45% at 256M",
        "broadcast 1% at 1K",
    ]
    # broadcast stopped at 1K: a latency-bound size says nothing of the link.
    assert counter.verdicts() == [
        "all_gather: busbw below half of the ceiling at the largest size (45% of 10 GB/s at 256M)"
    ]
    assert counter.best_meta()["all_reduce"] == {"pct_of_ceiling": 85.0, "size_bytes": big}
    assert node.percent(5.0, 10.0) == 50.0 and node.percent(None, 10.0) is None
    assert node.percent(5.0, None) is None


def test_shares_of_a_thousand_percent_and_more_read_in_digits() -> None:
    counter = node.CeilingCounter()
    counter.add(_row("all_reduce", 32 * 1024, 1420.0, ceiling_gbps=0.01))
    assert counter.lines() == ["all_reduce 1420% at 32K"]


def test_an_exchanges_verdict_names_its_own_share_of_the_ceiling() -> None:
    counter = node.CeilingCounter()
    big = 256 * 1024**2
    counter.add(_row("all_reduce", big, 80.0, ceiling_gbps=50.0))
    counter.add(_row("all_to_all", big, 10.0, ceiling_gbps=25.0))
    assert counter.ceiling_gbps == 50.0
    assert counter.verdicts() == [
        "all_to_all: busbw below half of the ceiling at the largest size (10% of 25 GB/s at 256M)"
    ]


def test_nvml_answers_a_code_of_the_nvlink_version_not_the_version() -> None:

    # nvmlNvlinkVersion_t, as pynvml's constants have it.
    assert links.NVLINK_VERSIONS[4] == "3.0" and links.NVLINK_VERSIONS[6] == "4.0"
    assert links.NVLINK_VERSIONS[7] == "5.0" and 8 not in links.NVLINK_VERSIONS
    pynvml = pytest.importorskip("pynvml")
    for code, version in links.NVLINK_VERSIONS.items():
        assert getattr(pynvml, f"NVML_NVLINK_VERSION_{version.replace('.', '_')}") == code


def test_a_groups_own_nodes_and_gpus_bound_its_rows(tmp_path: Path) -> None:
    one = facts(tmp_path, _nvml_gpu(":03:00.0", 18), _nvml_gpu(":04:00.0", 18))
    hw = {"n1": one, "n2": one}
    nodes = ["n1", "n1", "n2", "n2"]
    buses = ["0000:03:00.0", "0000:04:00.0", "0000:03:00.0", "0000:04:00.0"]
    # --split div:2: the first group is one node's two GPUs, joined by NVLink.
    assert node.group_ceiling(hw, "nccl", nodes, buses, (0, 1)) == (
        450.0, "NVLink 4.0 x18 at 25 GB/s per link (NVML)", 1,
    )  # fmt: skip
    # --split mod:2: one rank per node, over the NICs, which no other rank of it shares.
    assert node.group_ceiling(hw, "nccl", nodes, buses, (0, 2))[::2] == (50.0, 1)
    # The whole world: the NICs, shared by 2 ranks per node in an exchange.
    assert node.group_ceiling(hw, "nccl", nodes, buses, (0, 1, 2, 3))[::2] == (50.0, 2)
    assert node.group_ceiling(hw, "nccl", nodes, buses, (0, 1, 2, 3), given=7.0)[::2] == (
        7.0, 1,
    )  # fmt: skip
