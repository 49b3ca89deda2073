"""RunDir: the one owner of a run directory's files.

A run directory holds what one run (a sweep, an import) left::

    meta.json          what the run was: versions, hardware, launcher, env, status
    results.csv        its rows (colbench.results.rows.RESULTS); other tables beside it
                       (p2p.csv), each a colbench.results.tables.Table with its own columns
                       and version (TABLES lists them)
    rank<N>.log        what rank N's libraries printed (removed when empty)
    rank<N>.error.json how rank N failed, for the parent's verdict
    nccl-rank<N>.log   NCCL's own start-up log of rank N (NCCL runs): what it chose
    <metric>.png       figures of sweep --plot

Every module that makes a run directory or reads or writes one of these files goes
through this class, so the layout is written down once.

What a run records about itself in ``meta.json`` (versions, hardware, launcher, env) is
gathered here too (:func:`collect`). Only allow-listed environment variables are recorded:
the ones that change what collectives do (NCCL_*, TORCH_*, CUDA_*, GLOO_*, OMP_*), never
the whole environment, which may hold secrets.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import re
import socket
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench import __version__
from colbench.errors import UsageError
from colbench.results import metafile, tables
from colbench.results.metafile import META_FILE
from colbench.results.rows import RESULTS, SCHEMA_VERSION, csv_path, load
from colbench.results.tables import TABLES as TABLES
from colbench.results.tables import Table, TableWriter

#: A rank's log file in the run directory; a spawned rank names its own before it
#: diverts its stderr there (colbench.host.child), without a RunDir of its own.
RANK_LOG = "rank{}.log"
_RANK_LOG = re.compile(r"^rank(\d+)\.log$")


def stamped_name(*parts: str) -> str:
    """``<YYYYmmdd-HHMMSS>-<parts joined by ->``: the default name of a new directory."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return "-".join((stamp, *parts))


class RunDir:
    """A run directory: its tables, meta.json, rank logs and figures."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        """The run's id, as its rows and meta.json carry it."""
        return self.path.name

    @classmethod
    def create(cls, out: str | os.PathLike[str] | None, default: Path) -> RunDir:
        """A new, empty run directory: ``out`` (an explicit --out, which must be new or
        empty), else ``default``, stepping aside to ``-2``, ``-3``... from a taken name."""
        if out is not None:
            return cls._create_explicit(Path(out))
        for attempt in range(1, 1000):
            path = default if attempt == 1 else default.with_name(f"{default.name}-{attempt}")
            try:
                # mkdir claims the name atomically: two runs started in the same second
                # never share a directory.
                path.mkdir(parents=True)
                return cls(path)
            except FileExistsError:
                continue
            except OSError as exc:
                raise UsageError(
                    f"cannot create run directory under {default.parent}: {exc.strerror}"
                ) from None
        raise UsageError(f"could not find a free run directory name next to {default}")

    @classmethod
    def _create_explicit(cls, path: Path) -> RunDir:
        if path.exists() and not path.is_dir():
            raise UsageError(
                f"--out {path} is a file: --out names the run directory (new or empty) that "
                "results.csv and meta.json go into; pick another"
            )
        if path.exists() and any(path.iterdir()):
            raise UsageError(
                f"run directory {path} already exists and is not empty; pick another --out"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create run directory {path}: {exc.strerror}") from None
        if not os.access(path, os.W_OK):
            raise UsageError(f"run directory {path} is not writable")
        return cls(path)

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> RunDir:
        """The run a path names: the directory itself, or the one holding a results CSV."""
        return cls(csv_path(path).parent)

    def table_path(self, table: Table = RESULTS) -> Path:
        return self.path / table.file_name

    def has_table(self, table: Table = RESULTS) -> bool:
        return self.table_path(table).is_file()

    def writer(self, table: Table = RESULTS, exact: bool = False) -> TableWriter:
        """Append rows to one of the run's tables (created with its header if new);
        ``exact``: floats in full where %.6g would change them (imported values)."""
        return TableWriter(self.table_path(table), table, exact)

    def results(self) -> Any:
        """results.csv as a DataFrame of this version's columns (see results.load)."""
        return load(self.table_path(RESULTS))

    def rows_kept(self, table: Table = RESULTS) -> int:
        """Whole data rows in a table's file; 0 when it is missing. A last row cut short
        by a failed write (no newline yet) is no row: the reader drops it too."""
        try:
            with open(self.table_path(table), encoding="utf-8", errors="replace") as f:
                return max(0, sum(line.endswith("\n") for line in f) - 1)
        except OSError:
            return 0

    @property
    def meta_path(self) -> Path:
        return self.path / META_FILE

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Atomically replace meta.json, so a reader never sees half a file."""
        tables.replace_text(
            self.meta_path, json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n"
        )

    def read_meta(self) -> dict[str, Any]:
        """meta.json (see :func:`colbench.results.metafile.read`)."""
        return metafile.read(self.meta_path, SCHEMA_VERSION)

    def meta_or_none(self) -> dict[str, Any] | None:
        """meta.json, or None when missing or unreadable (see :func:`metafile.read_or_none`)."""
        return metafile.read_or_none(self.meta_path, SCHEMA_VERSION)

    def update_meta(self, **fields: Any) -> None:
        meta = self.read_meta()
        meta.update(fields)
        self.write_meta(meta)

    def rank_log(self, rank: int) -> Path:
        return self.path / RANK_LOG.format(rank)

    def rank_logs(self) -> dict[int, Path]:
        """Rank -> its log file, for the logs that exist, in rank order."""
        logs = [(_RANK_LOG.match(path.name), path) for path in self.path.glob("rank*.log")]
        return dict(sorted((int(match.group(1)), path) for match, path in logs if match))

    def tidy_logs(self) -> None:
        """Empty rank logs say nothing, whether the run ended well or not: remove them."""
        for log in self.rank_logs().values():
            with contextlib.suppress(OSError):  # gone already
                if log.stat().st_size == 0:
                    log.unlink()

    def nccl_log(self, rank: int) -> Path:
        """Where rank ``rank``'s NCCL writes its INFO log (NCCL_DEBUG_FILE)."""
        return self.path / f"nccl-rank{rank}.log"

    def nccl_logs(self) -> list[Path]:
        return sorted(self.path.glob("nccl-rank*.log"), key=lambda p: int(p.stem[9:]))

    def error_report(self, rank: int) -> Path:
        """Where rank ``rank`` leaves the report of how it failed."""
        return self.path / f"rank{rank}.error.json"

    def error_reports(self) -> list[Path]:
        return sorted(self.path.glob("rank*.error.json"))

    def figure_path(self, metric: str) -> Path:
        return self.path / f"{metric}.png"


ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "GLOO_", "OMP_")
#: Exceptions inside allowed prefixes: these can carry credentials or tokens.
_ENV_DENY_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def allowed_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(ENV_PREFIXES) and not any(word in k for word in _ENV_DENY_WORDS)
    }


