"""What a rank is doing now, published so that a failure or a hang can name it, and the
faults the failure-handling tests inject into it (``COLBENCH_FAULT``)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class InFlight:
    """What this rank is doing now, so a failure can name it.

    With a store (the parent's TCPStore), every step is published under
    ``progress/<rank>`` so the parent can name the op and size a rank died in, and tell
    which ranks never reached a collective the others are stuck in.
    """

    op: str = ""
    dtype: str = ""
    size_bytes: int | None = None
    phase: str = "setup"
    #: Collective steps begun so far; ranks that agree on the plan agree on this count.
    seq: int = 0
    store: Any = None
    rank: int = 0
    #: When and where the first exception hit this rank (wall clock, for ordering ranks).
    failed_at: float | None = None
    failed_during: str | None = None
    #: When the current step or phase began (time.monotonic), for the hang watchdog.
    since_s: float = field(default_factory=time.monotonic)
    #: Rank 0's forecast of the run (colbench.host.pace.Pace); None on the other ranks.
    pace: Any = None

    def __setattr__(self, name: str, value: Any) -> None:
        # colbench.host and the bench loop also assign ``phase`` directly: each phase, like
        # each step, starts the watchdog's clock afresh.
        if name == "phase":
            object.__setattr__(self, "since_s", time.monotonic())
        object.__setattr__(self, name, value)

    def failed(self, exc: BaseException) -> None:
        if self.failed_at is None:
            self.failed_at = time.time()
            self.failed_during = self.describe()

    def step(self, phase: str) -> None:
        self.phase = phase
        self.seq += 1
        if self.store is not None:
            self.store.set(f"progress/{self.rank}", self.encode())

    def encode(self) -> str:
        size = "" if self.size_bytes is None else str(self.size_bytes)
        return "|".join((str(self.seq), self.op, self.dtype, size, self.phase))

    @classmethod
    def decode(cls, text: str) -> InFlight:
        seq, op, dtype, size, phase = text.split("|", 4)
        return cls(op, dtype, int(size) if size else None, phase, int(seq))

    def describe(self) -> str:
        if not self.op:
            return self.phase
        size = "" if self.size_bytes is None else f" size {self.size_bytes} B"
        return f"{self.phase} of {self.op} {self.dtype}{size}".strip()


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
