"""Shared test helpers: run the real CLI in a subprocess with a hard timeout, or call it
in this process where a test checks only what a command prints, writes and returns."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

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
    from colbench.host.launchers.rendezvous import free_port

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


class _CallTimedOut(BaseException):
    """Raised into a call that ran past its timeout (BaseException: nothing may absorb it)."""


@contextlib.contextmanager
def _deadline(timeout: float) -> Iterator[None]:
    """Interrupts the main thread after ``timeout`` seconds, as run_colbench's kill would."""

    def expire(signum: int, frame: object) -> None:
        raise _CallTimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _terminal_captured(merged: bool) -> Iterator[list[str]]:
    """File descriptors 1 and 2 (and sys.stdout, sys.stderr over them, unbuffered as
    PYTHONUNBUFFERED makes them) into files, or both into one (``merged``, as
    ``stderr=STDOUT``); yields a list that gets [stdout, stderr].

    At the descriptors, so that what forked ranks write is caught as a pipe would catch
    it, in the order it was written, in a fixture of any scope."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        yield from _into((out, out) if merged else (out, err))


def _into(files: tuple[IO[bytes], IO[bytes]]) -> Iterator[list[str]]:
    saved_fds = [os.dup(1), os.dup(2)]
    saved_streams = sys.stdout, sys.stderr
    texts: list[str] = []
    try:
        for fd, file in zip((1, 2), files, strict=True):
            os.dup2(file.fileno(), fd)
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True) for fd in (1, 2)
        )
        yield texts
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved_streams
        for fd, saved in zip((1, 2), saved_fds, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        for i, file in enumerate(files):
            file.seek(0)
            texts.append("" if i and file is files[0] else file.read().decode("utf-8", "replace"))


def call_colbench(
    *args: str,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    merged: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``colbench ARGS`` called in this process, answering as run_colbench does.

    The same code from ``main()`` on, ranks included: gloo ranks are forked from the
    calling process either way, and what they write to the terminal is caught at its file
    descriptors. What it saves is an interpreter start and torch's import: seconds a
    call on a busy 2-core machine. For tests of what a command prints, writes and
    returns; signals, hangs, dying processes, launchers and what happens at import time
    need run_colbench's real process. ``env`` and ``cwd`` hold for the call only;
    ``merged``: stderr goes where stdout goes, in the order written, as a terminal shows.
    """
    from colbench.cli import main

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("call_colbench needs the main thread (its deadline is a signal)")
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    code: object = 0
    try:
        os.environ.update(env or {})
        os.chdir(cwd or REPO)
        with _terminal_captured(merged) as texts, _deadline(timeout):
            main(list(args))
    except SystemExit as exc:
        code = exc.code
    except _CallTimedOut:
        raise subprocess.TimeoutExpired(["colbench", *args], timeout) from None
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    returncode = code if isinstance(code, int) else 0 if code is None else 1
    return subprocess.CompletedProcess(["colbench", *args], returncode, *texts)


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


def _forget_nccl() -> None:
    for name in [m for m in sys.modules if m == "nccl" or m.startswith("nccl.")]:
        del sys.modules[name]


@pytest.fixture
def fake_nccl(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The recording nccl4py (tests/fakenccl), importable as ``nccl`` for this test only."""
    from tests.fakenccl import FAKE_NCCL

    monkeypatch.syspath_prepend(str(FAKE_NCCL))
    _forget_nccl()
    import nccl
    import nccl.bindings.nccl
    import nccl.core

    yield nccl
    _forget_nccl()
