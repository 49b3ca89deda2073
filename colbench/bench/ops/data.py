"""Element types and reduction operators by the names users type, and the deterministic
test data and exact verification every collective shares.

Every rank can compute every other rank's input from (rank, element index, seed), so
the expected output of any collective is known without communication. Values are small
non-negative integers, chosen per reduction so that the exact result is representable in
every supported dtype at any world size: then a bitwise comparison is a fair test
(nccl-tests does the same). Only ``avg`` on floats, where the backend's rounding of the
division may differ, uses a tolerance. Work is done in chunks, so verifying a 1 GiB
buffer needs a bounded extra amount of memory. torch is imported inside the functions,
as in the op modules (colbench.bench.ops.base).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from colbench.errors import UsageError

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist


@dataclass(frozen=True)
class DType:
    name: str
    #: Name nccl-tests prints in its `type` column.
    nccl_name: str
    elem_bytes: int
    is_float: bool
    #: Largest integer N such that every integer in [0, N] is exact in this type and
    #: the sum of any inputs we generate stays representable (see colbench.bench.ops.data).
    exact_limit: int

    @property
    def torch(self) -> torch.dtype:
        import torch

        return getattr(torch, self.name)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "float", 4, True, 2**24),
        DType("float16", "half", 2, True, 2**11),
        DType("bfloat16", "bfloat16", 2, True, 2**8),
        DType("float64", "double", 8, True, 2**53),
        DType("int8", "int8", 1, False, 2**7 - 1),
        DType("uint8", "uint8", 1, False, 2**8 - 1),
        DType("int32", "int32", 4, False, 2**31 - 1),
        DType("int64", "int64", 8, False, 2**63 - 1),
    )
}
# nccl-tests' -d spellings map onto ours.
_DTYPE_ALIASES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp16": "float16",
    "fp64": "float64",
    "char": "int8",
    "int": "int32",
    "long": "int64",
}

_NO_UNSIGNED = (
    "nccl-tests' type, not measured here: torch implements no arithmetic on it (colbench "
    "could neither fill nor check a buffer) and gloo cannot reduce it"
)
_NO_FP8 = (
    "nccl-tests' 8-bit float, not measured here: torch implements no arithmetic on it "
    "(colbench could neither fill nor check a buffer) and gloo cannot reduce it"
)
#: Names nccl-tests' -d takes that colbench refuses, and why: speaking nccl-tests, a name
#: it knows is refused with its reason, never as unknown.
NOT_MEASURED_DTYPES = {
    "uint32": _NO_UNSIGNED,
    "uint64": _NO_UNSIGNED,
    "f8e4m3": _NO_FP8,
    "f8e5m2": _NO_FP8,
}
#: The same for -o.
NOT_MEASURED_REDOPS = {
    "mulsum": (
        "nccl-tests' pre-multiplied sum (ncclRedOpCreatePreMulSum), not measured here: "
        "torch.distributed has no public reduction op for it"
    ),
}

#: Reduction operator names (nccl-tests spelling) -> torch.distributed.ReduceOp attribute.
REDOPS: dict[str, str] = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}

#: Marker used in rows of collectives that reduce nothing (nccl-tests prints `none`).
NO_REDOP = "none"


def names_of(spec: str, every: list[str], flag: str, example: str) -> list[str]:
    """A comma-separated list of names, or ``all`` of them; a one-line error when empty."""
    names = every if spec.strip() == "all" else [p.strip() for p in spec.split(",") if p.strip()]
    if not names:
        raise UsageError(f"empty --{flag}: give e.g. {example} or all")
    return names


def parse_dtypes(spec: str) -> tuple[DType, ...]:
    """``"float32,bfloat16"`` or ``"all"`` -> DType tuple (order kept, duplicates dropped)."""
    out: list[DType] = []
    for name in names_of(spec, list(DTYPES), "dtype", "float32 or float32,bfloat16"):
        key = _DTYPE_ALIASES.get(name.lower(), name.lower())
        if key in NOT_MEASURED_DTYPES:
            why = NOT_MEASURED_DTYPES[key]
            raise UsageError(f"dtype {name!r}: {why}; choose from {', '.join(DTYPES)}")
        if key not in DTYPES:
            raise UsageError(f"unknown dtype {name!r}: choose from {', '.join(DTYPES)} or all")
        if DTYPES[key] not in out:
            out.append(DTYPES[key])
    return tuple(out)


def parse_redops(spec: str) -> tuple[str, ...]:
    """``"sum,max"`` or ``"all"`` -> tuple of reduction names."""
    names = [name.lower() for name in names_of(spec, list(REDOPS), "redop", "sum or sum,max")]
    for name in names:
        if name in NOT_MEASURED_REDOPS:
            why = NOT_MEASURED_REDOPS[name]
            raise UsageError(f"reduction op {name!r}: {why}; choose from {', '.join(REDOPS)}")
        if name not in REDOPS:
            raise UsageError(
                f"unknown reduction op {name!r}: choose from {', '.join(REDOPS)} or all"
            )
    return tuple(dict.fromkeys(names))


def redop_supported(redop: str, dtype: DType) -> str | None:
    """Why (redop, dtype) cannot run, or None. torch computes avg by division, so integers fail."""
    if redop == "avg" and not dtype.is_float:
        return f"avg needs a floating-point dtype, not {dtype.name}"
    return None


def torch_redop(redop: str) -> dist.ReduceOp:
    import torch.distributed as dist

    return getattr(dist.ReduceOp, REDOPS[redop])


class Context(Protocol):
    """What the data of one (op, dtype, redop) needs of its context
    (colbench.bench.ops.base.Context is one; the data module imports no op code)."""

    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def redop(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def device(self) -> Any: ...


#: Elements per chunk when generating or comparing: bounds verification scratch memory
#: (a few int64 temporaries of this length, about 40 MiB in all; see colbench.bench.memory).
CHUNK_ELEMS = 1 << 20


def int_view(elem_bytes: int) -> torch.dtype:
    """The integer dtype of this width, for bitwise comparison of any dtype."""
    import torch

    return {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[elem_bytes]


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A cheap integer hash (multiply-xorshift; int64 wraps the same way on every
    device) to 31 bits, so patterns have no short period that a misplaced chunk could
    match. In place where it can be: on CPU every new tensor costs page faults."""
    x = x * 0x9E3779B1
    x.bitwise_xor_(x >> 16).mul_(0x85EBCA6B)
    x.bitwise_xor_(x >> 13)
    return x.bitwise_and_(0x7FFFFFFF)


