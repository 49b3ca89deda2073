"""Every op's buffers, data and verification, with the collective done by hand in torch.

No process group: for n ranks we build each rank's Context, allocate, view and fill as
bench.py does, then write the correct output the way the collective would (through
the same views and chunk lists torch would write into) and ask each rank to verify.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch

from colbench.bench import ops
from colbench.bench.ops.base import Buffers, Collective, Context
from colbench.bench.ops.data import DTYPES, NO_REDOP, REDOPS, redop_supported

CPU = torch.device("cpu")
N = 3
# Storage is allocated for the largest size and every smaller size is a view, as in bench.py.
LARGEST_BYTES = 8192
REQUESTED_BYTES = 1024

Ranks = list[tuple[Context, Buffers]]


def reduce_in_dtype(inputs: list[torch.Tensor], redop: str) -> torch.Tensor:
    """What a backend computes, in the buffers' own dtype."""
    stacked = torch.stack(inputs)
    dtype = stacked.dtype
    if redop in ("sum", "avg"):
        total = stacked.sum(0).to(dtype)
        return total / len(inputs) if redop == "avg" else total
    if redop == "prod":
        return stacked.prod(0).to(dtype)
    return stacked.amin(0) if redop == "min" else stacked.amax(0)


def sim_all_reduce(ranks: Ranks) -> None:
    result = reduce_in_dtype([b.recv.clone() for _, b in ranks], ranks[0][0].redop)
    for _, b in ranks:
        b.recv.copy_(result)


def sim_reduce(ranks: Ranks) -> None:
    ctx0 = ranks[0][0]
    result = reduce_in_dtype([b.recv.clone() for _, b in ranks], ctx0.redop)
    ranks[ctx0.root][1].recv.copy_(result)


def sim_broadcast(ranks: Ranks) -> None:
    root = ranks[0][0].root
    source = ranks[root][1].recv.clone()
    for _, b in ranks:
        b.recv.copy_(source)


def sim_all_gather(ranks: Ranks) -> None:
    gathered = torch.cat([b.send.clone() for _, b in ranks])
    for _, b in ranks:
        b.recv.copy_(gathered)


def sim_reduce_scatter(ranks: Ranks) -> None:
    full = reduce_in_dtype([b.send.clone() for _, b in ranks], ranks[0][0].redop)
    for ctx, b in ranks:
        c = b.layout.count
        b.recv.copy_(full[ctx.rank * c : (ctx.rank + 1) * c])


def sim_all_to_all(ranks: Ranks) -> None:
    sends = [b.send.clone() for _, b in ranks]
    for ctx, b in ranks:
        c = b.layout.count
        me = ctx.rank
        b.recv.copy_(torch.cat([s[me * c : (me + 1) * c] for s in sends]))


def sim_all_to_all_single(op: Collective, ranks: Ranks) -> None:
    """torch's all_to_all_single(output, input, output_split_sizes, input_split_sizes) as
    each rank's bound call asks for it: input chunk j goes to rank j, outputs concatenate
    what each source sent, in source order."""
    calls = [_arguments(op.bind(b, ctx)) for ctx, b in ranks]
    ins = [c["input"].clone().split(c["input_split_sizes"]) for c in calls]
    for me, call in enumerate(calls):
        sizes = call["output_split_sizes"]
        got = [ins[src][me] for src in range(len(ranks))]
        assert [g.numel() for g in got] == sizes
        call["output"].copy_(torch.cat(got))


def _arguments(call: Any) -> dict[str, Any]:
    """A bound torch call's arguments by name, however ops.base.bound_call passed them."""
    return dict(inspect.signature(call.func).bind(*call.args, **call.keywords).arguments)


def sim_gather(ranks: Ranks) -> None:
    root = ranks[0][0].root
    sends = [b.send.clone() for _, b in ranks]
    # dist.gather writes into the root's gather_list: the op's chunk views.
    chunks = ranks[root][1].chunks
    assert len(chunks) == len(ranks)
    for chunk, sent in zip(chunks, sends, strict=True):
        chunk.copy_(sent)


