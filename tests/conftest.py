"""Shared test helpers: run the real CLI in a subprocess with a hard timeout."""

from __future__ import annotations

import os
import subprocess
import sys
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
