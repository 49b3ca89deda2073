"""A test run SIGKILLed mid-way leaves its namespaces behind; the next one deletes them."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests import netns

_reason = netns.unavailable()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"no network namespaces: {_reason}")


def _names() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.split()}


def test_namespaces_of_a_dead_maker_go_and_a_live_ones_stay() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process
    dead = f"cbfab-{gone.pid}left-n0"
    live = f"cbfab-{os.getpid()}kept-n0"
    for name in (dead, live):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert dead in netns.forget_the_dead()
        assert dead not in _names() and live in _names()
    finally:
        for name in (dead, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
