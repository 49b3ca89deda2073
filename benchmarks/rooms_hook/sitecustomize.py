"""A profile hook for benchmarks/job_rooms.py: with COLBENCH_ROOMS=DIR set, every Python
process started with this directory on PYTHONPATH (and every process forked from one)
writes DIR/<pid>.txt: the colbench modules whose functions it calls, one a line, in the
order it first enters them. Code that runs because a module is imported (its ``<module>``
code and its class bodies) is not a call into it: importing a module is not working in it;
what that code calls is.

The first line is ``pid <pid> ppid <ppid>``; a line ``rank <n>`` follows once the process
enters ``rank_main`` (the host's one entry into a rank, spawned or launched), so that a
reader can tell the parent from the ranks.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from types import FrameType
from typing import Any

_DIR = os.environ.get("COLBENCH_ROOMS")


class _Rooms:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.start()

    def start(self) -> None:
        self.seen: set[str] = set()
        self.ranked = False
        # Line-buffered: ranks end with os._exit, which flushes nothing.
        self.out = open(  # noqa: SIM115
            os.path.join(self.directory, f"{os.getpid()}.txt"), "w", buffering=1
        )
        self.out.write(f"pid {os.getpid()} ppid {os.getppid()}\n")

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        # Functions' code is optimised (fast locals); a module's and a class body's is not.
        if not code.co_flags & inspect.CO_OPTIMIZED:
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("colbench"):
            return
        if code.co_name == "rank_main" and not self.ranked:
            self.ranked = True
            self.out.write(f"rank {frame.f_locals.get('rank')}\n")
        if module not in self.seen:
            self.seen.add(module)
            self.out.write(f"{module}\n")


if _DIR:
    _rooms = _Rooms(_DIR)
    sys.setprofile(_rooms)
    threading.setprofile(_rooms)
    # A forked rank starts its own count, in its own file.
    os.register_at_fork(after_in_child=_rooms.start)