def _proc(name: str) -> dict[str, str]:
    """The first block of /proc/NAME's ``key: value`` lines (cpuinfo's first processor,
    meminfo whole); empty where unreadable."""
    first: dict[str, str] = {}
    try:
        for line in Path("/proc", name).read_text().splitlines():
            if not line.strip() and first:
                break
            key, _, value = line.partition(":")
            first[key.strip()] = value.strip()
    except OSError:
        pass
    return first


def cpu_model() -> str:
    return _proc("cpuinfo").get("model name") or platform.processor() or platform.machine()


#: /proc/cpuinfo's fields that name a CPU's generation: x86's, then Arm's.
_CPU_ID_FIELDS = (
    ("vendor_id", "cpu family", "model", "stepping"),
    ("CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision"),
)


def cpu_id() -> str | None:
    """The CPU's generation as the processor itself reports it (x86's vendor, family,
    model and stepping; Arm's implementer and part), or None where unknown.

    A hypervisor may give every host the same generic model name ("AMD EPYC", "Intel(R)
    Xeon(R) Processor"), so that two machines of different speed look alike by name;
    these fields still tell them apart (issue 33)."""
    first = _proc("cpuinfo")
    for names in _CPU_ID_FIELDS:
        if all(first.get(name) for name in names):
            return ", ".join(f"{name} {first[name]}" for name in names)
    return None


def versions() -> dict[str, str | None]:
    import torch

    from colbench.nccl.names import torch_version

    version = torch_version() if torch.cuda.is_available() else None
    nccl = None if version is None else ".".join(map(str, version))
    return {
        "colbench": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "python": platform.python_version(),
    }


#: torch's settings that change its cost per NCCL call (the torch tax, colbench.direct):
#: the flight recorder's ring of entries, CUDA timing events on every work, the watchdog's
#: async error handling, desync debugging, and a host-side poll in every wait().
TORCH_PER_CALL = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_ENABLE_TIMING",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_DESYNC_DEBUG",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_DISTRIBUTED_DEBUG",
)


def torch_per_call(env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Each of :data:`TORCH_PER_CALL` as the rank saw it; None: unset (torch's default)."""
    env = os.environ if env is None else env
    return {name: env.get(name) for name in TORCH_PER_CALL}


def gpus() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def memory_bytes() -> int | None:
    total = _proc("meminfo").get("MemTotal", "").split()
    return int(total[0]) * 1024 if total and total[0].isdigit() else None


def machine() -> dict[str, Any]:
    """The machine fingerprint a baseline is tied to (see :data:`metafile.MUST_MATCH`).

    gloo is compiled into torch and reports no version of its own: the torch version
    stands for it.
    """
    vers = versions()
    return {
        "cpu_model": cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_cores": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "gpus": sorted(set(gpus())),
        "torch": vers["torch"],
        "gloo": f"bundled with torch {vers['torch']}",
        "cuda": vers["cuda"],
        "nccl": vers["nccl"],
    }


def collect(
    *,
    run_id: str,
    config: dict[str, Any],
    launcher: str,
    backend: str,
    world_size: int,
    hosts: list[str],
    devices: list[str],
    pids: list[int] | None = None,
    group_size: int | None = None,
) -> dict[str, Any]:
    """``hosts`` holds one node label per rank, in rank order."""
    per_node = Counter(hosts)
    sizes = set(per_node.values())
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": "running",
        "command_line": list(config.get("command_line") or sys.argv),
        "versions": versions(),
        "backend": backend,
        "launcher": launcher,
        "world_size": world_size,
        "hosts": sorted(set(hosts)),
        "rank_hosts": hosts,
        "rank_pids": pids or [],
        "nnodes": len(set(hosts)),
        # One number when every node runs as many ranks, else ranks per node label.
        "local_world_size": sizes.pop() if len(sizes) == 1 else dict(sorted(per_node.items())),
        "group_size": group_size or world_size,
        "groups": world_size // (group_size or world_size),
        "devices": devices,
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
        "machine": machine(),
        "platform": platform.platform(),
        "coordinator_host": socket.gethostname(),
        "env": allowed_env(),
        "torch_per_call": torch_per_call(),
        "config": config,
    }
