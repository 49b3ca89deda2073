"""torchrun on every node of a namespace fabric (tests/netns.py), each node with a host
name of its own (``unshare --uts``), as one job of several machines: the launcher a
cluster engineer uses, not colbench's launched-mode variables set by hand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.netns import REPO, Fabric

#: torchrun's rendezvous port: inside namespaces just made nothing else can hold it.
TORCHRUN_PORT = 29400


def torchrun(
    fabric: Fabric,
    argv: Sequence[str],
    nproc_per_node: int = 1,
    timeout_s: float = 180,
    cgroup_procs: Mapping[int, Path] | None = None,
) -> list[subprocess.CompletedProcess[str]]:
    """``torchrun ... -m colbench ARGV`` on every node, as one job (c10d rendezvous at
    node 0), node i named ``fabric.labels[i]``. ``cgroup_procs`` maps a node to a
    cgroup's ``cgroup.procs`` file its torchrun (and so its ranks) joins first. One
    result per node."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCHELASTIC_", "GLOO_", "SLURM", "NODE_NAME"))
    }
    env = {**keep, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "GLOO_SOCKET_IFNAME": "eth0"}
    procs = []
    for node, (ns, label) in enumerate(zip(fabric.namespaces, fabric.labels, strict=True)):
        join = (
            f"echo $$ > {cgroup_procs[node]} && " if cgroup_procs and node in cgroup_procs else ""
        )
        rendezvous = [
            "--nnodes", str(len(fabric.namespaces)), "--nproc-per-node", str(nproc_per_node),
            "--node-rank", str(node), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{fabric.addresses[0]}:{TORCHRUN_PORT}",
            # The host name resolves to loopback here: say who hosts the store and
            # which address this node is reached at, as on any such cluster.
            # A node that never joins fails the others' rendezvous in 2 minutes, not 10.
            "--rdzv-conf", f"is_host={node == 0},join_timeout=120".lower(),
            "--local-addr", fabric.addresses[node],
        ]  # fmt: skip
        # The cgroup is joined before `ip netns exec`, which mounts a sysfs of its own.
        command = [
            "sh", "-c", f'{join}exec "$@"', "sh",
            "ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
            f'hostname {label} && exec "$@"', "sh",
            sys.executable, "-m", "torch.distributed.run", *rendezvous, "-m", "colbench", *argv,
        ]  # fmt: skip
        procs.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    return _wait_all(procs, timeout_s)


def _wait_all(
    procs: Sequence[subprocess.Popen[str]], timeout_s: float
) -> list[subprocess.CompletedProcess[str]]:
    """Wait for every process (each a session of its own); kill what outlives the deadline."""
    deadline = time.monotonic() + timeout_s
    results = []
    try:
        for proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                stderr += f"\n[killed at the {timeout_s:.0f} s deadline]"
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return results
