"""nccl-tests' JSON report (``-J FILE``, written by nccl-tests 2.17+ and by ``colbench
sweep -J``) -> colbench rows, every value as the file holds it.

A placement with a per-iteration block (``-I 1``) becomes one row per iteration: its
``repeat`` is the iteration's index, its time the file's ``times_us`` entry (the slowest
process's time of that iteration), its bandwidths colbench's formulas of that time. Those
rows are samples that ``compare`` and ``gate`` judge as they judge ``sweep --repeat``'s.
The iterations nccl-tests left out of its summary (``-K``, ``skipped_iterations``) are
left out here too. A placement without one becomes one row with the file's ``time``,
``alg_bw``, ``bus_bw`` and ``nwrong`` unchanged. The summaries themselves (``time``,
``alg_bw``, ``bus_bw``, ``nwrong`` and each per-iteration block but its time lists) are
kept in meta.json's ``nccl_tests``, and the file itself beside results.csv, so nothing
the report says is lost (per-process times and the environment included).

The report names no collective (nccl-tests is one binary per collective): it comes from
``--op``, else the program name in ``args`` (``all_reduce_perf``), else colbench's own
``--op`` there. The world size is given by ``--world-size``, else the devices: one entry
per process, each driving ``nthreads x ngpus`` ranks.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from colbench.bench import ops
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import NO_REDOP, REDOPS
from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_REAL
from colbench.importers.nccl_infer import dtype_of
from colbench.importers.nccl_table import ImportOptions
from colbench.nccl.names import from_code, version_text
from colbench.results.rows import STATUS_INVALID, STATUS_OK, Row

#: The newest report layout this reader knows (nccl-tests 2.19.6 writes version 3).
NEWEST_VERSION = 3
#: The report's copy in the imported run directory.
COPY_NAME = "nccl-tests.json"
_PLACEMENTS = (("out_of_place", 0), ("in_place", 1))
#: nccl-tests' -a digits.
_AVERAGES = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}
#: The collective ``colbench sweep`` measures without --op.
_SWEEP_DEFAULT_OP = "all_reduce"
_PERF = re.compile(r"([a-z0-9_]+?)_perf(?:_mpi)?$")


def is_report(text: str) -> bool:
    """Whether ``text`` is a JSON document rather than a text log (whose first character
    is never an opening brace)."""
    return text.lstrip()[:1] == "{"


def parse_report(text: str, options: ImportOptions) -> tuple[list[Row], dict[str, Any], list[str]]:
    """(rows, what meta.json keeps of the report, notes); UsageError on what cannot be read."""
    source, world_size = options.source, options.world_size
    report, version = _load(text, source)
    config = _mapping(report.get("config"), source, "config")
    coll, op_from = _collective(report, options.op, source)
    n = world_size if world_size is not None else _world_size(config, source)
    if n < 1:
        raise UsageError(f"--world-size must be at least 1, got {n}")
    agg = int(config.get("aggregated_iterations") or 1)
    common = {"run_id": options.run_id, "variant": options.variant}
    common |= _common(report, config, coll.name, n)
    rows: list[Row] = []
    notes: list[str] = []
    kept: list[dict[str, Any]] = []
    for index, entry in enumerate(report["results"]):
        where = f"{source} results[{index}]"
        entry = _mapping(entry, source, f"results[{index}]")
        rows += _entry_rows(entry, coll, n, agg, _average(report), common, where)
        kept.append(_summary(entry))
    skipped = int(config.get("per_iter_skip") or 0)
    if skipped:
        notes.append(
            f"{source}: the first {skipped} iteration(s) of each size are left out, as "
            "nccl-tests' summary leaves them out (-K)"
        )
    meta = {
        "version": version,
        **{k: report.get(k) for k in ("start_time", "end_time", "args", "nccl_version")},
        "config": config,
        "results": kept,
        **{k: report.get(k) for k in ("out_of_bounds", "average_bus_bandwidth", "errors")},
        "op_from": op_from,
        "world_size_from": "--world-size" if world_size is not None else "config.devices",
    }
    return rows, meta, notes


def _load(text: str, source: str) -> tuple[dict[str, Any], int]:
    """The report and its version, refused when it is not one colbench reads."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}: not a JSON document ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        raise UsageError(f"{source}: not an nccl-tests JSON report (no results list)")
    version = report.get("version")
    if not isinstance(version, int) or version > NEWEST_VERSION:
        raise UsageError(
            f"{source}: report version {version!r}; colbench reads nccl-tests' JSON reports "
            f"up to version {NEWEST_VERSION} (nccl-tests 2.19)"
        )
    return report, version


