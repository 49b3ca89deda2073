"""What a rank is given (:class:`RankJob`) and what it tells its peers (:class:`Peer`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from colbench.config import SweepConfig


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
