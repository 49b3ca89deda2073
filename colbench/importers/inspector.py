"""NCCL Inspector's JSON output -> colbench rows: a production job's own collectives,
so that compare, plot and the published references read them beside a sweep.

The Inspector is NCCL's profiler plugin (NVIDIA/nccl ``ext-profiler/inspector`` in 2.28,
``plugins/profiler/inspector`` from 2.29.7). Read at v2.28.9-1 (dbc86fd, inspector.cc),
v2.29.7-1 (b91894b, inspector.cc) and 5067397 (inspector_json.cc), the format is:

- one file per process, ``<hostname>-pid<pid>.log``, in ``NCCL_INSPECTOR_DUMP_DIR`` (else
  ``nccl-inspector-<jobid>``); one compact JSON object per line, per completed call;
- ``header``: the communicator's ``id`` (a hash), ``rank``, ``n_ranks``, ``nnodes``, and
  after 2.29.7 ``comm_name``;
- ``metadata``: ``inspector_output_format_version`` ("v4.0" in all three), ``git_rev``,
  ``rec_mechanism``, ``dump_timestamp_us``, ``hostname``, ``pid``;
- ``coll_perf``: ``coll`` (NCCL's name: AllReduce, AllGather, ReduceScatter, Broadcast,
  Reduce), ``coll_sn`` (the call's sequence number on its communicator),
  ``coll_msg_size_bytes`` (count x type size: one rank's chunk for AllGather and
  ReduceScatter), ``coll_exec_time_us`` (whole microseconds), ``coll_timing_source``
  (kernel_gpu, kernel_cpu or collective_cpu), ``coll_algobw_gbs``, ``coll_busbw_gbs``
  (nccl-tests' formulas; a NaN written as the string "nan"); with
  ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` also ``event_trace_sn`` and ``event_trace_ts``;
- after 2.29.7, point-to-point calls as ``p2p_perf`` objects (``p2p``, ``p2p_peer``, ...).

No record names the algorithm, the protocol, the data type or the GPU. Rows therefore
leave ``nccl_algo`` and ``nccl_proto`` empty, take the type from ``--dtype`` (else
"unknown", which joins no sweep's rows) and the device from ``--device``.

**Rows.** The calls of one communicator with one op and size are one row: each call's
time is the mean of its ranks' times (nccl-tests' default ``-a avg``), the row's
``time_us`` the median over calls, ``iters`` the number of calls. A communicator is a
world of its own (``world_size`` = ``group_size`` = its ranks), so a job's 8-rank tensor
parallel all_reduce joins an 8-rank sweep; communicators of the same size, op and size are
``repeat`` 0, 1, ... of one row. meta.json's ``communicators`` names each, its ranks and
hosts, and every row's per-rank median time.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.bench import ops
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import DTYPES, NO_REDOP, DType
from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_REAL
from colbench.results.rows import SCHEMA_VERSION, Row
from colbench.results.rundir import RunDir

#: NCCL's names of the collectives the Inspector records -> colbench's.
OPS = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
}
#: Ops whose coll_msg_size_bytes is one rank's chunk: nccl-tests' size is n times it.
PER_RANK_CHUNK = ("AllGather", "ReduceScatter")
KNOWN_VERSIONS = ("v4.0",)
FILE = reading.Kind("Inspector output file", 1024**3)
#: Files in a dump directory: the plugin writes ``.log``; a copy may be renamed.
SUFFIXES = (".log", ".json", ".jsonl")


#: Per (communicator, op, size): each call's sequence number -> its ranks' times.
Groups = dict[tuple[str, str, int], dict[int, dict[int, float]]]


@dataclass
class Read:
    """The calls of a dump, grouped per (communicator, op, size), and what each
    communicator is (its ranks' hosts, the timing sources seen)."""

    groups: Groups = field(default_factory=lambda: defaultdict(lambda: defaultdict(dict)))
    comms: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def _get(obj: Any, key: str, types: tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise UsageError(f"{where}: no {key!r}: not NCCL Inspector JSON output")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, types):
        what = type(value).__name__
        raise UsageError(f"{where}: {key!r} is {what}, not what the Inspector writes")
    return value


def _objects(text: str, name: str) -> Iterator[tuple[Any, str]]:
    """Each JSON object of a file and where it starts: the plugin writes one per line, the
    README shows them indented; both read."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return
        where = f"{name} line {text.count(chr(10), 0, at) + 1}"
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            if text.startswith(("#", "nccl_"), at):
                raise UsageError(
                    f"{where}: Prometheus text (NCCL_INSPECTOR_PROM_DUMP=1); colbench reads "
                    "the Inspector's JSON output"
                ) from None
            raise UsageError(f"{where}: not JSON: not NCCL Inspector JSON output") from None
        yield doc, where


def _record(doc: Any, where: str, found: Read) -> None:
    header = _get(doc, "header", (dict,), where)
    meta = _get(doc, "metadata", (dict,), where)
    version = meta.get("inspector_output_format_version")
    if isinstance(version, str):
        found.versions.add(version)
    if "coll_perf" not in doc:
        kind = next((k for k in doc if k.endswith("_perf")), "record without coll_perf")
        found.skipped[kind] += 1
        return
    perf = _get(doc, "coll_perf", (dict,), where)
    coll = _get(perf, "coll", (str,), where)
    if coll not in OPS:
        found.skipped[coll] += 1
        return
    comm = _get(header, "id", (str,), where)
    rank = _get(header, "rank", (int,), where)
    n_ranks = _get(header, "n_ranks", (int,), where)
    fresh = {
        "id": comm,
        "name": str(header.get("comm_name") or ""),
        "n_ranks": n_ranks,
        "nnodes": _get(header, "nnodes", (int,), where),
        "ranks": {},
        "timing_sources": set(),
    }
    info = found.comms.setdefault(comm, fresh)
    info["ranks"][rank] = str(meta.get("hostname") or "")
    info["timing_sources"].add(str(perf.get("coll_timing_source") or ""))
    sn = _get(perf, "coll_sn", (int,), where)
    size = _get(perf, "coll_msg_size_bytes", (int,), where)
    size *= n_ranks if coll in PER_RANK_CHUNK else 1
    time_us = float(_get(perf, "coll_exec_time_us", (int, float), where))
    found.groups[(comm, coll, size)][sn][rank] = time_us


def read_dir(path: str | Path) -> Read:
    """Every record of a dump directory (or of one file)."""
    source = Path(path)
    if not source.exists():
        raise UsageError(f"cannot read {source}: no such file or directory")
    files = [source]
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    if not files:
        raise UsageError(f"{source}: no Inspector output (*.log) in it")
    found = Read()
    for file in files:
        found.files.append(str(file))
        for doc, where in _objects(reading.read_text(file, FILE), str(file)):
            _record(doc, where, found)
    if not found.groups:
        raise UsageError(f"{source}: no collective records in {len(files)} file(s)")
    return found


def _row(
    op: Collective,
    size: int,
    per_call: list[float],
    info: dict[str, Any],
    dt: DType | None,
    *,
    run_id: str,
    device: str,
    repeat: int,
) -> Row:
    """One group of calls (one time per call) as a row."""
    n = info["n_ranks"]
    time_us = statistics.median(per_call)
    # A call faster than the clock's whole microsecond has no bandwidth to state.
    algbw = op.algbw_gbps(size, time_us) if time_us > 0 else None
    return Row(
        run_id=run_id,
        variant="",
        backend="nccl",
        device=device,
        world_size=n,
        nnodes=info["nnodes"],
        group_size=n,
        groups=1,
        op=op.name,
        dtype=dt.name if dt else "unknown",
        redop="sum" if op.uses_redop else NO_REDOP,
        root=0 if op.rooted else -1,
        in_place=1 if op.placements[0] == "in" else 0,
        requested_bytes=size,
        size_bytes=size,
        count=size // dt.elem_bytes if dt else 0,
        warmup=None,
        iters=len(per_call),
        average="avg",
        time_us=time_us,
        time_min_us=min(per_call),
        time_max_us=max(per_call),
        algbw_gbps=algbw,
        busbw_gbps=None if algbw is None else algbw * op.busbw_factor(n),
        wrong=None,
        repeat=repeat,
        fabric=FABRIC_REAL,
    )


def rows_of(
    found: Read, run_id: str, dtype: str | None = None, device: str = ""
) -> tuple[list[Row], list[dict[str, Any]]]:
    """The calls -> one row per (communicator, op, size); and meta.json's
    ``communicators``."""
    dt = DTYPES.get(dtype) if dtype else None
    if dtype and dt is None:
        raise UsageError(f"unknown --dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    repeats: dict[tuple[int, str, int], int] = defaultdict(int)
    rows: list[Row] = []
    comm_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (comm, coll, size), by_sn in sorted(found.groups.items()):
        info = found.comms[comm]
        op = ops.get(OPS[coll])
        per_call = [statistics.fmean(t.values()) for t in by_sn.values()]
        per_rank: dict[int, list[float]] = defaultdict(list)
        for times in by_sn.values():
            for rank, t in times.items():
                per_rank[rank].append(t)
        repeat = repeats[(info["n_ranks"], op.name, size)]
        repeats[(info["n_ranks"], op.name, size)] += 1
        rows.append(_row(op, size, per_call, info, dt, run_id=run_id, device=device, repeat=repeat))
        comm_rows[comm].append(
            {
                "op": op.name,
                "size_bytes": size,
                "repeat": repeat,
                "calls": len(per_call),
                "rank_time_us": {str(r): statistics.median(v) for r, v in sorted(per_rank.items())},
            }
        )
    out = [
        info
        | {
            "ranks": [{"rank": r, "host": h} for r, h in sorted(info["ranks"].items())],
            "timing_sources": sorted(info["timing_sources"]),
            "rows": comm_rows[comm],
        }
        for comm, info in found.comms.items()
    ]
    return rows, out


def _meta(
    source: Path,
    found: Read,
    run_id: str,
    comms: list[dict[str, Any]],
    n_rows: int,
    *,
    dtype: str | None,
    device: str,
) -> dict[str, Any]:
    """meta.json of an imported job, its warnings and notes included."""
    notes = []
    unknown = sorted(found.versions - set(KNOWN_VERSIONS))
    warnings = [f"Inspector output format {', '.join(unknown)}: read as v4.0"] if unknown else []
    for kind, n in sorted(found.skipped.items()):
        notes.append(f"{n} {kind} record(s) not imported (no collective colbench measures)")
    if not dtype:
        notes.append("the Inspector records no data type: rows carry dtype 'unknown' (--dtype)")
    digest = hashlib.sha256()
    for name in found.files:
        digest.update(Path(name).read_bytes())
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": "imported",
        "source": {
            "format": "nccl-inspector",
            "file": str(source.resolve()),
            "files": len(found.files),
            "sha256": digest.hexdigest(),
            "versions": sorted(found.versions),
        },
        "command_line": list(sys.argv),
        "backend": "nccl",
        "world_size": sorted({c["n_ranks"] for c in comms}),
        "hosts": sorted({r["host"] for c in comms for r in c["ranks"] if r["host"]}),
        "devices": [device] if device else [],
        "communicators": comms,
        "rows": n_rows,
        "warnings": warnings,
        "notes": notes,
    }
    meta["nnodes"] = len(meta["hosts"]) or None
    return meta


def import_dir(
    path: str | Path,
    *,
    out_dir: str | Path | None = None,
    results_root: str | Path = "results",
    dtype: str | None = None,
    device: str = "",
) -> tuple[Path, Any]:
    """``colbench import inspector DIR``: results.csv and meta.json of a job's calls."""
    from colbench.commands.references import place as references
    from colbench.importers.nccl_tests import Imported, write_run

    source = Path(path)
    found = read_dir(source)
    default = Path(results_root) / f"inspector-{source.resolve().name}"
    target = Path(out_dir) if out_dir is not None else default
    run_dir = RunDir.create(out_dir, target)
    rows, comms = rows_of(found, run_dir.name, dtype, device)
    meta = _meta(source, found, run_dir.name, comms, len(rows), dtype=dtype, device=device)
    # The job's widest communicator (the data-parallel world, often) is the one its
    # hardware's published figures are for.
    widest = max(r.world_size for r in rows)
    placement = write_run(run_dir, rows, meta, [r for r in rows if r.world_size == widest])
    tables = [{"op": op, "world_size": n} for op, n in sorted({(r.op, r.world_size) for r in rows})]
    facts = {"tables": tables, references.FIELD: placement}
    return run_dir.path, Imported(rows, meta["warnings"], meta["notes"], facts)
