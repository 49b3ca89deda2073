"""What a p2p run measures and how it judges: one frozen dataclass, checked on creation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from colbench.commands.p2p.options import (
    DEFAULT_BW_PCT,
    DEFAULT_LATENCY_PCT,
    DEFAULT_MAX_TIME_S,
    DEFAULT_PASSES,
)
from colbench.config.model import BACKENDS, TaskRunFields, default_timeout
from colbench.config.option_table import Option, config_values
from colbench.config.validate import validate_counts, validate_launch
from colbench.errors import UsageError

#: A run label: run directories are named <timestamp>-p2p-<backend>.
RUN_LABEL = "p2p"
#: NCCL's default bandwidth window (see colbench.commands.p2p.measure) and the most allowed.
NCCL_WINDOW = 8
MAX_WINDOW = 1024
Cfg = TypeVar("Cfg", bound=TaskRunFields)


@dataclass(frozen=True)
class P2PConfig(TaskRunFields):
    """A complete p2p request: each field is the option of its name (``to``) in
    colbench.commands.p2p.options, whose help says what it means."""

    size_bytes: int = 64 * 1024**2
    latency_bytes: int = 8
    bidirectional: bool = False
    window: int | None = None
    """None: 8 on NCCL, whose every exchange is a kernel launch, 1 on gloo
    (colbench.commands.p2p.measure)."""
    serial: bool = False
    per_node: bool = False
    rail: bool = False
    iters: int = 20
    warmup: int = 5
    """At least one is sent whatever this says: a pair's first message sets it up."""
    repeat: int = DEFAULT_PASSES
    bw_pct: float = DEFAULT_BW_PCT
    latency_pct: float = DEFAULT_LATENCY_PCT
    fail_below_pct: float | None = None
    max_time_s: float = DEFAULT_MAX_TIME_S
    plot: bool = True

    def __post_init__(self) -> None:
        if self.size_bytes < 1 or self.latency_bytes < 1:
            raise UsageError("--size and --latency-size must be at least 1 byte")
        if self.nprocs is not None and self.nprocs < 2:
            raise UsageError(
                f"p2p measures pairs of ranks: --nprocs must be 2 or more, got {self.nprocs}"
            )
        # The counts and timeouts p2p shares with sweep pass sweep's checks.
        validate_counts(iters=self.iters, repeat=self.repeat, warmup=self.warmup, seed=0, root=0)
        validate_launch(self.launch)
        if not math.isfinite(self.max_time_s) or self.max_time_s <= 0:
            raise UsageError(f"--max-time is a number of seconds above 0, got {self.max_time_s:g}")
        if self.window is not None and not 1 <= self.window <= MAX_WINDOW:
            raise UsageError(f"--window takes 1 to {MAX_WINDOW} messages, got {self.window}")
        if self.per_node and self.rail:
            raise UsageError("--per-node and --rail pick ranks differently: choose one")
        for flag, pct in (
            ("--threshold", self.bw_pct),
            ("--latency-threshold", self.latency_pct),
            ("--fail-below", self.fail_below_pct),
        ):
            if pct is not None and pct <= 0:
                raise UsageError(f"{flag} is a percentage above 0, got {pct:g}")
        if self.bw_pct >= 100 or (self.fail_below_pct or 0) >= 100:
            raise UsageError("a bandwidth cannot be 100% or more below the median: use less")
        if self.backend not in BACKENDS:
            raise UsageError(f"bad --backend {self.backend!r}: use {', '.join(BACKENDS)}")

    def window_for(self, backend: str) -> int:
        """The bandwidth window this run uses on ``backend``."""
        if self.window is not None:
            return self.window
        return NCCL_WINDOW if backend == "nccl" else 1


def config_from(
    cls: type[Cfg], rows: tuple[Option, ...], values: Mapping[str, Any], line: tuple[str, ...]
) -> Cfg:
    """A task's config (p2p's, health's) from the command line's values: each option of
    ``rows`` into the field it declares (sizes in binary units), the timeouts not given
    defaulted for the fabric, then the config's checks."""
    fields = config_values(rows, values)
    for name in ("timeout_s", "init_timeout_s"):
        fields[name] = default_timeout(
            fields[name], fields["ranks_per_gpu"], init=name == "init_timeout_s"
        )
    return cls(**fields, command_line=line)


def from_options(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> P2PConfig:
    """A config from the command line's values (colbench.commands.p2p.options)."""
    from colbench.commands.p2p.options import table

    return config_from(P2PConfig, table(), values, command_line)
