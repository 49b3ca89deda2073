"""Failures provoked for real: killed, stopped, interrupted and starved ranks.

Each test asserts the exit code, the one-line message, and what is on disk.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from colbench.host.launchers.rendezvous import free_port
from colbench.host.supervise import GRACE_S
from colbench.host.watchdog import EXCHANGE_S
from colbench.results.rows import load
from tests.conftest import REPO, call_colbench, process_alive

SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1K-1M", "-n", "20", "--no-table"]


def start(
    out: Path, *extra: str, env: dict[str, str] | None = None, **popen: object
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "colbench", *SWEEP, "--out", str(out), *extra],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[arg-type]
    )


def wait_for_rows(
    out: Path, rows: int, proc: subprocess.Popen[str], timeout_s: float = 120
) -> list[int]:
    """Block until the CSV has ``rows`` data rows; returns the rank pids from meta.json."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            with open(out / "results.csv") as f:
                if sum(1 for _ in f) - 1 >= rows:
                    return [
                        int(p) for p in json.loads((out / "meta.json").read_text())["rank_pids"]
                    ]
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError("sweep produced no rows in time")


def survivors(pids: list[int], within_s: float) -> list[int]:
    """The pids still alive after ``within_s`` (returns as soon as none is)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(process_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if process_alive(p)]


def one_line(stderr: str, needle: str) -> str:
    lines = [line for line in stderr.splitlines() if needle in line]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


def test_rank_exception_is_named_and_rows_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # In-process: the ranks are forked either way, and a rank's exception is no death.
    proc = call_colbench(*SWEEP, "--out", str(out), env={"COLBENCH_FAULT": "1:4"})
    assert proc.returncode == 3
    line = one_line(proc.stderr, "failed during")
    assert "rank 1 on" in line and "pid" in line
    assert "timed batch of all_reduce float32 size 8192 B" in line
    assert "fault injected" in line
    assert len(load(out)) == 3  # 1K, 2K, 4K finished before the fault at 8K
    assert "3 rows measured before the failure (of 11 planned)" in proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["rows_complete"] is False
    assert (meta["failed_rank"], meta["failed_op"], meta["failed_size_bytes"]) == (
        1,
        "all_reduce",
        8192,
    )
    assert "fault injected" in meta["error"]
    # The other rank's consequential error is kept in its log, not printed.
    assert "Traceback" in (out / "rank1.log").read_text()


def test_a_failure_after_the_last_row_says_the_rows_are_complete(tmp_path: Path) -> None:
    # A long sweep once measured all of its rows, then failed in its end-of-run summary:
    # the verdict must say that nothing measured is missing.
    out = tmp_path / "run"
    proc = call_colbench(
        *SWEEP, "--sizes", "1K-4K", "--out", str(out), env={"COLBENCH_FAULT": "0:end"}
    )
    assert proc.returncode == 3
    line = one_line(proc.stderr, "failed during")
    assert "the end-of-run summary, after the last row" in line, line
    kept = one_line(proc.stderr, "every row was measured before the failure")
    assert "all 3 are in" in kept and "complete" in kept
    assert len(load(out)) == 3
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["rows_complete"] is True
    assert meta["rows"] == meta["rows_planned"] == 3


def test_sigkilled_rank_is_named_with_oom_hint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start(out, "--timeout", "30")
    pids = wait_for_rows(out, 2, proc)
    killed_at = time.monotonic()
    os.kill(pids[1], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - killed_at < 30 + 5
    assert proc.returncode == 3
    line = one_line(stderr, "killed by SIGKILL")
    assert f"rank 1 on {os.uname().nodename} (pid {pids[1]})" in line
    assert "all_reduce float32 size" in line and "out-of-memory" in line
    rows = load(out)
    assert len(rows) >= 2 and (rows["wrong"] == 0).all()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["failed_rank"] == 1
    assert meta["failed_size_bytes"] >= 2048 and meta["error"] == "killed by SIGKILL"


#: After --timeout, by design: rank 0 waits EXCHANGE_S for the hung rank's report and
#: EXCHANGE_S for it to leave the store, the parent GRACE_S for it to exit; SLACK_S: the
#: kill, the report, a busy core. (5 s after --timeout, below the design's 6, failed
#: beside busy loops.) A watchdog that never fired leaves it to torch's timeout, 30 s on.
HANG_TIMEOUT_S, SLACK_S = 5, 3
HANG_VERDICT_S = HANG_TIMEOUT_S + 2 * EXCHANGE_S + GRACE_S + SLACK_S


@pytest.mark.serial  # the verdict is bounded to HANG_VERDICT_S after the hang
def test_hung_rank_is_bounded_by_timeout_and_named(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start(out, "--timeout", str(HANG_TIMEOUT_S))
    pids = wait_for_rows(out, 2, proc)
    stopped_at = time.monotonic()
    os.kill(pids[1], signal.SIGSTOP)  # a real hang: the process never runs again
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        if process_alive(pids[1]):
            os.kill(pids[1], signal.SIGKILL)
    assert time.monotonic() - stopped_at < HANG_VERDICT_S
    assert proc.returncode == 4
    line = one_line(stderr, "timed out after 5 s")
    assert "rank(s) 1" in line and "all_reduce float32 size" in line
    assert not process_alive(pids[0]) and not process_alive(pids[1])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["failed_rank"] == 1 and meta["exit_code"] == 4
    assert len(load(out)) >= 2


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _default_sigint() -> None:
    # As from an interactive shell: pytest itself may run as a script's background job,
    # whose children inherit an ignored SIGINT, or under nohup, whose children inherit an
    # ignored SIGHUP; colbench keeps an ignored one ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


# Each signal sent to the group reaches the parent too, through the one handler that
# every stopping signal shares (colbench.host.supervise), and the ranks, which ignore
# SIGINT, SIGHUP and SIGQUIT and die of SIGTERM: the cases that differ. A signal to the
# parent alone is the term-sigint-ignored case (a parent-only SIGINT, SIGHUP or SIGQUIT
# took the same handler and the same stop of the ranks: a real run each, for nothing).
@pytest.mark.parametrize(
    ("signum", "target", "preexec"),
    [
        (signal.SIGINT, "group", _default_sigint),
        (signal.SIGTERM, "group", _default_sigint),
        # `colbench ... &` in a script starts with SIGINT ignored; SIGTERM stops it.
        (signal.SIGTERM, "parent", _ignore_sigint),
        # A terminal or ssh session that goes away, Ctrl-\: as SIGTERM (129, 131).
        (signal.SIGHUP, "group", _default_sigint),
        (signal.SIGQUIT, "group", _default_sigint),
    ],
    ids=["int-group", "term-group", "term-sigint-ignored", "hup-group", "quit-group"],
)
def test_interrupt_stops_cleanly(
    tmp_path: Path, signum: int, target: str, preexec: Callable[[], None] | None
) -> None:
    out = tmp_path / "run"
    proc = start(out, start_new_session=True, preexec_fn=preexec)
    pids = wait_for_rows(out, 2, proc)
    if target == "group":
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    line = one_line(stderr, "interrupted")
    assert "rows kept" in line
    assert survivors(pids, within_s=5) == []
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    assert len(load(out)) >= 2


def test_an_ignored_sigint_stays_ignored(tmp_path: Path) -> None:
    # A script's background job starts with SIGINT ignored; by the shell's convention it
    # stays so (Ctrl-C at the script's terminal is not for it), at every moment of the
    # run: sent at once (Python still starting) and again once rows are coming.
    out = tmp_path / "run"
    proc = start(out, preexec_fn=_ignore_sigint)
    os.kill(proc.pid, signal.SIGINT)
    wait_for_rows(out, 2, proc)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "interrupted" not in stderr
    assert json.loads((out / "meta.json").read_text())["status"] == "complete"


@pytest.fixture(scope="module")
def killed_mid_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], list[int]]:
    """One sweep, its parent SIGKILLed once rows come: (the local addresses the parent and
    its ranks listened on meanwhile, the ranks still alive 5 s after the kill)."""
    out = tmp_path_factory.mktemp("killed") / "run"
    proc = start(out, "--sizes", "1K-16M")
    pids = wait_for_rows(out, 1, proc)
    try:
        addresses = _listening_addresses([proc.pid, *pids])
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    return addresses, survivors(pids, within_s=5)


def test_ranks_die_with_a_killed_parent(killed_mid_run: tuple[set[str], list[int]]) -> None:
    assert killed_mid_run[1] == []


def test_memory_limit_skips_what_does_not_fit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_gather", "--sizes", "1M,64M", "-n", "1", "-w", "0",
        "--memory-limit", "96M", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Out-of-place and in-place all_gather at 64M need 64M + 32M + 64M + scratch per rank.
    assert "all_gather float32: sizes from 67108864 B need" in proc.stderr
    assert "skipped" in proc.stderr
    assert set(load(out)["requested_bytes"]) == {1048576}
    meta = json.loads((out / "meta.json").read_text())
    assert any("67108864" in w for w in meta["warnings"])


def test_memory_check_refuse_is_a_usage_error(tmp_path: Path) -> None:
    proc = call_colbench(
        "sweep", "--sizes", "1M,64M", "--memory-limit", "96M", "--memory-check", "refuse",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 2
    line = one_line(proc.stderr, "colbench: error:")
    assert "not enough memory" in line


def test_allocator_error_becomes_row_status(tmp_path: Path) -> None:
    """An address-space limit makes the 2G allocation fail for real inside the ranks."""
    limit = 2500 * 2**20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "colbench", "sweep", "--op", "all_reduce", "--sizes", "1M,2G",
         "-n", "2", "-w", "1", "--memory-check", "off", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=cap, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    rows = load(out)
    by_size = rows.set_index("requested_bytes")["status"].to_dict()
    assert by_size == {1048576: "ok", 2147483648: "oom"}
    assert "could not allocate" in proc.stderr
    assert "oom" in proc.stdout


def _memory_cgroup(limit_bytes: int) -> Path:
    line = next(
        (ln for ln in Path("/proc/self/cgroup").read_text().splitlines() if ":memory:" in ln), None
    )
    if line is None:
        pytest.skip("no cgroup v1 memory controller here")
    parent = Path("/sys/fs/cgroup/memory") / line.split(":", 2)[2].lstrip("/")
    group = parent / f"colbench-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
    except OSError as exc:
        pytest.skip(f"cannot create a memory cgroup here: {exc}")
    return group


@pytest.mark.parametrize("memory_check", ["skip", "off"])
def test_cgroup_memory_limit(tmp_path: Path, memory_check: str) -> None:
    """Inside a real 1.5 GiB memory cgroup, the check skips 1G; without it, the kernel
    OOM-kills a rank and colbench names it."""
    group = _memory_cgroup(1536 * 2**20)

    def enter() -> None:
        (group / "cgroup.procs").write_text(str(os.getpid()))

    out = tmp_path / "run"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "colbench", "sweep", "--op", "all_reduce", "--sizes",
             "16M,1G", "-n", "1", "-w", "0", "-c", "0", "--memory-check", memory_check,
             "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=enter, check=False,
        )  # fmt: skip
    finally:
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    if memory_check == "skip":
        assert proc.returncode == 0, proc.stderr
        assert "sizes from 1073741824 B need" in proc.stderr
        assert set(load(out)["requested_bytes"]) == {16 * 2**20}
    else:
        assert proc.returncode == 3, proc.stderr
        line = one_line(proc.stderr, "killed by SIGKILL")
        assert "size 1073741824 B" in line and "out-of-memory" in line
        assert set(load(out)["requested_bytes"]) == {16 * 2**20}


def test_ranks_that_disagree_on_the_plan_stop_with_a_message(tmp_path: Path) -> None:
    """Two ranks started by hand (env:// like torchrun) with different sizes."""
    port = str(free_port())
    procs = []
    for rank, sizes in ((0, "1K-4K"), (1, "1K-8K")):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}  # fmt: skip
        args = ["sweep", "--sizes", sizes, "--timeout", "30"]
        if rank == 0:
            args += ["--out", str(tmp_path / "run")]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "colbench", *args],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (_, stderr) in zip(procs, results, strict=True):
        assert proc.returncode == 2, stderr
        line = one_line(stderr, "colbench: error:")
        assert "ranks disagree on the sweep" in line


def test_debug_detail_is_warned_and_recorded_and_env_is_allow_listed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "MY_API_SECRET": "hunter2",
           "NCCL_IB_HCA": "mlx5", "GLOO_ACCESS_TOKEN": "hunter3"}  # fmt: skip
    proc = call_colbench("sweep", "--sizes", "1K", "-n", "2", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["env"]["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert meta["env"]["NCCL_IB_HCA"] == "mlx5"
    assert any("DETAIL" in w for w in meta["warnings"])
    text = (out / "meta.json").read_text()
    assert "hunter2" not in text and "hunter3" not in text
    assert all(k.startswith(("NCCL_", "TORCH_", "CUDA_", "GLOO_", "OMP_")) for k in meta["env"])


def _listening_addresses(pids: list[int]) -> set[str]:
    """Local addresses of the TCP sockets these processes listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.add(fields[1].rsplit(":", 1)[0])
    return addresses


def test_single_node_run_listens_on_loopback_only(
    killed_mid_run: tuple[set[str], list[int]],
) -> None:
    addresses = killed_mid_run[0]
    assert addresses, "found no listening sockets"
    assert addresses == {"0100007F"}, addresses  # 127.0.0.1, little-endian hex
