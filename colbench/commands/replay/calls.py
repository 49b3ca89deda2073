"""One collective call as a trace records it, and how trace names map onto colbench's.

Every reader (formats.py) ends in :class:`TracedCall`. Names differ by source
(``c10d::_allgather_base_``, record_param_comms' ``_allgather_base``, the flight recorder's
``nccl:all_gather``, PARAM's ``all_gather_base``), so they are compared in one folded form:
lower case, the backend prefix and every underscore dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from colbench.bench import ops

#: Folded trace name -> colbench op: each op's own name and its ``traced_names``.
#: all_to_all with uneven splits becomes all_to_allv in plan.py, whatever the name.
OPS: dict[str, str] = {
    folded: op.name
    for op in ops.REGISTRY
    for folded in (op.name.replace("_", ""), *op.traced_names)
}
#: Folded names that are bookkeeping, not traffic: left out of the plan.
IGNORED = frozenset(("init", "wait", "abort", "shutdown", "processgroupinit"))
_P2P = frozenset(("send", "recv", "isend", "irecv", "recvanysource", "batchisendirecv"))

#: How one rank's traced elements give colbench's size (docs/semantics.md): whole-buffer
#: ops report the buffer, all_gather its output (n chunks), reduce_scatter its input,
#: gather and scatter the root's n chunks. (in, out, n) -> elements.
_SIZE_RULES = {
    "all_gather": lambda i, o, n: o or n * i,
    "reduce_scatter": lambda i, o, n: i or n * o,
    "gather": lambda i, o, n: n * i,
    "scatter": lambda i, o, n: n * o,
    "barrier": lambda i, o, n: 0,
}

#: dtype spellings of the sources -> torch's names: record_param_comms' ScalarType names
#: (Float, BFloat16), the profiler's C++ type names (float, c10::Half, long int), the
#: flight recorder's (Float) and PARAM's (float, half, bfloat16).
DTYPES: dict[str, str] = {
    **dict.fromkeys(("float", "float32", "torch.float32", "fp32"), "float32"),
    **dict.fromkeys(("double", "float64", "torch.float64"), "float64"),
    **dict.fromkeys(("half", "float16", "c10::half", "torch.float16", "fp16"), "float16"),
    **dict.fromkeys(("bfloat16", "c10::bfloat16", "torch.bfloat16", "bf16"), "bfloat16"),
    **dict.fromkeys(("long", "long int", "int64", "torch.int64", "int64_t"), "int64"),
    **dict.fromkeys(("int", "int32", "torch.int32", "int32_t"), "int32"),
    **dict.fromkeys(("signed char", "char", "int8", "torch.int8"), "int8"),
    **dict.fromkeys(("unsigned char", "byte", "uint8", "torch.uint8"), "uint8"),
    **dict.fromkeys(("short", "short int", "int16", "torch.int16"), "int16"),
    **dict.fromkeys(("bool", "torch.bool"), "bool"),
    **dict.fromkeys(("complex64", "complexfloat", "cfloat", "c10::complex<float>"), "complex64"),
    **dict.fromkeys(
        ("complex128", "complexdouble", "cdouble", "c10::complex<double>"), "complex128"
    ),
    **dict.fromkeys(("complex32", "complexhalf", "chalf", "c10::complex<c10::half>"), "complex32"),
    **dict.fromkeys(("uint16", "unsigned short", "uint16_t", "torch.uint16"), "uint16"),
    **dict.fromkeys(("uint32", "unsigned int", "uint32_t", "torch.uint32"), "uint32"),
    **dict.fromkeys(("uint64", "unsigned long", "uint64_t", "torch.uint64"), "uint64"),
    **{f: f for f in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")},
}
#: Bytes per element of the dtypes above that colbench does not measure: a call of one is
#: listed with its size, as one colbench measures is.
OTHER_ELEM_BYTES = {
    "int16": 2, "bool": 1, "complex64": 8, "complex128": 16, "complex32": 4, "uint16": 2,
    "uint32": 4, "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
}  # fmt: skip
_PREFIX = re.compile(r"^(c10d::|gloo:|nccl:|ucc:|mpi:|xccl:)")


def fold(name: str) -> str:
    """``c10d::_allgather_base_`` -> ``allgatherbase``: one key for every source's name."""
    return _PREFIX.sub("", name.strip().lower()).replace("_", "").replace(" ", "")