def _below(h: torch.Tensor, bound: int, bits: int = 31) -> torch.Tensor:
    """Map ``bits``-bit hashes onto 0..bound-1 by a multiply and shift: integer division
    (``%``) is several times slower on CPU."""
    return (h * bound).bitwise_right_shift_(bits)


def _window(idx: torch.Tensor, src_rank: int, ctx: Context, widest: int) -> torch.Tensor:
    """1 where ``src_rank`` lies in a per-element window of 0..``widest`` ranks, else 0.

    The window's start and width vary per element, so the count of contributing ranks
    (the reduced value) varies too, yet never exceeds ``widest``.
    """
    import torch

    n = ctx.world_size
    h = _mix(idx + ctx.seed * 0x632BE5AB)
    start = _below(h, n)
    width = _below(h & 0xFFFF, widest + 1, 16)
    return (((src_rank - start) % n) < width).to(torch.int64)


def raw_values(kind: str, src_rank: int, start: int, stop: int, ctx: Context) -> torch.Tensor:
    """int64 values that rank ``src_rank`` contributes at element indices [start, stop).

    ``kind`` is ``copy`` for data-movement collectives, else the reduction name. Values
    are small non-negative integers, pseudo-random per (element, rank), bounded so the
    reduction over every rank stays exact in the dtype.
    """
    import torch

    n = ctx.world_size
    # One below the exact limit: uint8's limit (255) is its poison value.
    limit = ctx.dtype.exact_limit - 1
    idx = torch.arange(start, stop, dtype=torch.int64, device=ctx.device)
    if kind in ("sum", "avg"):
        # Largest per-rank value whose n-fold sum stays exact in this dtype.
        top = min(7, limit // n)
        if top < 1:
            # More ranks than exact integers: at most `limit` ranks contribute a 1.
            return _window(idx, src_rank, ctx, limit)
        return _below(_rank_hash(idx, src_rank, ctx), top + 1)
    if kind == "prod":
        # Factors of 2 on at most `widest` ranks: the product is an exact power of two.
        widest = min(6, n, limit.bit_length() - 1)
        return _window(idx, src_rank, ctx, widest).add_(1)
    if kind in ("min", "max"):
        # A per-element base keeps the extreme varying even when n is large.
        base = _below(_mix(idx + ctx.seed * 0x632BE5AB), 50)
        return base.add_(_below(_rank_hash(idx, src_rank, ctx), 50))
    return _below(_rank_hash(idx, src_rank, ctx), min(limit, 100) + 1)


def _rank_hash(idx: torch.Tensor, src_rank: int, ctx: Context) -> torch.Tensor:
    return _mix(idx * 1031 + ((src_rank + 1) * 0x27D4EB2F + ctx.seed))


def values(kind: str, src_rank: int, start: int, stop: int, ctx: Context) -> torch.Tensor:
    """:func:`raw_values` cast to the run's dtype."""
    return raw_values(kind, src_rank, start, stop, ctx).to(ctx.dtype.torch)


def reduced_values(start: int, stop: int, ctx: Context) -> torch.Tensor:
    """The exact reduction over all ranks of their ``ctx.redop`` inputs at [start, stop)."""
    import torch

    kind = ctx.redop
    combine = {"prod": torch.mul, "min": torch.minimum, "max": torch.maximum}.get(kind, torch.add)
    acc = raw_values(kind, 0, start, stop, ctx)
    for rank in range(1, ctx.world_size):
        acc = combine(acc, raw_values(kind, rank, start, stop, ctx), out=acc)
    if kind == "avg":
        return (acc.to(torch.float64) / ctx.world_size).to(ctx.dtype.torch)
    return acc.to(ctx.dtype.torch)


def fill(tensor: torch.Tensor, make: Callable[[int, int], torch.Tensor], offset: int = 0) -> None:
    """Write ``make(offset + i, offset + j)`` into ``tensor[i:j]``, chunk by chunk."""
    numel = tensor.numel()
    for lo in range(0, numel, CHUNK_ELEMS):
        hi = min(lo + CHUNK_ELEMS, numel)
        tensor[lo:hi].copy_(make(offset + lo, offset + hi))


def poison(tensor: torch.Tensor) -> None:
    """Fill an output with a value no generator produces, so an unwritten element is caught."""
    import torch

    tensor.fill_(255 if tensor.dtype == torch.uint8 else -1)


def copy_of(src_rank: int, ctx: Context) -> Callable[[int, int], torch.Tensor]:
    """``make``/``expect`` of rank ``src_rank``'s "copy" values, for :func:`fill` and
    :func:`count_wrong`."""
    return functools.partial(values, "copy", src_rank, ctx=ctx)


def fill_own_copy(send: torch.Tensor, recv: torch.Tensor, ctx: Context) -> None:
    """For ops that move data without reducing it: the output poisoned, the input this
    rank's "copy" values, so every element received shows which rank it came from."""
    poison(recv)
    fill(send, copy_of(ctx.rank, ctx))


def count_wrong(
    actual: torch.Tensor, expect: Callable[[int, int], torch.Tensor], ctx: Context, offset: int = 0
) -> int:
    """Elements of ``actual`` that differ from ``expect(offset + i, offset + j)``.

    Bitwise, except float ``avg``, which allows the rounding of n scaled additions.
    """
    import torch

    approx = ctx.redop == "avg" and ctx.dtype.is_float
    numel = actual.numel()
    wrong = 0
    for lo in range(0, numel, CHUNK_ELEMS):
        hi = min(lo + CHUNK_ELEMS, numel)
        got = actual[lo:hi]
        want = expect(offset + lo, offset + hi)
        if approx:
            # Backends may scale each input by 1/n before summing: n roundings at most.
            # Capped, so a wrong value is still caught with bf16 at hundreds of ranks.
            tolerance = min((ctx.world_size + 2) * torch.finfo(got.dtype).eps, 0.25)
            want64 = want.to(torch.float64)
            bad = (got.to(torch.float64) - want64).abs() > tolerance * want64.abs().clamp(min=1.0)
        else:
            view = int_view(got.element_size())
            bad = got.view(view) != want.view(view)
        wrong += int(bad.sum().item())
    return wrong


def count_wrong_blocks(actual: torch.Tensor, block: int, ctx: Context, offset: int = 0) -> int:
    """Wrong elements of an output made of one ``block`` per rank, in rank order, where
    block j must equal rank j's ``copy`` data from element ``offset`` on."""
    return sum(
        count_wrong(actual[src * block : (src + 1) * block], copy_of(src, ctx), ctx, offset)
        for src in range(ctx.world_size)
    )
