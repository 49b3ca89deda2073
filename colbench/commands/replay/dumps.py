"""torch's flight-recorder dumps and PARAM's basic trace format (docs/replay.md, "What it
reads", has their fields).

torch's own reader (``torch.distributed.flight_recorder``) unpickles a dump as it is; a
file from another machine is data to read, never code to run, so here the pickle is read
by an unpickler that refuses every global (a real dump has none: plain dicts, lists,
strings and numbers). A dump names the backend's work, not the call (gloo runs
``reduce_scatter_tensor`` as ``gloo:all_reduce``), records no split sizes, and does not
say its rank: torch's reader takes it from the file name's last digits, as here.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any, NoReturn

from colbench.commands.replay import schema
from colbench.commands.replay.calls import IGNORED, BadTrace, Trace, TracedCall, fold, torch_dtype
from colbench.commands.replay.schema import numel, splits


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
        found = schema.shown(f"{type(exc).__name__}: {exc}")
        raise BadTrace(f"a pickle that does not load ({found})") from None


def file_rank(path: str) -> int | None:
    """The rank in a dump's file name (``nccl_trace_rank_3`` -> 3), as torch's reader;
    None where the name ends in no digits or in more than a rank has."""
    match = re.search(r"(\d+)(\.[A-Za-z]+)*$", path)
    digits = (match.group(1).lstrip("0") or "0") if match else ""
    # Bounded before int(): a name of 5,000 digits is past int()'s limit.
    if not digits or len(digits) > len(str(schema.MAX_RANKS)):
        return None
    rank = int(digits)
    return rank if rank < schema.MAX_RANKS else None


def _pg_sizes(config: dict[str, Any]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for key, pg in config.items():
        at = f"pg_config {schema.shown(str(key))}"
        schema.check({"group": pg}, {"group": schema.OBJECT}, at)
        schema.check(pg, schema.RECORDER_GROUP, at)
        ranks = splits(pg.get("ranks"))
        if ranks:  # a group that lists no ranks says nothing of its size
            sizes[str(key)] = len(ranks)
    return sizes


def flight_recorder(dump: dict[str, Any], path: str) -> Trace:
    schema.check(dump, schema.FLIGHT_RECORDER)
    entries = dump["entries"]
    sizes = _pg_sizes(dump.get("pg_config") or {})
    calls = []
    for index, entry in enumerate(entries, 1):
        _check_entry(entry, index)
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
                duration_us=None if duration_ms is None else float(duration_ms) * 1e3,
                index=index,
            )
        )
    if not calls:
        raise BadTrace(f"a flight-recorder dump with {len(entries)} entries, no collective")
    return Trace(path, "flight recorder", calls, file_rank(path))


def _check_entry(entry: Any, index: int) -> None:
    name = entry.get("profiling_name") if isinstance(entry, dict) else None
    at = schema.call_at(index, name if isinstance(name, str) else "?")
    schema.check({"entry": entry}, {"entry": schema.OBJECT}, at)
    schema.check(entry, schema.RECORDER_ENTRY, at)


def param_basic(items: list[Any], path: str) -> Trace:
    calls = []
    worlds = set()
    for index, item in enumerate(items, 1):
        if not isinstance(item, dict) or not ("comms" in item or "compute" in item):
            raise BadTrace("has neither 'comms' nor 'compute'", f"entry {index}")
        if "comms" not in item:
            continue
        name = item["comms"]
        at = schema.call_at(index, name if isinstance(name, str) else "?")
        schema.check(item, schema.PARAM_ENTRY, at)
        if fold(name) in IGNORED:
            continue
        world = item.get("world_size")
        in_numel, out_numel = item.get("in_msg_size"), item.get("out_msg_size")
        if fold(name) != "barrier" and (in_numel is None or out_numel is None):
            raise BadTrace("in_msg_size or out_msg_size is missing", at)
        if world is not None:
            worlds.add(world)
        calls.append(
            TracedCall(
                name,
                in_numel or 0,
                out_numel or 0,
                torch_dtype(item.get("dtype")),
                world,
                splits(item.get("in_split")),
                splits(item.get("out_split")),
                index=index,
            )
        )
    if not calls:
        raise BadTrace(f"a PARAM trace with {len(items)} entries, no collective")
    world = max(worlds) if worlds else None
    return Trace(path, "PARAM basic trace", calls, file_rank(path), world)
