"""What a rank is given (:class:`RankJob`) and what it tells its peers (:class:`Peer`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from colbench.config.model import SweepConfig
from colbench.run.turns import TurnSpec
from colbench.store import metadata


class RankTask(Protocol):
    """Another job for the ranks than a sweep (``colbench p2p``): same start-up, own body.

    Picklable (spawned GPU ranks receive it). ``run_rank`` runs in every rank once its
    process group exists; ``report`` runs once the ranks are done (in the parent, or in
    a launched job's rank 0) and returns the exit code.
    """

    def run_rank(self, job: RankJob, rank: int, device: Any, in_flight: Any) -> None: ...

    def report(self, run_dir: Path) -> int: ...


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs; pickled into spawned processes."""

    cfg: SweepConfig
    backend: str
    world_size: int
    launcher: str
    run_dir: str | None
    run_id: str
    #: The parent's TCPStore; None means env:// (an external launcher's rendezvous).
    store_host: str | None = None
    store_port: int | None = None
    #: Environment variables each rank sets before creating its process group.
    env: dict[str, str] = field(default_factory=dict)
    #: The environment variant these ranks were started with ("" when none).
    variant: str = ""
    #: Variables of the variant; every rank reports the values it sees into meta.json.
    variant_keys: tuple[str, ...] = ()
    #: What the ranks run instead of the sweep; None runs the sweep (``cfg``).
    task: RankTask | None = None
    #: Interleaved variants: where this world takes its turns (None: it measures freely).
    turns: TurnSpec | None = None
    #: Where rank 0 appends its rows when not into ``run_dir`` (an interleaved world's
    #: rows go into the run's one results.csv).
    results_dir: str | None = None
    #: Every rank on this one host (spawned, or a one-node launch): emulated nodes then
    #: talk over loopback.
    single_host: bool = True
    #: NCCL's choice per call as a probe world logged it (colbench.run.probe): (op,
    #: bytes per rank) -> (algorithm, protocol); rows carry it. Empty: not recorded.
    nccl_choices: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)

    def first_meta(
        self, config: dict[str, Any], hosts: list[str], peers: Sequence[Any], **more: Any
    ) -> dict[str, Any]:
        """meta.json as the job starts: ``config`` (the task's), one node label per rank
        and what each rank introduced itself with (its ``device_name`` and ``pid``)."""
        return metadata.collect(
            run_id=self.run_id,
            config=config,
            launcher=self.launcher,
            backend=self.backend,
            world_size=self.world_size,
            hosts=hosts,
            devices=[p.device_name for p in peers],
            pids=[p.pid for p in peers],
            **more,
        )


@dataclass(frozen=True)
class Peer:
    """What every rank tells the others at start-up, in one gather."""

    digest: tuple[str, str]
    """The plan digest and colbench version: compared before anything else."""
    rank: int
    host: str
    pid: int
    device_name: str
    node: str
    env_seen: dict[str, str | None]
    gpu_uuid: str
    """The GPU's physical identity ("" on CPU or when unknown)."""
    gpu: dict[str, Any] = field(default_factory=dict)
    """The GPU this rank drives: CUDA index, PCI bus id, and the NCCL variables that
    made it an emulated node (--ranks-per-gpu), as this rank saw them."""
