"""Fault injection for the failure-handling tests (``COLBENCH_FAULT``)."""

from __future__ import annotations

import os
import time


class Fault:
    """``COLBENCH_FAULT=RANK:WHEN[:raise|exit|hang|device-hang]``: make RANK fail at its
    WHEN-th timed batch, with WHEN ``init`` as its communicator starts (see
    :meth:`at_init`), ``side`` as its side group starts (:meth:`at_side_group`), or
    ``end`` after its last row (:meth:`at_end`).

    ``hang`` blocks the rank's main thread for ever, as a rank stuck outside any
    collective would; ``device-hang`` stalls its GPU instead (``hang`` on CPU).
    A testing aid for the failure-handling tests (like torch's own
    debug variables); unset in normal use.
    """

    def __init__(self, rank: int, spec: str | None) -> None:
        self.at_step: int | None = None
        self.at_start = False
        self.at_side = False
        self.at_finish = False
        self.action = "raise"
        self.count = 0
        if not spec:
            return
        parts = spec.split(":")
        # RANK:start:... is the spawned rank's own hook (host/spawn.py), read before this exists.
        if int(parts[0]) == rank and parts[1] != "start":
            self.at_start = parts[1] == "init"
            self.at_side = parts[1] == "side"
            self.at_finish = parts[1] == "end"
            named = self.at_start or self.at_side or self.at_finish
            self.at_step = None if named else int(parts[1])
            self.action = parts[2] if len(parts) > 2 else "raise"

    def tick(self) -> None:
        if self.at_step is None:
            return
        self.count += 1
        if self.count == self.at_step:
            self._fail(f"timed batch {self.count}")

    def at_init(self) -> None:
        """Called as the rank's communicator starts, before ``init_process_group``."""
        if self.at_start:
            self._fail("communicator start-up")

    def at_side_group(self) -> None:
        """Called as the rank's side group starts, before its ``new_group``."""
        if self.at_side:
            self._fail("side group start-up")

    def at_end(self) -> None:
        """Called once every row is measured, before the end-of-run summary."""
        if self.at_finish:
            self._fail("the end of the run")

    def _fail(self, where: str) -> None:
        if self.action == "exit":
            os._exit(7)
        # Here, not at import: the parent reads in-flight steps without loading torch.
        import torch

        if self.action == "device-hang" and torch.cuda.is_initialized():
            # A kernel that spins far past any --timeout: the host then blocks in a CUDA
            # synchronize, as when a collective or a graph replay never completes.
            torch.cuda._sleep(1 << 42)
            return
        if self.action in ("hang", "device-hang"):
            while True:
                time.sleep(3600)
        raise RuntimeError(f"fault injected by COLBENCH_FAULT at {where}")
