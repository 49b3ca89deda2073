"""The trace formats replay reads, each into a :class:`~.calls.Trace` (docs/replay.md,
"What it reads", has their fields).

torch profiler traces (Chrome/Kineto JSON): on NCCL a ``record_param_comms`` event per
call, whose GPU kernel (torch 2.4+) carries the collective's own time; on gloo the
dispatcher's ``c10d::`` event, then the backend's ``gloo:`` work event. The backend's name
can differ from the call's (gloo runs ``reduce_scatter_tensor`` as ``gloo:all_reduce``),
so the call comes from the c10d event and the dtype and time from the work it started.

torch's flight-recorder dumps: torch's own reader unpickles a dump as it is; a file from
another machine is data to read, never code to run, so here the pickle is read by an
unpickler that refuses every global (a real dump has none). A dump names the backend's
work, not the call, records no split sizes, and does not say its rank: torch's reader
takes it from the file name's last digits, as here. And PARAM's basic trace format.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any, NoReturn

from colbench.commands.replay import schema
from colbench.commands.replay.calls import (
    IGNORED,
    BadTrace,
    Trace,
    TracedCall,
    fold,
    recorded_dtype,
    torch_dtype,
)
from colbench.commands.replay.schema import numel, splits

RPC = "record_param_comms"
#: c10d op (folded) -> (index of its output argument, of its input argument), from the
#: schemas in torch/csrc/distributed/c10d/Ops.cpp: in-place ops have no separate output.
_C10D_ARGS: dict[str, tuple[int | None, int | None]] = {
    **dict.fromkeys(("allreduce", "allreducecoalesced", "broadcast", "reduce"), (None, 0)),
    **dict.fromkeys(
        ("allgatherbase", "allgather", "allgatherintotensorcoalesced", "allgathercoalesced"), (0, 1)
    ),
    **dict.fromkeys(("reducescatterbase", "reducescatter", "reducescattertensorcoalesced"), (0, 1)),
    **dict.fromkeys(("alltoallbase", "alltoall", "gather", "scatter"), (0, 1)),
    "barrier": (None, None),
    "monitoredbarrier": (None, None),
    "send": (None, 0),
    "recv": (0, None),
    "recvanysource": (0, None),
}
#: alltoall_base_'s concrete arguments: output_split_sizes, then input_split_sizes.
_A2A_SPLITS = (3, 4)
#: Backend events a c10d call may have started, searched past the call's own start.
_MATCH_WINDOW = 256
#: The prefixes of the work events backends record (``gloo:all_reduce``).
_BACKENDS = ("gloo", "nccl", "ucc", "mpi")


def profiler_trace(doc: dict[str, Any], path: str) -> Trace:
    listed = doc.get("traceEvents")
    if not isinstance(listed, list):
        raise BadTrace("a JSON object without a traceEvents list: not a torch profiler trace")
    # A message names an event by its place in traceEvents (from 1), as jq finds it.
    events = [e for e in listed if isinstance(e, dict) and isinstance(e.get("name"), str)]
    place = {id(e): index for index, e in enumerate(listed, 1)}
    info = _distributed_info(doc.get("distributedInfo"))
    _check_events(events, place)
    sizes = {pg["pg_size"] for pg in info.get("pg_config") or [] if pg.get("pg_size")}
    if any(e["name"] == RPC for e in events):
        calls = _param_comms(events, place)
    else:
        calls = _c10d_calls(events, sizes, place)
    if not calls:
        raise BadTrace(
            f"{len(events)} events, no collective (no record_param_comms, c10d:: or gloo: "
            "event): was the profiler on while the job communicated?"
        )
    steps = len({e["name"] for e in events if e["name"].startswith("ProfilerStep#")})
    backend = info.get("backend")
    return Trace(
        path, "torch profiler", calls, info.get("rank"), info.get("world_size"), max(steps, 1),
        backend="nccl" if isinstance(backend, str) and "nccl" in backend.lower() else None,
    )  # fmt: skip


def _distributed_info(given: Any) -> dict[str, Any]:
    """The trace's distributedInfo, its fields checked (an empty one when absent)."""
    if given is None:
        return {}
    schema.check({"distributedInfo": given}, {"distributedInfo": schema.OBJECT})
    schema.check(given, schema.DISTRIBUTED_INFO, "distributedInfo")
    rank, world = given.get("rank"), given.get("world_size")
    if rank is not None and world is not None and rank >= world:
        raise BadTrace(f"rank {rank} is not a rank of its world of {world}", "distributedInfo")
    for number, group in enumerate(given.get("pg_config") or [], 1):
        at = f"distributedInfo pg_config {number}"
        schema.check({"group": group}, {"group": schema.OBJECT}, at)
        schema.check(group, schema.PROFILER_GROUP, at)
    return given


