"""``--contend LOAD``: what runs beside the measured collective ([contend.md](../docs/contend.md)),
parsed into a :class:`LoadSpec`: ``gemm:N[:DTYPE]``, an N x N matrix product in a loop (its
throughput in TFLOP/s, 2 N^3 per product), or ``OP:SIZE[:DTYPE]``, a second collective
looping on a process group of its own over the same ranks (its throughput its busbw).
The sweep then runs as two interleaved variants, ``contend=none`` and ``contend=LABEL``;
only the second world runs the load, during its own turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from colbench.bench import ops
from colbench.bench.ops.data import DTYPES, parse_dtypes
from colbench.config.sizes import format_size, parse_size
from colbench.errors import UsageError

if TYPE_CHECKING:
    from colbench.bench.ops.base import Collective, OpSettings

#: A GEMM's kind; any other kind is a collective's name.
GEMM = "gemm"
#: Above this a matrix (three of them per rank) is surely a typo: 3 x 64K^2 x 8 B = 96 GiB.
MAX_GEMM_N = 65536
_USAGE = (
    "use gemm:N[:DTYPE] (an N x N matmul loop, e.g. gemm:1024 or gemm:4096:bfloat16) or "
    "OP:SIZE[:DTYPE] (a second collective looping, e.g. all_to_all:1M)"
)


@dataclass(frozen=True)
class LoadSpec:
    """One load: a GEMM of ``n`` x ``n`` or the collective ``kind`` of ``size_bytes``."""

    kind: str
    dtype: str = "float32"
    #: The GEMM's side (0 for a collective).
    n: int = 0
    #: The collective's requested size, as --sizes reads it (0 for a GEMM).
    size_bytes: int = 0

    @property
    def is_gemm(self) -> bool:
        return self.kind == GEMM

    @property
    def label(self) -> str:
        """The canonical spelling: rows' ``load`` column and the variant's name carry it."""
        amount = str(self.n) if self.is_gemm else format_size(self.size_bytes)
        return f"{self.kind}:{amount}:{self.dtype}"

    @property
    def unit(self) -> str:
        return "TFLOP/s" if self.is_gemm else "GB/s busbw"


def parse_contend(text: str) -> LoadSpec:
    """``--contend`` text -> :class:`LoadSpec`; a UsageError names what is wrong."""
    try:
        return _parse_load([p.strip() for p in text.strip().split(":")])
    except UsageError as exc:
        raise UsageError(f"bad --contend {text!r}: {exc}") from None


def _parse_load(parts: list[str]) -> LoadSpec:
    """:func:`parse_contend`'s work; its errors say what is wrong, the caller with what."""
    if len(parts) not in (2, 3) or not all(parts):
        raise UsageError(_USAGE)
    dtype = "float32"
    if len(parts) == 3:
        found = parse_dtypes(parts[2])
        if len(found) > 1:
            raise UsageError("one dtype, e.g. gemm:1024:bfloat16")
        dtype = found[0].name
    kind = parts[0].lower()
    if kind == GEMM:
        if not parts[1].isdecimal() or not 1 <= int(parts[1]) <= MAX_GEMM_N:
            raise UsageError(
                f"the GEMM's N is a whole number from 1 to {MAX_GEMM_N} (the matrices are "
                f"N x N), got {parts[1]!r}"
            )
        if not DTYPES[dtype].is_float:
            raise UsageError(
                "a GEMM load multiplies floating-point matrices (float32, bfloat16, float16, "
                "float64)"
            )
        return LoadSpec(GEMM, dtype, n=int(parts[1]))
    try:
        coll = ops.get(kind)
    except UsageError:
        raise UsageError(
            f"{parts[0]!r} is neither gemm nor a collective "
            f"({', '.join(op.name for op in ops.REGISTRY if op.sized)}); {_USAGE}"
        ) from None
    if not coll.sized:
        raise UsageError(f"{coll.name} moves no data; pick a sized op")
    size_bytes = parse_size(parts[1])
    if size_bytes < 1:
        raise UsageError("the size must be at least 1 byte")
    return LoadSpec(coll.name, dtype, size_bytes=size_bytes)


def load_collective(spec: LoadSpec, measure: OpSettings) -> Collective:
    """A collective load's op, configured as the sweep's own ops are."""
    return ops.get(spec.kind).configured(measure)


def check_load(spec: LoadSpec, measure: OpSettings, world_size: int, backend: str) -> None:
    """Refuse, before any rank starts, a collective load that cannot run in this world."""
    if spec.is_gemm:
        return
    coll = load_collective(spec, measure)
    why = coll.unsupported(world_size, backend)
    if why:
        raise UsageError(f"--contend {spec.label}: {why}")
    if coll.layout(spec.size_bytes, DTYPES[spec.dtype].elem_bytes, world_size).count == 0:
        raise UsageError(
            f"--contend {spec.label}: at {world_size} ranks the size leaves less than one "
            "16-byte chunk per rank; use a larger size"
        )