def sim_scatter(ranks: Ranks) -> None:
    root = ranks[0][0].root
    # dist.scatter reads the root's scatter_list: the op's chunk views.
    chunks = [c.clone() for c in ranks[root][1].chunks]
    assert len(chunks) == len(ranks)
    for ctx, b in ranks:
        b.recv.copy_(chunks[ctx.rank])


def sim_sendrecv(ranks: Ranks) -> None:
    sends = [b.send.clone() for _, b in ranks]
    for ctx, b in ranks:
        b.recv.copy_(sends[(ctx.rank - 1) % len(ranks)])


SIMULATORS: dict[str, Callable[[Ranks], None]] = {
    "all_reduce": sim_all_reduce,
    "reduce": sim_reduce,
    "broadcast": sim_broadcast,
    "all_gather": sim_all_gather,
    "reduce_scatter": sim_reduce_scatter,
    "all_to_all": sim_all_to_all,
    "all_to_allv": functools.partial(sim_all_to_all_single, ops.get("all_to_allv")),
    "gather": sim_gather,
    "scatter": sim_scatter,
    "sendrecv": sim_sendrecv,
}
# Ops whose result is defined on the root only: other ranks always report 0 wrong.
ROOT_ONLY = {"reduce", "gather"}


def cases() -> list[tuple[str, str, str, str]]:
    out = []
    for op in ops.REGISTRY:
        if not op.sized:
            continue
        for placement in op.placements:
            for dtype in DTYPES:
                redops = REDOPS if op.uses_redop else (NO_REDOP,)
                for redop in redops:
                    if redop != NO_REDOP and redop_supported(redop, DTYPES[dtype]):
                        continue
                    out.append((op.name, placement, dtype, redop))
    return out


def setup_ranks(
    op: Collective, placement: str, dtype: str, redop: str, n: int = N, root: int = 0
) -> Ranks:
    ranks = []
    for rank in range(n):
        ctx = Context(
            rank=rank, world_size=n, root=root, dtype=DTYPES[dtype], redop=redop, seed=7, device=CPU
        )
        e = ctx.dtype.elem_bytes
        in_place = placement == "in"
        storage = op.allocate(op.layout(LARGEST_BYTES, e, n), ctx, in_place)
        bufs = op.views(storage, op.layout(REQUESTED_BYTES, e, n), ctx, in_place)
        assert bufs.in_place == in_place
        op.fill(bufs, ctx)
        ranks.append((ctx, bufs))
    return ranks


def test_every_sized_op_has_a_simulator() -> None:
    assert set(SIMULATORS) == {op.name for op in ops.REGISTRY if op.sized}


def test_placements_torch_offers() -> None:
    by_name = {op.name: op.placements for op in ops.REGISTRY}
    assert by_name["all_reduce"] == ("in",)
    assert by_name["broadcast"] == ("in",)
    assert by_name["reduce"] == ("in",)
    assert by_name["all_to_all"] == ("out",)
    assert by_name["sendrecv"] == ("out",)
    for name in ("all_gather", "reduce_scatter", "gather", "scatter"):
        assert set(by_name[name]) == {"out", "in"}, name


@pytest.mark.parametrize(("name", "placement", "dtype", "redop"), cases())
def test_correct_result_verifies_and_one_flip_is_caught(
    name: str, placement: str, dtype: str, redop: str
) -> None:
    op = ops.get(name)
    roots = (0, N - 1) if op.rooted else (0,)
    for root in roots:
        ranks = setup_ranks(op, placement, dtype, redop, root=root)
        SIMULATORS[name](ranks)
        for ctx, bufs in ranks:
            assert op.count_wrong(bufs, ctx) == 0, f"rank {ctx.rank} root {root}"
        checked = [r for r in range(N) if name not in ROOT_ONLY or r == root]
        for rank in checked:
            ctx, bufs = ranks[rank]
            i = bufs.recv.numel() // 2 + rank
            bufs.recv[i] += 1
            assert op.count_wrong(bufs, ctx) == 1, f"rank {rank} root {root}"
            bufs.recv[i] -= 1
            assert op.count_wrong(bufs, ctx) == 0


