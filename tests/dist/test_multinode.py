"""A real two-node job: two network namespaces joined by a veth pair, torchrun in each.

The namespaces are this test's own (named after its pid) and hold only private
addresses on the veth pair, with no route anywhere else, so no traffic leaves them.
They are deleted, with anything still running in them, even when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from colbench.host.launchers import preflight
from colbench.results.rows import COLUMNS, load
from tests.conftest import REPO

#: Inside a namespace we just made nothing else can hold a port, so a fixed one is free.
RDZV_PORT = 29400
JOB_TIMEOUT_S = 240


@dataclass(frozen=True)
class TwoNodes:
    namespaces: tuple[str, str]
    interfaces: tuple[str, str]
    addresses: tuple[str, str]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _kill_everything_in(namespace: str) -> None:
    pids = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
    ).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("network namespaces need Linux and root")
    if shutil.which("ip") is None:
        pytest.skip("network namespaces need iproute2's `ip`")
    pid = os.getpid()
    namespaces = (f"colbench-test-{pid}-a", f"colbench-test-{pid}-b")
    # Interface names are at most 15 characters.
    interfaces = (f"cbt{pid}a", f"cbt{pid}b")
    subnet = f"10.213.{pid % 250}"
    addresses = (f"{subnet}.1", f"{subnet}.2")
    created: list[str] = []
    try:
        try:
            _ip("netns", "add", namespaces[0])
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"this machine refuses network namespaces: {exc.stderr.strip()}")
        created.append(namespaces[0])
        _ip("netns", "add", namespaces[1])
        created.append(namespaces[1])
        _ip("link", "add", interfaces[0], "type", "veth", "peer", "name", interfaces[1])
        for ns, iface, addr in zip(namespaces, interfaces, addresses, strict=True):
            _ip("link", "set", iface, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", iface)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", iface, "up")
        yield TwoNodes(namespaces, interfaces, addresses)
    finally:
        for ns in created:
            _kill_everything_in(ns)
            # Deleting a namespace also deletes the veth end inside it, and so the pair.
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "GLOO_"))}
    return {**base, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **extra}


def _wait_all(procs: list[subprocess.Popen[str]], timeout_s: float) -> list[tuple[str, str]]:
    deadline = time.monotonic() + timeout_s
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=max(1.0, deadline - time.monotonic())))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return outputs


def _torchrun_on_both(
    two_nodes: TwoNodes, ifnames: tuple[str, str], torchrun_args: list[str], sweep: list[str]
) -> tuple[list[subprocess.Popen[str]], list[tuple[str, str]]]:
    """torchrun --nnodes 2 --nproc-per-node 2 in each namespace; waits for both."""
    master = two_nodes.addresses[0]
    procs = []
    for node in (0, 1):
        cmd = [
            "ip", "netns", "exec", two_nodes.namespaces[node],
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(node),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{master}:{RDZV_PORT}",
            # The host name resolves to loopback here: say who hosts the store and
            # which address this node is reached at, as on any such cluster.
            "--rdzv-conf", f"is_host={node == 0}".lower(),
            "--local-addr", two_nodes.addresses[node],
            *[a.replace("{node}", str(node)) for a in torchrun_args],
            "-m", "colbench", "sweep", *sweep,
        ]  # fmt: skip
        env = _env(GLOO_SOCKET_IFNAME=ifnames[node])
        procs.append(
            subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )
        )
    return procs, _wait_all(procs, JOB_TIMEOUT_S)


def _tc(namespace: str, *args: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", namespace, "tc", *args], check=True, capture_output=True,
        timeout=30,
    )  # fmt: skip


@contextlib.contextmanager
def _shaped(two_nodes: TwoNodes, rate: str) -> Iterator[None]:
    """Each node's veth held to ``rate`` by a tbf, removed afterwards."""
    if shutil.which("tc") is None:
        pytest.skip("shaping needs iproute2's `tc`")
    pairs = list(zip(two_nodes.namespaces, two_nodes.interfaces, strict=True))
    for ns, iface in pairs:
        _tc(ns, "qdisc", "add", "dev", iface, "root", "tbf", "rate", rate, "burst", "256kb",
            "latency", "100ms")  # fmt: skip
    try:
        yield
    finally:
        for ns, iface in pairs:
            subprocess.run(
                ["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", iface, "root"],
                capture_output=True, timeout=30,
            )  # fmt: skip


