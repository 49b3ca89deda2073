"""Fake ``nccl.bindings.nccl``: NCCL's calls with nccl4py's argument order, each recorded,
each doing what NCCL would (see nccl/_fake.py)."""

from __future__ import annotations

from typing import Any

from nccl import _fake
from nccl._fake import reduce as combine
from nccl._fake import view


def get_version() -> int:
    return _fake.version()


def get_library_path() -> str:
    return "/fake/libnccl.so.2"


def _record(call: str, comm: Any, stream: int, **args: Any) -> None:
    _fake.record(call, rank=comm.rank, comm=comm.id[:16], stream=stream, **args)


def all_reduce(s: int, r: int, count: int, dt: int, op: int, comm: Any, stream: int) -> None:
    _record("all_reduce", comm, stream, send=s, recv=r, count=count, dtype=dt, op=op)
    every = comm.exchange(view(s, count, dt).clone())
    view(r, count, dt).copy_(combine(every, op))


def all_gather(s: int, r: int, count: int, dt: int, comm: Any, stream: int) -> None:
    _record("all_gather", comm, stream, send=s, recv=r, count=count, dtype=dt)
    every = comm.exchange(view(s, count, dt).clone())
    out = view(r, count * comm.nranks, dt)
    for i, part in enumerate(every):
        out[i * count : (i + 1) * count] = part


def reduce_scatter(s: int, r: int, count: int, dt: int, op: int, comm: Any, stream: int) -> None:
    _record("reduce_scatter", comm, stream, send=s, recv=r, count=count, dtype=dt, op=op)
    every = comm.exchange(view(s, count * comm.nranks, dt).clone())
    mine = comm.rank * count
    view(r, count, dt).copy_(combine(every, op)[mine : mine + count])


def broadcast(s: int, r: int, count: int, dt: int, root: int, comm: Any, stream: int) -> None:
    _record("broadcast", comm, stream, send=s, recv=r, count=count, dtype=dt, root=root)
    every = comm.exchange(view(s, count, dt).clone() if comm.rank == root else None)
    view(r, count, dt).copy_(every[root])


def reduce(s: int, r: int, count: int, dt: int, op: int, root: int, comm: Any, stream: int) -> None:
    _record("reduce", comm, stream, send=s, recv=r, count=count, dtype=dt, op=op, root=root)
    every = comm.exchange(view(s, count, dt).clone())
    if comm.rank == root:
        view(r, count, dt).copy_(combine(every, op))


def allto_all(s: int, r: int, count: int, dt: int, comm: Any, stream: int) -> None:
    _record("allto_all", comm, stream, send=s, recv=r, count=count, dtype=dt)
    every = comm.exchange(view(s, count * comm.nranks, dt).clone())
    out, mine = view(r, count * comm.nranks, dt), comm.rank * count
    for i, part in enumerate(every):
        out[i * count : (i + 1) * count] = part[mine : mine + count]


def gather(s: int, r: int, count: int, dt: int, root: int, comm: Any, stream: int) -> None:
    _record("gather", comm, stream, send=s, recv=r, count=count, dtype=dt, root=root)
    every = comm.exchange(view(s, count, dt).clone())
    if comm.rank == root:
        out = view(r, count * comm.nranks, dt)
        for i, part in enumerate(every):
            out[i * count : (i + 1) * count] = part


def scatter(s: int, r: int, count: int, dt: int, root: int, comm: Any, stream: int) -> None:
    _record("scatter", comm, stream, send=s, recv=r, count=count, dtype=dt, root=root)
    every = comm.exchange(view(s, count * comm.nranks, dt).clone() if comm.rank == root else None)
    mine = comm.rank * count
    view(r, count, dt).copy_(every[root][mine : mine + count])


_GROUP: list[Any] = []


def group_start() -> None:
    _GROUP.append([])


def group_end() -> None:
    calls = _GROUP.pop()
    if not calls:
        return
    comm = calls[0][1]
    _record("group", comm, calls[0][-1], calls=[c[0] for c in calls])
    sends: dict[int, list[Any]] = {}
    for kind, _, ptr, count, dt, peer, _stream in calls:
        if kind == "send":
            sends.setdefault(peer, []).append(view(ptr, count, dt).clone())
    every = comm.exchange(sends)
    taken: dict[int, int] = {}
    for kind, _, ptr, count, dt, peer, _stream in calls:
        if kind == "recv":
            at = taken.get(peer, 0)
            view(ptr, count, dt).copy_(every[peer][comm.rank][at])
            taken[peer] = at + 1


def _p2p(kind: str, ptr: int, count: int, dt: int, peer: int, comm: Any, stream: int) -> None:
    _record(kind, comm, stream, ptr=ptr, count=count, dtype=dt, peer=peer)
    if not _GROUP:
        raise RuntimeError("fake NCCL: send and recv only inside a group, as colbench calls them")
    _GROUP[-1].append((kind, comm, ptr, count, dt, peer, stream))


def send(ptr: int, count: int, dt: int, peer: int, comm: Any, stream: int) -> None:
    _p2p("send", ptr, count, dt, peer, comm, stream)


def recv(ptr: int, count: int, dt: int, peer: int, comm: Any, stream: int) -> None:
    _p2p("recv", ptr, count, dt, peer, comm, stream)
