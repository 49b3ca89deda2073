"""torch's flight-recorder dumps and PARAM's basic trace format.

Flight recorder (``TORCH_FR_BUFFER_SIZE``; written by ``torch._C._distributed_c10d.
_dump_fr_trace`` as a pickle, or ``_dump_fr_trace_json``): ``version``, ``pg_config``
(process group -> ranks) and ``entries``, each with ``profiling_name``
(``nccl:all_reduce``, ``gloo:all_gather``), ``input_sizes``/``output_sizes``,
``input_dtypes``, ``process_group`` and, where the backend timed it, ``duration_ms``.
torch's own reader (``torch.distributed.flight_recorder``) unpickles the file as it is;
a file from another machine is data to read, never code to run, so here the pickle is
read by an unpickler that refuses every global (a real dump has none: plain dicts,
lists, strings and numbers). The dump names the backend's work, not the call: gloo runs
``reduce_scatter_tensor`` as ``gloo:all_reduce``, and records no split sizes. A dump
does not say its rank; torch's reader takes it from the file name's last digits, as here.

PARAM basic trace (facebookresearch/param, ``commsTraceParser._parseBasicTrace``): a JSON
list of ``{"comms": "all_reduce", "in_msg_size": ELEMENTS, "out_msg_size": ELEMENTS,
"dtype": "float", "world_size": N, "in_split": [...], "out_split": [...]}``; entries with
``compute`` instead of ``comms`` are compute and left out.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any, NoReturn

from colbench.replay.calls import IGNORED, BadTrace, Trace, TracedCall, fold, torch_dtype
from colbench.replay.kineto import numel, splits


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> NoReturn:
        raise BadTrace(
            f"its pickle asks for {module}.{name}; a flight-recorder dump holds plain data "
            "only, so it is not one (and is not unpickled)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise BadTrace("its pickle holds persistent ids; a flight-recorder dump has none")


def unpickle(data: bytes) -> Any:
    """A pickle of plain data (dicts, lists, strings, numbers) and nothing else."""
    try:
        return _PlainData(io.BytesIO(data)).load()
    except BadTrace:
        raise
    except Exception as exc:  # a damaged pickle raises almost anything
        raise BadTrace(f"a pickle that does not load ({type(exc).__name__}: {exc})") from None


def file_rank(path: str) -> int | None:
    """The rank in a dump's file name (``nccl_trace_rank_3`` -> 3), as torch's reader."""
    match = re.search(r"(\d+)(\.[A-Za-z]+)*$", path)
    return int(match.group(1)) if match else None


def _pg_sizes(config: Any) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for key, pg in (config or {}).items() if isinstance(config, dict) else ():
        ranks = splits(pg.get("ranks")) if isinstance(pg, dict) else None
        if ranks is not None:
            sizes[str(key)] = len(ranks)
    return sizes


def flight_recorder(dump: dict[str, Any], path: str) -> Trace:
    entries = dump.get("entries")
    if not isinstance(entries, list):
        raise BadTrace(f"a flight-recorder dump without entries (keys: {', '.join(dump)})")
    sizes = _pg_sizes(dump.get("pg_config"))
    calls = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("profiling_name"), str):
            raise BadTrace("a flight-recorder entry without a profiling_name")
        if fold(entry["profiling_name"]) in IGNORED:
            continue
        group = entry.get("process_group") or ["", ""]
        size = sizes.get(str(group[0])) or (
            next(iter(sizes.values())) if len(set(sizes.values())) == 1 else None
        )
        dtypes = entry.get("input_dtypes") or entry.get("output_dtypes") or []
        duration_ms = entry.get("duration_ms")
        calls.append(
            TracedCall(
                entry["profiling_name"],
                numel(entry.get("input_sizes")),
                numel(entry.get("output_sizes")),
                torch_dtype(dtypes[0]) if dtypes else None,
                size,
                duration_us=float(duration_ms) * 1e3
                if isinstance(duration_ms, int | float)
                else None,
            )
        )
    if not calls:
        raise BadTrace(f"a flight-recorder dump with {len(entries)} entries, no collective")
    return Trace(path, "flight recorder", calls, file_rank(path))


def param_basic(items: list[Any], path: str) -> Trace:
    calls = []
    worlds = set()
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict) or not ("comms" in item or "compute" in item):
            raise BadTrace(f"PARAM trace entry {number} has neither 'comms' nor 'compute'")
        if "comms" not in item or fold(str(item["comms"])) in IGNORED:
            continue
        name = str(item["comms"])
        world = item.get("world_size")
        sized = fold(name) not in ("barrier",)
        in_numel, out_numel = item.get("in_msg_size", 0), item.get("out_msg_size", 0)
        if sized and not (isinstance(in_numel, int) and isinstance(out_numel, int)):
            raise BadTrace(f"PARAM trace entry {number} ({name}) has no in/out_msg_size")
        if isinstance(world, int):
            worlds.add(world)
        calls.append(
            TracedCall(
                name,
                in_numel or 0,
                out_numel or 0,
                torch_dtype(item.get("dtype")),
                world if isinstance(world, int) else None,
                splits(item.get("in_split")),
                splits(item.get("out_split")),
            )
        )
    if not calls:
        raise BadTrace(f"a PARAM trace with {len(items)} entries, no collective")
    world = max(worlds) if worlds else None
    return Trace(path, "PARAM basic trace", calls, file_rank(path), world)
