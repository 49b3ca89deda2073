"""What a rank is given (:class:`RankJob`, and when its command started: a run's time counts
from it), what it is doing (:class:`InFlight`, published so that a failure or a hang can name
it; the faults the failure-handling tests inject, ``COLBENCH_FAULT``), what it tells its
peers (:class:`Peer`), and how a run failed (:class:`Failure`, what a task is told)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from colbench.config.model import LaunchConfig, OutputConfig
from colbench.host.turns import TurnSpec
from colbench.results import rundir


@dataclass(frozen=True)
class Failure:
    message: str
    exit_code: int
    rank: int | None = None
    op: str | None = None
    size_bytes: int | None = None
    error: str | None = None

    def meta(self) -> dict[str, Any]:
        return {
            "failed_rank": self.rank,
            "failed_op": self.op,
            "failed_size_bytes": self.size_bytes,
            "error": self.error or self.message,
            "exit_code": self.exit_code,
        }


class RankTask(Protocol):
    """What the ranks run: the sweep (colbench.commands.sweep.task), p2p
    (colbench.commands.p2p.task), and the tasks to come. The host (this package) starts,
    supervises and ends the ranks the same way for every task; the task says how they
    start, what they do and what is left.

    Picklable (spawned ranks receive it). ``run_rank`` runs in every rank once its process
    group exists; ``report`` runs once the ranks are done (in the parent, or in a launched
    job's rank 0) and returns the exit code.
    """

    @property
    def launch(self) -> LaunchConfig:
        """How its ranks start and how long they may take."""

    @property
    def output(self) -> OutputConfig:
        """Where its run directory goes and what is shown."""

    @property
    def label(self) -> str:
        """Names default run directories: ``<stamp>-<label>-<backend>``."""

    @property
    def worlds(self) -> int:
        """Worlds of its ranks alive at once (interleaved variants), for the host's limits."""

    @property
    def live_bar(self) -> bool:
        """Whether its rank 0 draws a live progress bar on a terminal (the host's plain
        progress lines then stay off that terminal, colbench.host.pace)."""

    def check(self, world_size: int, backend: str) -> list[str]:
        """Refuse (UsageError) what cannot run at this world size and backend, before any
        rank starts; else the notes to say."""

    def run_rank(self, job: RankJob, rank: int, device: Any, in_flight: Any) -> None: ...

    def report(self, run_dir: Path) -> int: ...

    def failed(self, run_dir: Path, failure: Failure) -> None:
        """The run ended in ``failure`` (a dead or hung rank, exit 3/4); called where the
        verdict is made (the parent, or a launched job's rank 0), after meta.json says so."""


class ConfiguredTask:
    """A task whose ``cfg`` holds its launch and output config (the sweep's, p2p's)."""

    cfg: Any
    live_bar = False

    @property
    def launch(self) -> LaunchConfig:
        return self.cfg.launch

    @property
    def output(self) -> OutputConfig:
        return self.cfg.output

    def failed(self, run_dir: Path, failure: Failure) -> None:
        """Nothing beyond meta.json, for most tasks."""


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs; pickled into spawned processes."""

    task: RankTask
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
    #: Interleaved variants: where this world takes its turns (None: it measures freely).
    turns: TurnSpec | None = None
    #: Where rank 0 appends its rows when not into ``run_dir`` (an interleaved world's
    #: rows go into the run's one results.csv).
    results_dir: str | None = None
    #: Every rank on this one host (spawned, or a one-node launch): emulated nodes then
    #: talk over loopback.
    single_host: bool = True
    #: When the host started this job (time.time()): a run's stated time counts from it
    #: (colbench.host.pace); 0: when the rank started.
    started_at: float = 0.0

    @property
    def launch(self) -> LaunchConfig:
        return self.task.launch

    @property
    def output(self) -> OutputConfig:
        return self.task.output

    def first_meta(
        self, config: dict[str, Any], hosts: list[str], peers: Sequence[Any], **more: Any
    ) -> dict[str, Any]:
        """meta.json as the job starts: ``config`` (the task's), one node label per rank
        and what each rank introduced itself with (its ``device_name`` and ``pid``)."""
        return rundir.collect(
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


def command_started_at() -> float:
    """When this colbench command began (time.time()'s clock): a run's time counts from
    the command, as its user's does, not from after Python and torch were imported. That
    is the process's start where the process is the command (``python -m colbench``, the
    ``colbench`` script); else (a test, a notebook) or where the system cannot say, now."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    command = (spec is not None and spec.name.startswith("colbench")) or (
        spec is None and Path(sys.argv[0] if sys.argv else "").name == "colbench"
    )
    now = time.time()
    started = _process_started_at() if command else None
    # An hour before now is no command's start-up: trust the clock we have instead.
    return started if started is not None and now - 3600 < started <= now else now


def _process_started_at() -> float | None:
    try:
        stat = Path("/proc/self/stat").read_text()
        # The command name (field 2) may hold spaces: count the fields after its ")".
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class InFlight:
    """What this rank is doing now, so a failure can name it: with a store, every step is
    published under ``progress/<rank>``, so the parent can name the op and size a rank died
    in, and tell which ranks never reached a collective the others are stuck in."""

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
    """``COLBENCH_FAULT=RANK:WHEN[:raise|exit|hang|device-hang]``, a testing aid for the
    failure-handling tests (unset in normal use): make RANK fail at its WHEN-th timed batch,
    or with WHEN ``init``, ``side`` or ``end`` as its communicator starts, as its side group
    starts, or after its last row. ``hang`` blocks the rank's main thread for ever, as a
    rank stuck outside any collective would; ``device-hang`` stalls its GPU instead
    (``hang`` on CPU)."""

    def __init__(self, rank: int, spec: str | None) -> None:
        parts = (spec or "").split(":")
        # RANK:start:... is the spawned rank's own hook (host/child.py), read before this exists.
        mine = bool(spec) and int(parts[0]) == rank and parts[1] != "start"
        #: ``init``, ``side``, ``end``, or a timed batch's number (:attr:`step`); "": no fault.
        self.when = parts[1] if mine else ""
        self.step = None if self.when in ("", "init", "side", "end") else int(self.when)
        self.action = parts[2] if mine and len(parts) > 2 else "raise"
        self.count = 0

    def tick(self) -> None:
        if self.step is None:
            return
        self.count += 1
        if self.count == self.step:
            self._fail(f"timed batch {self.count}")

    def at_init(self) -> None:
        """Called as the rank's communicator starts, before ``init_process_group``."""
        if self.when == "init":
            self._fail("communicator start-up")

    def at_side_group(self) -> None:
        """Called as the rank's side group starts, before its ``new_group``."""
        if self.when == "side":
            self._fail("side group start-up")

    def at_end(self) -> None:
        """Called once every row is measured, before the end-of-run summary."""
        if self.when == "end":
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