def torch_dtype(name: str | None) -> str | None:
    """A source's dtype name -> torch's (``float32``), None when unknown."""
    return DTYPES.get(name.strip().lower().removeprefix("torch.")) if name else None


def recorded_dtype(name: str | None) -> str | None:
    """A field that holds only a dtype: torch's name, or the trace's own spelling where it
    is none replay knows (the dtype is recorded, colbench just does not measure it)."""
    return (torch_dtype(name) or name.strip()) if name and name.strip() else None


@dataclass(frozen=True)
class TracedCall:
    """One collective one rank made, as its trace records it."""

    name: str
    """The call as the trace names it (``c10d::allreduce_``, ``allreduce``...)."""
    in_numel: int
    out_numel: int
    dtype: str | None
    """torch's name, None when the trace does not say."""
    group_size: int | None
    """Ranks of the process group the call ran on, None when the trace does not say."""
    in_splits: tuple[int, ...] | None = None
    """all_to_all: elements this rank sends each peer (None or empty: equal shares)."""
    out_splits: tuple[int, ...] | None = None
    duration_us: float | None = None
    """How long the job's call took where the trace times it (the backend's own event)."""
    splits_cut: bool = False
    """The profiler kept only the first 30 split sizes (``[...,  ...]``, groups over 30)."""
    index: int | None = None
    """Its position in the file's list (traceEvents, entries, PARAM's list), from 1: what
    a message names it by."""

    def op(self) -> tuple[str | None, str]:
        """(colbench op, '') or (None, why colbench cannot measure this call)."""
        key = fold(self.name)
        if key in _P2P:
            return None, "point-to-point, not a collective (colbench p2p measures links)"
        if "coalesced" in key:
            return None, "coalesced: several tensors in one call, colbench measures one"
        op = OPS.get(key)
        if op is None:
            return None, "colbench has no such collective"
        if not ops.BY_NAME[op].exchange:
            return op, ""
        if self.splits_cut:
            return None, "the profiler cut its split sizes to the first 30 peers"
        # The splits, not the name, say which form ran: torch names both all_to_all.
        uneven = self.uneven()
        return next(o.name for o in ops.REGISTRY if o.exchange and o.uneven_splits == uneven), ""

    def uneven(self) -> bool:
        """Whether this all_to_all's splits differ between peers."""
        return any(len(set(s)) > 1 for s in (self.in_splits, self.out_splits) if s)

    def size_numel(self, op: str, group_size: int) -> int:
        """Elements of colbench's size for ``op`` (see _SIZE_RULES)."""
        rule = _SIZE_RULES.get(op)
        if rule is None:
            return max(self.in_numel, self.out_numel)
        return int(rule(self.in_numel, self.out_numel, group_size))


class BadTrace(Exception):
    """A file that cannot be replayed: the message says what was found and what is missing,
    ``at`` which call or event of the file (the caller prefixes the file's name)."""

    def __init__(self, message: str, at: str = "") -> None:
        super().__init__(message)
        self.at = at


@dataclass
class Trace:
    """What one file holds: one rank's calls, and what the file says about the job."""

    path: str
    format: str
    """``torch profiler``, ``flight recorder`` or ``PARAM basic trace``."""
    calls: list[TracedCall]
    rank: int | None = None
    world_size: int | None = None
    steps: int = 1
    """Training steps the trace covers (the profiler's ProfilerStep#N marks), else 1."""
    named_rank: bool = False
    """``rank`` was read from the file's name (the trace does not say it)."""
    backend: str | None = None
    """``nccl`` where the trace says the job ran NCCL, else None (not said, or another)."""
