"""Real, rate-limited networks between ranks, built from network namespaces.

- :func:`veth_pair`: two namespaces joined by a veth pair, each with a private /30
  address; ``tc`` shapes both ends with a token bucket, so the link rate, not the CPU,
  sets how long a large collective takes (tests/dist/test_gate_throttle.py).
- :func:`fabric`: N "nodes" (one namespace each) joined through a bridge in a switch
  namespace of their own, with ``tc`` shaping per node (both directions of its link)
  and per destination (htb with a u32 filter on the peer's address), optionally a
  fixed delay per hop (netem under each htb class, where the kernel has netem) and
  per-namespace sysctls. Used by the p2p fabric tests and the validation of
  ``colbench predict`` (tests/dist/test_predict_fabric.py, benchmarks/predict_fabric.py).

colbench runs once in each namespace in launched mode (RANK, WORLD_SIZE, MASTER_ADDR,
...), exactly as under a real launcher on separate hosts. Every namespace is named
after this process and a tag (no clash between parallel runs) and is deleted, with
whatever still runs in it, on exit, also after a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from colbench.host.launchers.rendezvous import free_port

REPO = Path(__file__).resolve().parent.parent
_IP_TIMEOUT_S = 30
#: A veth pair's token bucket: 10 ms of link time at 100 Mbit/s (VethPair.set_rate).
BURST_BYTES = 125_000


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False)


def _must(*argv: str) -> None:
    proc = _run(*argv)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def unavailable() -> str | None:
    """Why namespaces cannot be used here, or None when they can."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command (iproute2) is not installed"
    probe = f"cbgate-probe-{os.getpid()}"
    made = _run("ip", "netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _run("ip", "netns", "del", probe)
    return None


def qdisc_unavailable(kind: str, *args: str) -> str | None:
    """Why this kernel cannot attach a ``kind`` qdisc (``tc qdisc add ... kind ARGS``), or
    None when it can. netem, for one, is often left out of small VM kernels."""
    probe = f"cbfab-probe-{os.getpid()}"
    made = _run("ip", "netns", "add", probe)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    try:
        tried = _run("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root",
                     kind, *args)  # fmt: skip
        return None if tried.returncode == 0 else f"tc {kind}: {tried.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe)


def launch_ranks(
    ranks: Sequence[tuple[str, dict[str, str]]],
    master_addr: str,
    argv: Sequence[str],
    timeout_s: float = 600,
    cgroup_procs: Mapping[int, Path] | None = None,
    wrapper: Sequence[str] = (),
) -> list[subprocess.CompletedProcess[str]]:
    """``colbench ARGV`` once per (namespace, extra env), as ranks 0.. of one launched job.

    Each rank is alone on its "node" (LOCAL_WORLD_SIZE 1); rank 0's node hosts the store
    at ``master_addr``. ``cgroup_procs`` maps a rank to a cgroup's ``cgroup.procs`` file
    that its process joins before it starts (a CPU quota on one "node"). ``wrapper`` is a
    command that runs each rank's Python (e.g. ``chrt -f 1``). Waits for all; whatever
    still runs at the deadline is killed.
    """
    port = free_port()
    procs = []
    for rank, (ns, extra) in enumerate(ranks):
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "RANK": str(rank),
            "WORLD_SIZE": str(len(ranks)),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(port),
            **extra,
        }
        command = ["ip", "netns", "exec", ns, *wrapper, sys.executable, "-m", "colbench", *argv]
        if cgroup_procs and rank in cgroup_procs:
            join = f'echo $$ > {cgroup_procs[rank]} && exec "$@"'
            command = ["sh", "-c", join, "sh", *command]
        procs.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + timeout_s
    results = []
    try:
        for proc in procs:
            left_s = max(1.0, deadline - time.monotonic())
            stdout, stderr = proc.communicate(timeout=left_s)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


