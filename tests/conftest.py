"""Shared test helpers: run the real CLI in a subprocess with a hard timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_colbench(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m colbench ARGS` as a user would run it; never hangs the test session."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd or REPO,
        check=False,
    )


def run_script(
    *argv: str, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """A script of the repository (scripts/...) as CI runs it, from the checkout, with
    ``env`` over this environment (PY: this interpreter)."""
    return subprocess.run(
        list(argv),
        cwd=REPO,
        env={**os.environ, "PY": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def colbench():
    return run_colbench


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Layers by directory: tests/dist are real gloo ranks, tests/gpu need CUDA GPUs.
    for item in items:
        path = str(item.path)
        if f"{os.sep}dist{os.sep}" in path:
            item.add_marker(pytest.mark.dist)
        if f"{os.sep}gpu{os.sep}" in path:
            item.add_marker(pytest.mark.gpu)


def start_ranks(
    world_size: int,
    args: Callable[[int], Sequence[str]],
    env: Callable[[int], Mapping[str, str]] = lambda rank: {},
) -> list[subprocess.Popen[str]]:
    """The ranks of one job started by hand, as torchrun's workers are (env://, rank 0
    hosts the store): ``python -m colbench *args(rank)`` with ``env(rank)`` on top."""
    from colbench.launch import free_port

    port = str(free_port())
    procs = []
    for rank in range(world_size):
        full_env = {
            **os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
            "RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, **env(rank),
        }  # fmt: skip
        pipe = subprocess.PIPE
        cmd = [sys.executable, "-m", "colbench", *args(rank)]
        procs.append(
            subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True, env=full_env, cwd=REPO)
        )
    return procs


def finish_ranks(procs: list[subprocess.Popen[str]], timeout_s: float) -> list[tuple[int, str]]:
    """Each rank's (exit code, stderr); ranks still running after ``timeout_s`` are killed."""
    results = []
    try:
        for proc in procs:
            try:
                _, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, stderr = proc.communicate()
            results.append((proc.returncode, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI in-process (no interpreter start): (exit code, stdout, stderr)."""
    from colbench.cli import main

    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