# Not serial: no wall-clock bound, and the namespaces are this process's own, so the job
# runs beside other tests (`make test` runs the serial ones alone).
def test_two_node_torchrun_job(two_nodes: TwoNodes, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # A rate the job's small sizes never reach, for the ceiling to come from tc.
    with _shaped(two_nodes, "4gbit"):
        _two_node_job(two_nodes, tmp_path, out)
    meta = json.loads((out / "meta.json").read_text())
    # Each node's facts, read in its namespace: its veth (toward the coordinator) at tc's
    # rate, the node's whole rate for a ring: 4 Gb/s / 8 = 0.5 GB/s (the ring of 4 ranks
    # crosses each node's link once each way).
    assert len(meta["hardware"]) == 2
    for label, iface in zip(meta["hosts"], two_nodes.interfaces, strict=True):
        facts = meta["hardware"][label]
        assert facts["interface"] == iface
        veth = next(n for n in facts["nics"] if n["name"] == iface)
        assert (veth["kind"], veth["rate_gbit_s"]) == ("virtual", 4.0)
    assert meta["ceiling"]["gbps"] == 0.5
    assert meta["ceiling"]["source"].endswith("Gb/s (tc's rate on " + two_nodes.interfaces[0]
                                              + "), the node's total")  # fmt: skip
    frame = load(out)
    assert (frame["ceiling_gbps"] == 0.5).all()
    assert (frame["pct_of_ceiling"] > 0).all()


def _two_node_job(two_nodes: TwoNodes, tmp_path: Path, out: Path) -> None:
    procs, outputs = _torchrun_on_both(
        two_nodes,
        two_nodes.interfaces,
        ["--log-dir", str(tmp_path / "logs{node}"), "--redirects", "3"],
        [
            "--op",
            "all_reduce,all_gather",
            "--sizes",
            "1K-1M",
            "-n",
            "3",
            "-w",
            "1",
            "--out",
            str(out),
        ],
    )
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr[-3000:]

    frame = load(out)
    assert list(frame.columns) == list(COLUMNS)
    assert set(frame["world_size"]) == {4}
    assert set(frame["nnodes"]) == {2}
    assert (frame["wrong"] == 0).all()
    assert set(frame["op"]) == {"all_reduce", "all_gather"}
    assert len(set(frame["requested_bytes"])) == 11  # 1K, 2K, ... 1M
    # all_reduce in place, all_gather in and out of place.
    assert len(frame) == 11 * 3
    meta = json.loads((out / "meta.json").read_text())
    assert meta["launcher"] == "torchrun" and meta["status"] == "complete"
    assert (meta["world_size"], meta["nnodes"], meta["local_world_size"]) == (4, 2, 2)
    # One host name, two nodes: labels keep them apart.
    assert len(meta["hosts"]) == 2 and meta["rank_hosts"][0] == meta["rank_hosts"][1]
    assert meta["rank_hosts"][1] != meta["rank_hosts"][2]
    # Only global rank 0 (node 0, local rank 0) prints on success.
    for node in (0, 1):
        for path in (tmp_path / f"logs{node}").rglob("*.log"):
            local_rank = int(path.parent.name)
            if (node, local_rank) != (0, 0):
                assert path.read_text() == "", f"node {node} local rank {local_rank}: {path}"


# A colbench rank with torch and colbench already imported, so the clock measures only
# what a sweep does before rendezvous; it runs the real CLI for each request on stdin.
_WARM_RANK = r"""
import contextlib, io, json, os, sys, time
import colbench.cli, colbench.commands.sweep.command, colbench.commands.sweep.task
import colbench.host.world
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    os.environ.clear()
    os.environ.update(job["env"])
    err = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stderr(err):
        try:
            colbench.cli.main(job["argv"])
            code = 0
        except SystemExit as exc:
            code = exc.code
    took = time.monotonic() - started
    print("RESULT " + json.dumps({"code": code, "seconds": took, "stderr": err.getvalue()}),
          flush=True)
"""


@contextlib.contextmanager
def _warm_rank(
    namespace: str,
) -> Iterator[Callable[[dict[str, str], list[str]], dict[str, object]]]:
    """A Python with colbench imported, in ``namespace``, that runs one command per call:
    each run then times colbench's start-up, not the interpreter's."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", _WARM_RANK],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), cwd=REPO, start_new_session=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def run(env: dict[str, str], argv: list[str]) -> dict[str, object]:
        stdin.write(json.dumps({"env": env, "argv": argv}) + "\n")
        stdin.flush()
        line = stdout.readline()
        while line and not line.startswith("RESULT "):
            line = stdout.readline()
        assert line, "the warm rank died"
        return dict(json.loads(line[len("RESULT ") :]))

    try:
        assert stdout.readline().strip() == "ready"
        yield run
    finally:
        stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.serial  # each answer is bounded to seconds
def test_preflight_catches_gloo_on_loopback_in_two_nodes(two_nodes: TwoNodes) -> None:
    # Rank 2 of the 2 x 2 job, on the second node; rank 0's node is the first namespace.
    ns, iface = two_nodes.namespaces[1], two_nodes.interfaces[1]
    rank_env = _env(
        RANK="2",
        WORLD_SIZE="4",
        LOCAL_RANK="0",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR=two_nodes.addresses[0],
        MASTER_PORT=str(RDZV_PORT),
    )
    argv = ["sweep", "--op", "all_reduce", "--sizes", "1K", "--no-table", "--init-timeout", "2"]
    with _warm_rank(ns) as warm:
        result = warm({**rank_env, "GLOO_SOCKET_IFNAME": "lo"}, argv)
        stderr = str(result["stderr"])
        assert result["code"] == 2, stderr
        assert float(result["seconds"]) < 5  # type: ignore[arg-type]
        assert stderr.startswith("colbench: error: rank 2: ") and stderr.count("\n") == 1
        assert "loopback interface lo" in stderr
        assert f"GLOO_SOCKET_IFNAME={iface}, the interface that routes to" in stderr

        # Without GLOO_SOCKET_IFNAME gloo binds what the host name resolves to; here
        # (as on many distributions) that is loopback, the classic multi-node hang.
        if preflight.is_loopback(preflight.gloo_default_address()):
            result = warm(rank_env, argv)
            stderr = str(result["stderr"])
            assert result["code"] == 2 and float(result["seconds"]) < 5, stderr  # type: ignore[arg-type]
            assert f"GLOO_SOCKET_IFNAME={iface}" in stderr

        # The right interface passes the preflight; with nobody at the master this
        # rank then waits for the rendezvous, and only --init-timeout ends it.
        result = warm({**rank_env, "GLOO_SOCKET_IFNAME": iface}, argv)
        stderr = str(result["stderr"])
        assert result["code"] == 4, stderr  # a start-up that never completes: a timeout
        assert float(result["seconds"]) >= 2  # type: ignore[arg-type]
        assert "rendezvous of 4 ranks" in stderr


@pytest.mark.serial  # bounded to a minute, where a hang would take 100 s
def test_two_node_torchrun_job_with_gloo_on_loopback_fails_fast(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    procs, outputs = _torchrun_on_both(
        two_nodes,
        ("lo", "lo"),
        [],
        ["--op", "all_reduce", "--sizes", "1K", "--out", str(out), "--init-timeout", "100"],
    )
    elapsed_s = time.monotonic() - started
    # Every rank stopped itself (usage error, exit 2) before any rendezvous: nothing
    # waited for the 100 s --init-timeout or gloo's 300 s connect timeout.
    assert elapsed_s < 60
    for node, (proc, (_, stderr)) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode != 0
        errors = [line for line in stderr.splitlines() if line.startswith("colbench: error:")]
        # torchrun stops a node's other worker as soon as one fails, so a node may print
        # one rank's error or both: each is this node's rank, never a hang.
        ranks = {e.split(":")[2] for e in errors}
        assert ranks and ranks <= {f" rank {2 * node}", f" rank {2 * node + 1}"}, stderr[-3000:]
        for line in errors:
            assert "loopback interface lo" in line
            assert f"GLOO_SOCKET_IFNAME={two_nodes.interfaces[node]}" in line
        assert "rendezvous of" not in stderr
    assert not (out / "results.csv").exists()
