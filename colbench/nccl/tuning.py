"""NCCL's tuning output (NCCL_DEBUG_SUBSYS=TUNING): what it read.

Two things, from src/graph/tuning.cc and src/enqueue.cc:

- the latency/bandwidth table rank 0 prints at init (``Algorithm |`` blocks of three
  algorithms from 2.18, one ``Latency/AlgBw |`` line before): bandwidth 0 is disabled;
- one line per call on rank 0. Its form and its byte count changed (see printed_bytes):

  ===========  =======================================================  =================
  NCCL         line (INFO, TUNING)                                      bytes printed
  ===========  =======================================================  =================
  up to 2.19   none (commented out; TRACE builds print the 2.20 form)   total
  2.20-2.22    ``N Bytes -> Algo a proto p time t`` (numbers)           total
  2.23         ``Func: N Bytes -> Algo a proto p time t`` (numbers)     total
  2.24+        ``Func: N Bytes -> Algo RING proto SIMPLE channel{..}``  per rank
  ===========  =======================================================  =================

  "total" is ncclTypeSize * ncclFuncMaxSendRecvCount(func, nRanks, count): count * nRanks
  for AllGather and ReduceScatter (whose count is per rank), count for the others (2.20-2.21:
  ncclInfoSetDerived's nBytes, include/info.h; 2.22-2.23: getAlgoInfo's nBytes, enqueue.cc).
  "per rank" is task->count * ncclTypeSize(task->datatype) as scheduleCollTasksToPlan prints
  it (enqueue.cc, 2.24+): the caller's count, sendcount for AllGather, recvcount for
  ReduceScatter (AllGather/Broadcast counts are turned into int8 bytes by taskAppend; the
  product does not change). Up to 2.23 the line is printed per algorithm choice, which NCCL
  makes once for the calls of one (function, op, type) aggregated in a group (2.22+: those
  within 4x of each other's size): grouped calls print their sum. colbench issues one call
  at a time.

From 2.27 a call on symmetric windows (colbench.direct.knobs) that NCCL runs on a symmetric
kernel prints ``AllReduce [Symmetric]: 1024 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2
nthreads 512 nWorks 1`` instead (src/scheduler/symmetric_sched.cc; bytes per rank, as the
2.24+ form): no algorithm or protocol, a kernel. It reads as algorithm ``Symmetric`` and
the kernel's name in place of the protocol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from colbench.nccl.names import FUNCTION_OP, FUNCTIONS, PROTOCOLS, Version, algo_name, proto_name

_CALL = re.compile(
    r"^(?:(?P<func>[A-Za-z]+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
    r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?"
)
_SYMMETRIC = re.compile(
    r"^(?P<func>[A-Za-z]+) \[Symmetric\]: (?P<bytes>\d+) Bytes -> Kernel (?P<kernel>\S+)"
)
#: What a symmetric kernel's call reads as, in place of an algorithm.
SYMMETRIC = "Symmetric"
_ALGO_HEADER = re.compile(r"^\s*Algorithm\s*\|(?P<cells>.*)$")
_OLD_HEADER = re.compile(r"^\s*Latency/AlgBw\s*\|(?P<cells>.*)$")
_ROW = re.compile(r"^\s*(?P<func>[A-Za-z]+)\s*\|(?P<cells>(?:\s*[\d.]+/\s*[\d.]+\s*\|?)+)\s*$")
_CELL = re.compile(r"([\d.]+)/\s*([\d.]+)")
# The releases that print each numeric form: their enum names the numbers of a log
# whose version is unknown (the enum is the same throughout each range).
_NUMERIC_WITH_FUNCTION: Version = (2, 23, 4)
_NUMERIC_BARE: Version = (2, 22, 3)


@dataclass(frozen=True)
class TuningCall:
    """One per-call TUNING line of rank 0."""

    function: str | None
    """NCCL function; None in the 2.20-2.22 form, which does not name it."""
    size_bytes: int
    """The bytes NCCL printed (see printed_bytes)."""
    algo: str
    proto: str
    per_rank: bool
    """True when the bytes are per rank (2.24+ form), False when the total."""
    channels: tuple[int, int] | None = None

    @property
    def op(self) -> str | None:
        return FUNCTION_OP.get(self.function or "")


@dataclass
class TuningTable:
    """rank 0's latency (us) / bandwidth (GB/s) per (function, algorithm, protocol)."""

    cells: dict[tuple[str, str, str], tuple[float, float]] = field(default_factory=dict)

    def available(self) -> dict[str, tuple[str, ...]]:
        """Per function, the algorithms with bandwidth above 0 for some protocol."""
        out: dict[str, dict[str, None]] = {}
        for (function, algo, _), (_, bw) in self.cells.items():
            algos = out.setdefault(function, {})
            if bw > 0:
                algos[algo] = None
        return {f: tuple(a) for f, a in out.items()}


