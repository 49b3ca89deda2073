"""The gloo network preflight: its decision on given facts, and its facts on this machine."""

from __future__ import annotations

import socket

import pytest

from colbench.errors import UsageError
from colbench.host.launchers import preflight
from colbench.host.launchers.env import LaunchEnv
from colbench.host.launchers.preflight import Interface, diagnose_gloo

IFACES = {
    "lo": Interface("lo", True, ("127.0.0.1", "::1")),
    "eth0": Interface("eth0", False, ("10.1.0.5",)),
    "ib0": Interface("ib0", False, ("192.168.7.5",)),
    "dummy0": Interface("dummy0", False, ()),
}


def diagnose(**overrides: object) -> str | None:
    facts: dict[str, object] = {
        "master_addr": "node01",
        "master_ips": ["192.168.7.1"],
        "multi_node": True,
        "socket_ifname": None,
        "hostname": "node02",
        "default_address": "127.0.1.1",
        "source": "192.168.7.5",
        "ifaces": IFACES,
    }
    facts.update(overrides)
    return diagnose_gloo(**facts)  # type: ignore[arg-type]


def test_hostname_on_loopback_in_a_multi_node_job_names_the_route() -> None:
    message = diagnose()
    assert message is not None
    assert "127.0.1.1" in message and "'node02'" in message
    # The interface holding the address we reach the master from, not the default route.
    assert "GLOO_SOCKET_IFNAME=ib0" in message


def test_socket_ifname_lo_in_a_multi_node_job() -> None:
    message = diagnose(socket_ifname="lo", default_address="")
    assert message is not None and "loopback interface lo" in message
    assert "GLOO_SOCKET_IFNAME=ib0" in message


def test_one_loopback_among_several_interfaces_is_caught() -> None:
    assert diagnose(socket_ifname="ib0,lo", default_address="") is not None


def test_good_configurations_pass() -> None:
    assert diagnose(socket_ifname="ib0", default_address="") is None
    assert diagnose(default_address="192.168.7.5") is None


def test_one_node_may_use_loopback() -> None:
    assert diagnose(multi_node=False) is None
    # Unknown node count with a loopback master: everything is local.
    assert diagnose(multi_node=None, master_ips=["127.0.0.1"]) is None


def test_unknown_node_count_with_a_remote_master_is_checked() -> None:
    message = diagnose(multi_node=None)
    assert message is not None and "ranks on other nodes are expected" in message


def test_loopback_master_in_a_multi_node_job() -> None:
    message = diagnose(master_addr="localhost", master_ips=["127.0.0.1", "::1"])
    assert message is not None and "MASTER_ADDR=localhost is a loopback address" in message


def test_unusable_interfaces_and_master() -> None:
    assert "no such interface here (eth9)" in str(diagnose(socket_ifname="eth9"))
    assert "it has no address (dummy0)" in str(diagnose(socket_ifname="dummy0"))
    assert "does not resolve" in str(diagnose(master_ips=[]))


def test_no_suggestion_when_the_route_is_unknown() -> None:
    message = diagnose(source=None)
    assert message is not None and "the interface the nodes reach each other through" in message


def test_this_machine_has_a_loopback_interface() -> None:
    ifaces = preflight.interfaces()
    assert ifaces["lo"].loopback and "127.0.0.1" in ifaces["lo"].addresses
    assert preflight.owner("127.0.0.1", ifaces) == ifaces["lo"]
    assert preflight.route_source("127.0.0.1") == "127.0.0.1"
    assert preflight.is_loopback(preflight.gloo_default_address("localhost"))


def test_check_refuses_a_loopback_master_for_two_nodes() -> None:
    job = LaunchEnv("env", 2, 4, 0, 2, "127.0.0.1", 29500)
    with pytest.raises(UsageError, match=r"rank 2: MASTER_ADDR=127\.0\.0\.1 is a loopback"):
        preflight.check(job, "gloo", 0)
    # One node of four ranks: loopback is right.
    preflight.check(LaunchEnv("env", 2, 4, 0, 4, "127.0.0.1", 29500), "gloo", 0)


def test_check_on_this_host_follows_gloo_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    # A remote master (a documentation address: the check asks the routing table, sends nothing).
    job = LaunchEnv("env", 1, 4, 1, 2, "192.0.2.77", 29500)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    with pytest.raises(UsageError, match="loopback interface lo"):
        preflight.check(job, "gloo", 0)
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    if preflight.is_loopback(preflight.gloo_default_address()):
        with pytest.raises(UsageError, match=f"{socket.gethostname()!r} resolves to"):
            preflight.check(job, "gloo", 0)


def test_nccl_rank_needs_its_gpu() -> None:
    job = LaunchEnv("torchrun", 3, 4, 3, 4, "127.0.0.1", 29500)
    with pytest.raises(UsageError, match=r"rank 3: 4 ranks on this node but 2 GPU\(s\) visible"):
        preflight.check(job, "nccl", 2)
    preflight.check(job, "nccl", 4)


def test_nccl_jobs_get_the_gloo_check_too() -> None:
    # Bookkeeping goes over a gloo side group on NCCL runs, so a gloo that would bind
    # loopback on a two-node job hangs them too: refused before the rendezvous.
    job = LaunchEnv("env", 2, 4, 0, 2, "127.0.0.1", 29500)
    with pytest.raises(UsageError, match="loopback"):
        preflight.check(job, "nccl", 8)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nosuch0", "GLOO_SOCKET_IFNAME=nosuch0: no interface nosuch0 on this host "
                    "(interfaces with an address here: eth0, ib0, lo)"),
        ("eth0,nosuch1", "GLOO_SOCKET_IFNAME=eth0,nosuch1: no interface nosuch1 on this host"),
        ("dummy0", "GLOO_SOCKET_IFNAME=dummy0: interface dummy0 has no address for gloo to bind"),
    ],
)  # fmt: skip
def test_a_socket_ifname_gloo_cannot_use_is_named_with_the_usable_ones(
    value: str, said: str
) -> None:
    problem = preflight.socket_ifname_problem(value, IFACES)
    assert problem is not None and problem.startswith(said), problem


@pytest.mark.parametrize("value", ["eth0", "ib0,eth0", " lo ", ""])
def test_usable_socket_ifnames_pass(value: str) -> None:
    assert preflight.socket_ifname_problem(value, IFACES) is None


def test_socket_ifname_is_checked_against_this_host_for_launched_ranks_too() -> None:
    preflight.check_socket_ifname({"GLOO_SOCKET_IFNAME": "lo"})
    preflight.check_socket_ifname({})
    with pytest.raises(UsageError, match=r"no interface nosuch0 on this host \(.*\blo\b"):
        preflight.check_socket_ifname({"GLOO_SOCKET_IFNAME": "nosuch0"})