@dataclass(frozen=True)
class VethPair:
    namespaces: tuple[str, str]
    interfaces: tuple[str, str]
    addresses: tuple[str, str]

    def set_rate(self, rate_mbit: float, burst_bytes: int = BURST_BYTES) -> None:
        """Shape both directions to ``rate_mbit`` (token bucket; replaces any earlier rate).
        A stall of up to ``burst_bytes * 8 / rate`` (a busy core delaying the softirq that
        sends) costs the link no time: the tokens saved meanwhile are spent after it. With
        a bucket of a few packets every stall was link time lost (issue 33)."""
        for ns, iface in zip(self.namespaces, self.interfaces, strict=True):
            _must(
                "ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", iface, "root",
                "tbf", "rate", f"{rate_mbit:g}mbit", "burst", str(burst_bytes),
                "latency", "50ms",
            )  # fmt: skip

    def sweep(
        self,
        args: Sequence[str],
        out: Path,
        timeout_s: float = 600,
        cgroup_procs: Mapping[int, Path] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``colbench sweep ARGS --out OUT`` as a 2-rank job, one rank per namespace.

        ``cgroup_procs`` maps a rank to a cgroup's ``cgroup.procs`` file: that rank's
        process joins the cgroup before it starts (a CPU quota on one "node").
        Returns rank 0's completed process (rank 1's output is appended to its stderr
        when rank 1 fails).
        """
        ranks = [
            (ns, {"RANK": str(rank), "GLOO_SOCKET_IFNAME": iface})
            for rank, (ns, iface) in enumerate(zip(self.namespaces, self.interfaces, strict=True))
        ]
        results = launch_ranks(
            ranks,
            self.addresses[0],
            ["sweep", *args, "--out", str(out)],
            timeout_s,
            cgroup_procs,
        )
        first, second = results
        if second.returncode != 0:
            first.stderr += f"\n[rank 1 exit {second.returncode}]\n{second.stderr}"
            first.returncode = first.returncode or second.returncode
        return first


@contextlib.contextmanager
def veth_pair(tag: str = "") -> Iterator[VethPair]:
    """Two fresh namespaces joined by a veth pair; deleted on exit, also after a failure."""
    forget_the_dead()
    pid = os.getpid()
    suffix = f"{pid}{tag}"
    namespaces = (f"cbgate-{suffix}-a", f"cbgate-{suffix}-b")
    # Interface names are limited to 15 characters.
    interfaces = (f"cbg{suffix[:11]}a", f"cbg{suffix[:11]}b")
    # A private /30 that exists only inside the two namespaces.
    third = pid % 250
    addresses = (f"10.214.{third}.1", f"10.214.{third}.2")
    try:
        for ns in namespaces:
            _must("ip", "netns", "add", ns)
        _must("ip", "link", "add", interfaces[0], "type", "veth", "peer", "name", interfaces[1])
        for ns, iface, addr in zip(namespaces, interfaces, addresses, strict=True):
            _must("ip", "link", "set", iface, "netns", ns)
            _must("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", iface)
            _must("ip", "-n", ns, "link", "set", iface, "up")
            _must("ip", "-n", ns, "link", "set", "lo", "up")
        yield VethPair(namespaces, interfaces, addresses)
    finally:
        for ns in namespaces:
            # Deleting a namespace deletes the veth end inside it, and with it the pair.
            _run("ip", "netns", "del", ns)
        # A pair created before its move into the namespaces failed is still here.
        _run("ip", "link", "del", interfaces[0])


def _kill_everything_in(namespace: str) -> None:
    for pid in _run("ip", "netns", "pids", namespace).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


#: The namespaces these helpers make: the prefix, then the making process's pid.
_OURS = re.compile(r"^(?:cbfab|cbgate)-(\d+)")


def forget_the_dead() -> list[str]:
    """Delete the namespaces of ours whose maker is gone (a test run SIGKILLed mid-way
    leaves them, and their addresses, behind); returns their names."""
    gone = []
    for line in _run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        found = _OURS.match(name)
        if found is None or _alive(int(found.group(1))):
            continue
        _kill_everything_in(name)
        _run("ip", "netns", "del", name)
        gone.append(name)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Fabric:
    """N nodes, one namespace each, behind one bridge; rank i runs on node i.

    Node i's interface is ``eth0`` at ``addresses[i]``; its port on the bridge is ``p<i>``
    in the switch namespace. Shaping is kept here per device and rebuilt whole on each
    change, so a test sets exactly the fabric it means.
    """

    namespaces: tuple[str, ...]
    switch: str
    addresses: tuple[str, ...]
    labels: tuple[str, ...]
    #: node -> its link's rate (both directions), Mbit/s; None: unshaped.
    node_mbit: dict[int, float | None] = field(default_factory=dict)
    #: (node, peer) -> rate of node's traffic to peer, Mbit/s (both directions are set).
    pair_mbit: dict[tuple[int, int], float] = field(default_factory=dict)
    #: One-way delay added to every packet a node sends (netem), ms; 0: none.
    delay_ms: float = 0.0
    #: Whether small packets (ACKs, control messages) pass queued data on every link.
    small_first: bool = False
    #: Bytes htb charges every data packet beyond its length (see shape); 0: none.
    packet_cost_bytes: int = 0

    def shape(
        self,
        base_mbit: float | None,
        node_mbit: dict[int, float] | None = None,
        pair_mbit: dict[tuple[int, int], float] | None = None,
        delay_ms: float = 0.0,
        small_first: bool = False,
        packet_cost_bytes: int = 0,
    ) -> None:
        """Every link at ``base_mbit``, except nodes in ``node_mbit`` (their whole link,
        both ways) and pairs in ``pair_mbit`` (just the traffic between the two nodes).

        ``delay_ms`` > 0 delays every packet a node sends by that much (netem under each
        htb class of the node's egress, so a hop node -> node takes the delay once and a
        round trip twice); it needs netem in the kernel (:func:`qdisc_unavailable`).

        ``small_first``: IP packets under 256 bytes (TCP ACKs, a transport's control
        messages) get a class of their own that htb serves before the data class of the
        same link. A shaped link queues tens of milliseconds of data, where a real NIC
        drains its queue in microseconds; without this, an ACK or a "ready to receive"
        message going against a busy direction waits behind that queue, and a message's
        latency grows with the other traffic on the link (see docs/predict-validation.md).

        ``packet_cost_bytes`` > 0: htb charges every data packet a node sends that many
        bytes more than its length (tc's ``overhead``), so each packet holds the link for
        an extra ``packet_cost_bytes * 8 / rate``: a known latency per message for small
        messages, where a kernel without netem cannot add a delay. It costs link time
        (each GSO segment pays it once), unlike netem's delay.
        """
        nodes = range(len(self.namespaces))
        self.node_mbit = {i: (node_mbit or {}).get(i, base_mbit) for i in nodes}
        self.pair_mbit = {}
        self.delay_ms, self.small_first = delay_ms, small_first
        self.packet_cost_bytes = packet_cost_bytes
        for (a, b), mbit in (pair_mbit or {}).items():
            self.pair_mbit[(a, b)] = self.pair_mbit[(b, a)] = mbit
        for i in nodes:
            to_peers = {self.addresses[j]: m for (a, j), m in self.pair_mbit.items() if a == i}
            # Node i's egress (to every peer, or per destination) ...
            _htb(self.namespaces[i], "eth0", self.node_mbit[i], to_peers, delay_ms, small_first,
                 packet_cost_bytes)  # fmt: skip
            # ... and its ingress: the bridge port's egress towards node i.
            _htb(self.switch, f"p{i}", self.node_mbit[i], {}, small_first=small_first)

    def sysctl(self, key: str, value: str | int) -> None:
        """Set a per-namespace sysctl (e.g. net.ipv4.tcp_slow_start_after_idle) on every
        node; it goes with the namespaces, the host's value is untouched."""
        for ns in self.namespaces:
            _must("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}")

    def colbench(
        self,
        argv: Sequence[str],
        timeout_s: float = 120,
        nodes: int | None = None,
        wrapper: Sequence[str] = (),
    ) -> list[subprocess.CompletedProcess[str]]:
        """``colbench ARGV`` as one launched job: rank i on node i, labelled ``labels[i]``;
        ``nodes``: on the first that many nodes only (default: all); ``wrapper``: see
        :func:`launch_ranks`."""
        ranks = [
            (ns, {"GLOO_SOCKET_IFNAME": "eth0", "COLBENCH_NODE_LABEL": label})
            for ns, label in zip(self.namespaces, self.labels, strict=True)
        ]
        return launch_ranks(ranks[:nodes], self.addresses[0], argv, timeout_s, wrapper=wrapper)


#: netem's queue, in packets: it holds every packet sent within one delay, and its
#: default (1000) would drop at a few hundred Mbit/s and a few ms of delay.
_NETEM_LIMIT_PACKETS = 100_000


def _htb(
    ns: str,
    dev: str,
    default_mbit: float | None,
    per_dst_mbit: dict[str, float],
    delay_ms: float = 0.0,
    small_first: bool = False,
    packet_cost_bytes: int = 0,
) -> None:
    """Replace ``dev``'s root qdisc: htb at ``default_mbit``, with a class of its own for
    each destination address in ``per_dst_mbit`` (u32 filter on the IP destination);
    ``delay_ms`` > 0 puts netem with that delay under every class; ``small_first`` splits
    the default class into small packets first, then the rest; ``packet_cost_bytes`` is
    charged per data packet (see Fabric.shape)."""
    _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root")
    if default_mbit is None and not per_dst_mbit and not delay_ms:
        return
    tc = ("ip", "netns", "exec", ns, "tc")
    _must(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
    # Unshaped traffic in a shaped tree still needs a class: make it as fast as veth goes.
    mbit = default_mbit if default_mbit is not None else 10_000.0
    per_dst = dict(enumerate(sorted(per_dst_mbit.items()), start=11))
    # classid -> (parent, guaranteed Mbit/s, ceiling Mbit/s, htb prio): lower prio first.
    classes = {k: ("1:", m, m, 1) for k, (_, m) in per_dst.items()}
    if small_first:
        # Both share the link (1:1); small packets are guaranteed a sliver and served
        # first, data may use the whole link.
        classes |= {1: ("1:", mbit, mbit, 1), 2: ("1:1", mbit / 20, mbit, 0)}
        classes[10] = ("1:1", mbit * 19 / 20, mbit, 1)
    else:
        classes[10] = ("1:", mbit, mbit, 1)
    for k, (parent, rate, ceil, prio) in sorted(classes.items()):
        # Small packets (class 2) pay no per-packet cost: ACKs would take the link's time.
        cost = ("overhead", str(packet_cost_bytes)) if packet_cost_bytes and k != 2 else ()
        rates = ("rate", f"{rate:g}mbit", "ceil", f"{ceil:g}mbit", "prio", str(prio), *cost)
        _must(*tc, "class", "add", "dev", dev, "parent", parent, "classid", f"1:{k}", "htb", *rates)
        if delay_ms and k != 1:  # every leaf
            netem = ("netem", "delay", f"{delay_ms:g}ms", "limit", str(_NETEM_LIMIT_PACKETS))
            _must(*tc, "qdisc", "add", "dev", dev, "parent", f"1:{k}", "handle", f"{k}:", *netem)
    if small_first:
        # The IP header's total length (bytes 2-3) under 256: its high byte is 0.
        _must(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
              "u32", "match", "u16", "0", "0xff00", "at", "2", "flowid", "1:2")  # fmt: skip
    for k, (address, _) in per_dst.items():
        _must(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "2",
              "u32", "match", "ip", "dst", f"{address}/32", "flowid", f"1:{k}")  # fmt: skip


@contextlib.contextmanager
def fabric(nodes: int, tag: str = "") -> Iterator[Fabric]:
    """``nodes`` fresh namespaces joined through a bridge; all deleted on exit."""
    forget_the_dead()
    pid = os.getpid()
    base = f"cbfab-{pid}{tag}"
    switch = f"{base}-sw"
    namespaces = tuple(f"{base}-n{i}" for i in range(nodes))
    # A private /24 that exists only inside these namespaces.
    addresses = tuple(f"10.215.{pid % 250}.{i + 1}" for i in range(nodes))
    labels = tuple(f"node{chr(ord('A') + i)}" for i in range(nodes))
    made: list[str] = []
    try:
        for ns in (switch, *namespaces):
            _must("ip", "netns", "add", ns)
            made.append(ns)
        _must("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        _must("ip", "-n", switch, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(namespaces, addresses, strict=True)):
            # Made inside the namespaces at once: no name in the host's namespace to clash.
            _must("ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                  "peer", "name", f"p{i}", "netns", switch)  # fmt: skip
            _must("ip", "-n", switch, "link", "set", f"p{i}", "master", "br0", "up")
            _must("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _must("ip", "-n", ns, "link", "set", "eth0", "up")
            _must("ip", "-n", ns, "link", "set", "lo", "up")
        yield Fabric(namespaces, switch, addresses, labels)
    finally:
        for ns in reversed(made):
            _kill_everything_in(ns)
            # Deleting a namespace deletes its veth ends, and so the pairs and the bridge.
            _run("ip", "netns", "del", ns)
