"""A profile hook for benchmarks/job_rooms.py: with COLBENCH_ROOMS=DIR set, every Python
process started with this directory on PYTHONPATH (and every process forked from one)
writes DIR/<pid>.txt: the colbench modules whose functions it calls, one a line, in the
order it first enters them. Code that runs because a module is imported (its ``<module>``
code, class bodies, and what they call: dataclasses' generated methods, tables built at
import) is not working in a module: a module first called that way is written
``import <module>``, and again plainly if the job calls into it later.

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
        self.imported: set[str] = set()
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
        if module in self.seen:
            return
        if not _importing(frame.f_back):
            self.seen.add(module)
            self.out.write(f"{module}\n")
        elif module not in self.imported:
            self.imported.add(module)
            self.out.write(f"import {module}\n")


def _importing(frame: FrameType | None) -> bool:
    """Whether this call is made by an import: a module's own code is on the stack (the
    program's ``__main__`` is a module too, and runs everything else)."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") not in (
            "__main__",
            "__mp_main__",
        ):
            return True
        frame = frame.f_back
    return False


if _DIR:
    _rooms = _Rooms(_DIR)
    sys.setprofile(_rooms)
    threading.setprofile(_rooms)
    # A forked rank starts its own count, in its own file.
    os.register_at_fork(after_in_child=_rooms.start)
