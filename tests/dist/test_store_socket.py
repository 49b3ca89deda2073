"""The parent's listening socket has one owner once a store serves on it.

The store's server thread closes the descriptor it was given when the store goes. The
parent used to close the same number from Python as well, first: a file opened in
between took the number and lost it to the store's close, and a later
``subprocess.run(preexec_fn=...)`` failed with EBADF when a collection in its child
closed that file's stale object (seen as a flaky test after in-process p2p runs).
"""

from __future__ import annotations

import gc
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest

from colbench.host import spawn, turns
from tests.conftest import REPO


def _run_store(listener: socket.socket) -> Any:
    return spawn._serve_store(listener, world_size=1, timeout_s=30)


def _turn_store(listener: socket.socket) -> Any:
    store = turns.serve(spawn.LOCAL_HOST, listener.fileno(), listener.getsockname()[1])
    spawn.hand_over(listener)  # as interleave.run_interleaved does
    return store


@pytest.mark.parametrize("serve", [_run_store, _turn_store], ids=["run store", "turn store"])
def test_a_file_opened_while_the_store_serves_keeps_its_descriptor(
    serve: Callable[[socket.socket], Any],
) -> None:
    listener = spawn.listen_loopback()
    number = listener.fileno()
    store = serve(listener)
    listener.close()  # what the parent does when the world has ended
    # A file opened now, as matplotlib opens a font: the lowest free number.
    fd = os.open(REPO / "pyproject.toml", os.O_RDONLY)
    try:
        inode = os.fstat(fd).st_ino
        del store
        gc.collect()  # the store's server thread goes, and closes what it owns
        assert os.fstat(fd).st_ino == inode
        assert fd != number  # the listener's number is still the store's, or closed once
    finally:
        os.close(fd)
