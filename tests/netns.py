"""A real, rate-limited network between two ranks: two namespaces joined by a veth pair.

Each namespace holds one end of the pair and a private /30 address; ``tc`` shapes both
ends with a token bucket, so the link rate, not the CPU, sets how long a large
collective takes. colbench runs once in each namespace in launched mode (RANK,
WORLD_SIZE, MASTER_ADDR, ...), exactly as under a real launcher on two hosts. Used by
the gate's throttle tests and by benchmarks/gate_power.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from colbench.launch import free_port

REPO = Path(__file__).resolve().parent.parent
_IP_TIMEOUT_S = 30


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


@dataclass(frozen=True)
class VethPair:
    namespaces: tuple[str, str]
    interfaces: tuple[str, str]
    addresses: tuple[str, str]

    def set_rate(self, rate_mbit: float) -> None:
        """Shape both directions to ``rate_mbit`` (token bucket; replaces any earlier rate)."""
        for ns, iface in zip(self.namespaces, self.interfaces, strict=True):
            _must(
                "ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", iface, "root",
                "tbf", "rate", f"{rate_mbit:g}mbit", "burst", "32kbit", "latency", "50ms",
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
        port = free_port()
        procs = []
        for rank, (ns, iface) in enumerate(zip(self.namespaces, self.interfaces, strict=True)):
            env = {
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "RANK": str(rank),
                "WORLD_SIZE": "2",
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": self.addresses[0],
                "MASTER_PORT": str(port),
                "GLOO_SOCKET_IFNAME": iface,
            }
            command = ["ip", "netns", "exec", ns, sys.executable, "-m", "colbench", "sweep"]
            if cgroup_procs and rank in cgroup_procs:
                join = f'echo $$ > {cgroup_procs[rank]} && exec "$@"'
                command = ["sh", "-c", join, "sh", *command]
            procs.append(
                subprocess.Popen(
                    [*command, *args, "--out", str(out)],
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
                results.append(
                    subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
                )
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        first, second = results
        if second.returncode != 0:
            first.stderr += f"\n[rank 1 exit {second.returncode}]\n{second.stderr}"
            first.returncode = first.returncode or second.returncode
        return first


@contextlib.contextmanager
def veth_pair(tag: str = "") -> Iterator[VethPair]:
    """Two fresh namespaces joined by a veth pair; deleted on exit, also after a failure."""
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
