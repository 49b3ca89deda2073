"""What a rank is doing now, published so that a failure or a hang can name it."""

from __future__ import annotations

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
