"""Element types and reduction operators, by the names users type.

Torch objects are resolved lazily so that parsing and validation stay import-light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
        if key not in DTYPES:
            raise UsageError(f"unknown dtype {name!r}: choose from {', '.join(DTYPES)} or all")
        if DTYPES[key] not in out:
            out.append(DTYPES[key])
    return tuple(out)


def parse_redops(spec: str) -> tuple[str, ...]:
    """``"sum,max"`` or ``"all"`` -> tuple of reduction names."""
    names = [name.lower() for name in names_of(spec, list(REDOPS), "redop", "sum or sum,max")]
    for name in names:
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
