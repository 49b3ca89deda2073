"""What a p2p run measures and how it judges: one frozen dataclass, checked on creation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from colbench.analysis.links import DEFAULT_BW_PCT, DEFAULT_LATENCY_PCT
from colbench.config import SweepConfig
from colbench.errors import UsageError
from colbench.sizes import parse_size

#: A run label: run directories are named <timestamp>-p2p-<backend>.
RUN_LABEL = "p2p"


@dataclass(frozen=True)
class P2PConfig:
    """A complete p2p request."""

    size_bytes: int = 64 * 1024**2
    """Message size of the bandwidth measurement (binary units)."""
    latency_bytes: int = 8
    """Message size of the latency (ping-pong) measurement."""
    bidirectional: bool = False
    """Both ranks of a pair send at once (osu_bibw); default one direction at a time."""
    serial: bool = False
    """One pair at a time instead of rounds of disjoint pairs."""
    per_node: bool = False
    """Only the first rank of each node takes part: a matrix of nodes."""
    rail: bool = False
    """Local rank k pairs only with local rank k of the other nodes (one NIC per rail)."""
    iters: int = 20
    """Timed messages (round trips, for latency) per ordered pair."""
    warmup: int = 5
    """Untimed messages per ordered pair before timing (at least one: connection set-up)."""
    repeat: int = 1
    """Passes over the whole matrix, one after the other; each pair gets a row per pass,
    and the verdict judges each pair's median over the passes."""
    bw_pct: float = DEFAULT_BW_PCT
    """A link more than this % below the median bandwidth is slow."""
    latency_pct: float = DEFAULT_LATENCY_PCT
    """A link more than this % above the median latency is slow."""
    fail_below_pct: float | None = None
    """Exit 1 when any link's bandwidth is more than this % below the median."""
    plot: bool = True
    """Write the heatmap p2p.png into the run directory."""
    backend: str = "auto"
    nprocs: int | None = None
    timeout_s: float = 300.0
    init_timeout_s: float = 120.0
    out_dir: str | None = None
    results_root: str = "results"
    command_line: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.size_bytes < 1 or self.latency_bytes < 1:
            raise UsageError("--size and --latency-size must be at least 1 byte")
        if self.iters < 1:
            raise UsageError(f"--iters must be at least 1, got {self.iters}")
        if self.repeat < 1:
            raise UsageError(f"--repeat must be at least 1, got {self.repeat}")
        if self.warmup < 0:
            raise UsageError(f"--warmup must be 0 or more, got {self.warmup}")
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
        if self.nprocs is not None and self.nprocs < 2:
            raise UsageError(
                f"p2p measures pairs of ranks: --nprocs must be 2 or more, got {self.nprocs}"
            )
        if self.backend not in ("auto", "gloo", "nccl"):
            raise UsageError(f"bad --backend {self.backend!r}: use auto, gloo, nccl")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def run_config(self) -> SweepConfig:
        """What the shared start-up (colbench.run) reads: timeouts, backend, run directory.

        ``ops`` only names the run directory; no collective of the sweep runs.
        """
        return SweepConfig.of(
            ops=(RUN_LABEL,),
            sizes_bytes=(self.size_bytes,),
            iters=self.iters,
            warmup=self.warmup,
            backend=self.backend,
            nprocs=self.nprocs,
            timeout_s=self.timeout_s,
            init_timeout_s=self.init_timeout_s,
            out_dir=self.out_dir,
            results_root=self.results_root,
            command_line=self.command_line,
        )


def from_options(size: str, latency_size: str, **fields: Any) -> P2PConfig:
    """A config from the command line's values: sizes as text (binary units), rest as is."""
    return P2PConfig(size_bytes=parse_size(size), latency_bytes=parse_size(latency_size), **fields)