def _read_as(event: dict[str, Any]) -> tuple[str, dict[str, schema.Field]] | None:
    """What replay reads ``event`` as (a call or another event, its args' schema), None
    for events it skips (their fields may hold anything)."""
    name = event["name"]
    if name == RPC:
        return "call", schema.PARAM_COMMS
    if name.startswith("c10d::") and fold(name) not in IGNORED:
        return "call", schema.C10D
    if name.split(":", 1)[0] in _BACKENDS:
        return "event", schema.C10D
    return ("event", schema.KERNEL) if _kernel(event) else None


def _kernel(event: dict[str, Any]) -> bool:
    """A GPU kernel that carries its call's group and sequence number (torch 2.4+)."""
    args = event.get("args")
    return (
        event["name"] != RPC and isinstance(args, dict) and "Collective name" in args
        and "Seq" in args
    )  # fmt: skip


def _check_events(events: list[dict[str, Any]], place: dict[int, int]) -> None:
    for event in events:
        read_as = _read_as(event)
        if read_as is None:
            continue
        what, args_schema = read_as
        args = event.get("args")
        given = args.get("Collective name") if isinstance(args, dict) else None
        # A record_param_comms event is named by its call (allreduce), not by its kind.
        call = given if event["name"] == RPC and isinstance(given, str) else None
        at = schema.call_at(place[id(event)], event["name"] if call is None else call, what)
        schema.check(event, schema.EVENT, at)
        if call is not None and fold(call) in IGNORED:
            continue  # bookkeeping (init, wait): none of its other fields is read
        schema.check(args or {}, args_schema, at)


def _param_comms(events: list[dict[str, Any]], place: dict[int, int]) -> list[TracedCall]:
    """One call per record_param_comms event; durations from the kernels that carry the
    same process group and sequence number."""
    kernel_us: dict[tuple[Any, Any], float] = {}
    for e in filter(_kernel, events):
        args = e["args"]
        kernel_us[(args.get("Process Group Name"), args["Seq"])] = float(e.get("dur") or 0)
    calls = []
    for e in sorted((e for e in events if e["name"] == RPC), key=lambda e: e.get("ts") or 0):
        args = e.get("args") or {}
        name = args["Collective name"]
        if fold(name) in IGNORED:
            continue
        calls.append(
            TracedCall(
                name,
                args["In msg nelems"],
                args["Out msg nelems"],
                recorded_dtype(args.get("dtype")),
                args.get("Group size"),
                splits(args.get("In split size")),
                splits(args.get("Out split size")),
                kernel_us.get((args.get("Process Group Name"), args.get("Seq"))),
                # Over 30 peers torch writes "[s0, ..., s29, ...]" (kTruncatLength).
                any("..." in str(args.get(k, "")) for k in ("In split size", "Out split size")),
                place[id(e)],
            )
        )
    return calls


def _c10d_calls(
    events: list[dict[str, Any]], sizes: set[Any], place: dict[int, int]
) -> list[TracedCall]:
    ops = sorted(
        (e for e in events if e["name"].startswith("c10d::") and fold(e["name"]) not in IGNORED),
        key=lambda e: e.get("ts") or 0,
    )
    backend = sorted(
        (e for e in events if e["name"].split(":", 1)[0] in _BACKENDS),
        key=lambda e: e.get("ts") or 0,
    )
    if ops and not any((e.get("args") or {}).get("Input Dims") for e in ops):
        raise BadTrace(
            f"{len(ops)} c10d calls but no input shapes: record with "
            "torch.profiler.profile(record_shapes=True)"
        )
    taken: set[int] = set()
    return [_c10d_call(e, backend, taken, sizes, place[id(e)]) for e in ops]