def parse_call(message: str, version: Version | None, rccl: bool) -> TuningCall | None:
    """A per-call TUNING line, its numbers named by ``version``'s enums (or, unknown, by
    the enum of the releases printing that form; kept raw for RCCL, whose enums differ)."""
    sym = _SYMMETRIC.match(message)
    if sym is not None and sym["func"] in FUNCTIONS:
        return TuningCall(sym["func"], int(sym["bytes"]), SYMMETRIC, sym["kernel"], True)
    m = _CALL.match(message)
    if m is None or (m["func"] and m["func"] not in FUNCTIONS):
        return None
    numeric = m["algo"].isdigit()
    fallback = _NUMERIC_WITH_FUNCTION if m["func"] else _NUMERIC_BARE
    algo, proto = m["algo"], m["proto"]
    if not (rccl and numeric):
        algo, proto = algo_name(algo, version, fallback), proto_name(proto)
    channels = (int(m["lo"]), int(m["hi"])) if m["lo"] else None
    return TuningCall(m["func"], int(m["bytes"]), algo, proto, not numeric, channels)


def table_header(message: str) -> list[tuple[str, str]] | None:
    """The (algorithm, protocol) columns a table header announces, or None."""
    m = _ALGO_HEADER.match(message)
    if m:
        names = [c.strip() for c in m["cells"].split("|") if c.strip()]
        return [(a, p) for a in names for p in PROTOCOLS]
    m = _OLD_HEADER.match(message)
    if m:
        pairs = [c.split("/") for c in m["cells"].split("|") if "/" in c]
        return [(a.strip(), proto_name(p.strip())) for a, p in pairs]
    return None


def table_row(message: str) -> tuple[str, list[tuple[float, float]]] | None:
    """A ``Function | lat/bw | ...`` row of the table."""
    m = _ROW.match(message)
    if m is None or m["func"] not in FUNCTIONS:
        return None
    return m["func"], [(float(a), float(b)) for a, b in _CELL.findall(m["cells"])]


#: colbench ops whose ``count`` is one rank's share (their size_bytes is count * nranks).
_PER_RANK_COUNT = ("all_gather", "reduce_scatter")


def printed_bytes(op: str, count: int, elem_bytes: int, nranks: int, per_rank: bool) -> int:
    """The bytes an NCCL TUNING line prints for a colbench row (op, count) at ``nranks``:
    ``per_rank`` for the 2.24+ form (TuningCall.per_rank), else the total of the older
    forms. colbench's count is nccl-tests': a rank's share for all_gather and
    reduce_scatter, the whole buffer for the others."""
    if op not in FUNCTION_OP.values() and op != "barrier":
        raise ValueError(f"{op!r} is not an NCCL collective with TUNING lines")
    scale = nranks if op in _PER_RANK_COUNT and not per_rank else 1
    return count * elem_bytes * scale


def per_rank_bytes(call: TuningCall, nranks: int) -> int:
    """A TUNING line's bytes in the 2.24+ form (one rank's share for AllGather and
    ReduceScatter), whichever form printed them: what :func:`printed_bytes` gives a row
    with ``per_rank`` true."""
    if call.per_rank or call.op not in _PER_RANK_COUNT:
        return call.size_bytes
    return call.size_bytes // max(1, nranks)