@pytest.mark.parametrize(("name", "placement", "dtype", "redop"), cases())
def test_skipping_the_collective_is_caught(
    name: str, placement: str, dtype: str, redop: str
) -> None:
    # Buffers as fill() leaves them: outputs poisoned or still holding the inputs.
    op = ops.get(name)
    ranks = setup_ranks(op, placement, dtype, redop, root=1)
    assert sum(op.count_wrong(b, c) for c, b in ranks) > 0


@pytest.mark.parametrize("n", [1, 2, 8])
@pytest.mark.parametrize("name", sorted(SIMULATORS))
def test_other_world_sizes(name: str, n: int) -> None:
    op = ops.get(name)
    if op.unsupported(n, "nccl"):
        pytest.skip(op.unsupported(n, "nccl") or "")
    redop = "max" if op.uses_redop else NO_REDOP
    for placement in op.placements:
        ranks = setup_ranks(op, placement, "bfloat16", redop, n=n, root=n - 1)
        SIMULATORS[name](ranks)
        assert [op.count_wrong(b, c) for c, b in ranks] == [0] * n, placement


@pytest.mark.parametrize("name", ["all_gather", "reduce_scatter", "gather", "scatter"])
def test_in_place_views_alias_this_ranks_slot(name: str) -> None:
    op = ops.get(name)
    for ctx, bufs in setup_ranks(op, "in", "float32", "sum" if op.uses_redop else NO_REDOP):
        aliased = name in ("all_gather", "reduce_scatter") or ctx.rank == ctx.root
        c = bufs.layout.count
        # The op's whole n-chunk buffer and the one-chunk buffer that lives inside it.
        if name in ("all_gather", "gather"):
            whole, part = bufs.recv, bufs.send
        else:
            whole, part = bufs.send, bufs.recv
        assert part.numel() == c
        if aliased:
            assert part.data_ptr() == whole[ctx.rank * c :].data_ptr()


def test_views_of_a_smaller_size_are_prefixes_of_the_storage() -> None:
    op = ops.get("all_to_all")
    ctx = Context(0, 3, 0, DTYPES["float32"], NO_REDOP, 0, CPU)
    storage = op.allocate(op.layout(LARGEST_BYTES, 4, 3), ctx, in_place=False)
    bufs = op.views(storage, op.layout(REQUESTED_BYTES, 4, 3), ctx, in_place=False)
    assert bufs.send.data_ptr() == storage.send.data_ptr()
    assert bufs.recv.data_ptr() == storage.recv.data_ptr()
    assert (bufs.send.numel(), bufs.recv.numel()) == (3 * 84, 3 * 84)


def test_reduce_scatter_with_chunks_swapped_is_caught() -> None:
    op = ops.get("reduce_scatter")
    ranks = []
    for rank in range(2):
        ctx = Context(rank, 2, 0, DTYPES["float32"], "sum", 0, CPU)
        lay = op.layout(8192, 4, 2)
        bufs = op.views(op.allocate(lay, ctx, False), lay, ctx, False)
        op.fill(bufs, ctx)
        ranks.append((ctx, bufs))
    full = reduce_in_dtype([b.send.clone() for _, b in ranks], "sum")
    c = ranks[0][1].layout.count
    # A broken backend delivers the chunks to the wrong ranks.
    ranks[0][1].recv.copy_(full[c:])
    ranks[1][1].recv.copy_(full[:c])
    assert sum(op.count_wrong(b, ctx) for ctx, b in ranks) > 0