def _c10d_call(
    event: dict[str, Any],
    backend: list[dict[str, Any]],
    taken: set[int],
    sizes: set[Any],
    index: int,
) -> TracedCall:
    args = event.get("args") or {}
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    concrete = args.get("Concrete Inputs") or []
    out_at, in_at = _C10D_ARGS.get(fold(event["name"]), (None, None))

    def at(items: list[Any], index: int | None) -> Any:
        return items[index] if index is not None and index < len(items) else None

    in_numel = numel(at(dims, in_at))
    out_numel = numel(at(dims, out_at)) if out_at is not None else in_numel
    work = _started(event, in_numel, backend, taken)
    work_args = (work or {}).get("args") or {}
    dtype = torch_dtype(at(types, in_at)) or torch_dtype(at(types, out_at))
    dtype = dtype or recorded_dtype(at(work_args.get("Input type") or [], 0))
    a2a = fold(event["name"]).startswith("alltoall")
    if a2a:
        given = {f"Concrete Inputs[{i}]": at(concrete, i) for i in _A2A_SPLITS}
        schema.check(
            given, dict.fromkeys(given, schema.SPLITS), schema.call_at(index, event["name"])
        )
    out_splits, in_splits = (splits(at(concrete, i)) for i in _A2A_SPLITS)
    return TracedCall(
        event["name"],
        in_numel,
        out_numel,
        dtype,
        _group_size(fold(event["name"]), in_numel, out_numel, sizes),
        in_splits if a2a else None,
        out_splits if a2a else None,
        float(work["dur"]) if work and work.get("dur") is not None else None,
        index=index,
    )


def _started(
    call: dict[str, Any], in_numel: int, backend: list[dict[str, Any]], taken: set[int]
) -> dict[str, Any] | None:
    """The backend event this call started: the first not yet taken at or after the call's
    start whose input has the call's elements (a barrier: the next barrier)."""
    barrier = "barrier" in fold(call["name"])
    start = call.get("ts") or 0
    seen = 0
    for index, work in enumerate(backend):
        if index in taken or (work.get("ts") or 0) < start:
            continue
        seen += 1
        if seen > _MATCH_WINDOW:
            break
        dims = ((work.get("args") or {}).get("Input Dims") or [None])[0]
        if ("barrier" in work["name"]) == barrier and (barrier or numel(dims) == in_numel):
            taken.add(index)
            return work
    return None


def _group_size(key: str, in_numel: int, out_numel: int, sizes: set[Any]) -> int | None:
    """The group's size: the trace's only one, else what the shapes imply (an all_gather's
    output holds n inputs), else unknown."""
    if len(sizes) == 1:
        return int(next(iter(sizes)))
    if key.startswith("allgather") and in_numel and out_numel % in_numel == 0:
        return out_numel // in_numel
    if key.startswith("reducescatter") and out_numel and in_numel % out_numel == 0:
        return in_numel // out_numel
    return None


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
        name = entry.get("profiling_name") if isinstance(entry, dict) else None
        at = schema.call_at(index, name if isinstance(name, str) else "?")
        schema.check({"entry": entry}, {"entry": schema.OBJECT}, at)
        schema.check(entry, schema.RECORDER_ENTRY, at)
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
                recorded_dtype(dtypes[0]) if dtypes else None,
                size,
                duration_us=None if duration_ms is None else float(duration_ms) * 1e3,
                index=index,
            )
        )
    if not calls:
        raise BadTrace(f"a flight-recorder dump with {len(entries)} entries, no collective")
    # The default group is the job's world: what a rank read from the name is checked by.
    config = dump.get("pg_config") or {}
    world = next(
        (sizes.get(str(k)) for k, g in config.items() if g.get("desc") == "default_pg"), None
    )
    nccl = any(c.name.lower().startswith("nccl:") for c in calls)
    return Trace(
        path, "flight recorder", calls, file_rank(path), world, named_rank=True,
        backend="nccl" if nccl else None,
    )  # fmt: skip


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
                recorded_dtype(item.get("dtype")),
                world,
                splits(item.get("in_split")),
                splits(item.get("out_split")),
                index=index,
            )
        )
    if not calls:
        raise BadTrace(f"a PARAM trace with {len(items)} entries, no collective")
    world = max(worlds) if worlds else None
    return Trace(path, "PARAM basic trace", calls, file_rank(path), world, named_rank=True)