def _common(
    report: Mapping[str, Any], config: Mapping[str, Any], op: str, world_size: int
) -> dict[str, Any]:
    """The columns every row of the report shares."""
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    hosts = [str(d.get("hostname", "")) for d in devices]
    infos = [str(d.get("device_info", "")) for d in devices]
    nccl_version = int(report.get("nccl_version") or 0)
    warmup = _number(config.get("warmup_iters"))
    return {
        "engine": _engine(report),
        # colbench writes nccl_version 0 for a gloo run: no NCCL was there.
        "backend": "nccl" if nccl_version else "gloo",
        "device": statistics.mode(infos) if infos else "",
        "world_size": world_size,
        "nnodes": len(set(hosts)) if hosts else None,
        "op": op,
        "warmup": None if warmup is None else int(warmup),
        "fabric": FABRIC_REAL,
        "ranks_per_gpu": 1,
    }


def _mapping(value: Any, source: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{source}: {key} is not an object: not an nccl-tests JSON report")
    return value


def _engine(report: Mapping[str, Any]) -> str:
    """What made the calls: nccl-tests calls NCCL itself (colbench's direct engine does the
    same); colbench's own report (``sweep -J``) says its engine on its command line."""
    args = [str(a) for a in report.get("args") or [] if isinstance(a, str | int | float)]
    if not any("colbench" in a for a in args):
        return "nccl"
    given = args[args.index("--engine") + 1] if "--engine" in args[:-1] else "torch"
    return given if given in ("torch", "nccl") else "torch"


def _collective(report: Mapping[str, Any], op: str | None, source: str) -> tuple[Collective, str]:
    """--op, else nccl-tests' program name in args, else colbench's --op there, else the
    file name (all_gather-run3.json)."""
    if op is not None:
        return ops.get(op), "--op"
    args = [str(a) for a in report.get("args") or []]
    program = Path(args[0]).name if args else ""
    match = _PERF.match(program)
    if match:
        try:
            return ops.get(match.group(1)), f"{program} in args"
        except UsageError:
            raise UsageError(f"{source}: {program} is not a collective colbench knows") from None
    for i, arg in enumerate(args[1:], 1):
        if arg == "--op" and i + 1 < len(args):
            return ops.get(args[i + 1]), "colbench's --op in args"
        if arg.startswith("--op="):
            return ops.get(arg.split("=", 1)[1]), "colbench's --op in args"
    if program.startswith("colbench") and args[1:2] == ["sweep"]:
        return ops.get(_SWEEP_DEFAULT_OP), "colbench sweep's default --op"
    stem = Path(source).name.lower()
    named = [c for c in ops.REGISTRY if stem.startswith(c.name)]
    if named:
        return max(named, key=lambda c: len(c.name)), "the file name"
    raise UsageError(
        f"{source}: the report does not say which collective it measured (no *_perf program "
        "in args, no op in the file name); give --op, e.g. --op all_reduce"
    )


def _world_size(config: Mapping[str, Any], source: str) -> int:
    """One devices entry per process (nccl-tests gathers the first of each), each process
    driving nthreads x ngpus ranks."""
    devices = config.get("devices")
    if not isinstance(devices, list) or not devices:
        raise UsageError(f"{source}: config.devices is empty; give --world-size")
    return len(devices) * int(config.get("nthreads") or 1) * int(config.get("ngpus") or 1)


def _average(report: Mapping[str, Any]) -> str:
    """-a as nccl-tests' command line gave it (its default 1: avg)."""
    args = [str(a) for a in report.get("args") or []]
    for i, arg in enumerate(args[:-1]):
        if arg in ("-a", "--average"):
            return _AVERAGES.get(args[i + 1], args[i + 1])
    return "avg"


def _number(value: Any) -> float | None:
    """A double of the report: nccl-tests writes NaN as the string "nan"."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def _entry_rows(
    entry: Mapping[str, Any],
    coll: Collective,
    n: int,
    agg: int,
    average: str,
    common: Mapping[str, Any],
    where: str,
) -> list[Row]:
    try:
        size, count = int(entry["size"]), int(entry["count"])
        dtype, _ = dtype_of(str(entry["type"]), where, 0)
        redop = str(entry.get("redop", NO_REDOP))
        root = int(str(entry.get("root", "-1")).strip())
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: unreadable size, count, type or root ({exc})") from None
    if coll.uses_redop and redop not in REDOPS:
        raise UsageError(f"{where}: unknown reduction {redop!r}")
    cells = {
        **common,
        "dtype": dtype,
        "redop": redop if coll.uses_redop else NO_REDOP,
        "root": root if coll.rooted else -1,
        "requested_bytes": size,
        "size_bytes": size,
        "count": count,
    }
    iters = int(entry.get("actual_iterations") or 0)
    rows: list[Row] = []
    for name, in_place in _PLACEMENTS:
        body = entry.get(name)
        if not isinstance(body, dict):
            continue
        wrong = _number(body.get("nwrong"))
        per_iter = entry.get(f"{name}_per_iter")
        if not (isinstance(per_iter, dict) and isinstance(per_iter.get("times_us"), list)):
            time_us = _number(body.get("time", body.get("cpu_time")))
            samples = [(0, time_us, _number(body.get("alg_bw")), _number(body.get("bus_bw")))]
            batch, how = iters * agg or None, average
        else:
            # Each a batch of agg calls; times_us is, per iteration, the slowest process's.
            batch, how, samples = agg, "max", _samples(per_iter, coll, n, size)
        for repeat, time_us, algbw, busbw in samples:
            valid = time_us is not None and algbw is not None and busbw is not None
            rows.append(
                Row(
                    **cells,
                    iters=batch,
                    average=how,
                    in_place=in_place,
                    time_us=time_us,
                    algbw_gbps=algbw,
                    busbw_gbps=busbw,
                    wrong=None if wrong is None else int(wrong),
                    status=STATUS_OK if valid else STATUS_INVALID,
                    repeat=repeat,
                )
            )
    return rows


def _samples(
    per_iter: Mapping[str, Any], coll: Collective, n: int, size: int
) -> list[tuple[int, float | None, float | None, float | None]]:
    """(iteration, time, algbw, busbw) of each iteration past the skipped ones."""
    skipped = int(per_iter.get("skipped_iterations") or 0)
    out = []
    for i, value in enumerate(per_iter["times_us"][skipped:], skipped):
        time_us = _number(value)
        finite = time_us is not None and math.isfinite(time_us)
        algbw = coll.algbw_gbps(size, time_us) if finite and time_us and time_us > 0 else None
        out.append((i, time_us, algbw, None if algbw is None else algbw * coll.busbw_factor(n)))
    return out


def _summary(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry as meta.json keeps it: everything but the per-iteration time lists (the
    rows hold those; the copied report holds the per-process ones)."""
    kept: dict[str, Any] = {}
    for key, value in entry.items():
        if key.endswith("_per_iter") and isinstance(value, dict):
            value = {
                k: v for k, v in value.items() if k not in ("times_us", "per_process_max_times_us")
            }
        kept[key] = value
    return kept


def facts(meta: Mapping[str, Any], rows: Sequence[Row]) -> dict[str, Any]:
    """The importer's facts (``colbench import``'s summary line, meta.json's ``tables``)."""
    devices = [d for d in meta["config"].get("devices") or [] if isinstance(d, dict)]
    table = {
        "op": rows[0].op,
        "op_from": meta.get("op_from"),
        "world_size": rows[0].world_size,
        "world_size_from": meta.get("world_size_from"),
        "hosts": sorted({str(d.get("hostname", "")) for d in devices}),
        "devices": sorted({str(d.get("device_info", "")) for d in devices}),
        "rows": len(rows),
    }
    code = meta.get("nccl_version")
    return {"versions": {"nccl": version_text(from_code(code))} if code else {}, "tables": [table]}
