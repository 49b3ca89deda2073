"""NCCL's names and numbers, per version: functions, algorithms, protocols, versions.

Read from NCCL's sources (github.com/NVIDIA/nccl, tags v2.9.9-1 .. v2.30.7-1):
``ncclFuncStr``/``ncclAlgoStr``/``ncclProtoStr`` (src/graph/tuning.cc, or src/init.cc in
older tags) are the spellings ``NCCL_ALGO``/``NCCL_PROTO`` accept and the tuning table
prints; the ``NCCL_ALGO_*``/``NCCL_PROTO_*`` defines (src/include/devcomm.h, later
device.h) are the numbers older TUNING lines print; ``ncclAlgoToString`` (src/collectives.cc,
2.24+) the upper-case names newer TUNING lines print.
"""

from __future__ import annotations

import re

from colbench.bench.ops import REGISTRY

Version = tuple[int, int, int]

#: The newest NCCL whose rules these modules were read from; a version of None means it.
NEWEST_KNOWN: Version = (2, 30, 7)

#: ncclFuncStr, in NCCL's order (the rows of its tuning table).
FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
#: ncclProtoStr, in enum order (NCCL_PROTO_LL=0, LL128=1, SIMPLE=2 since 2.5).
PROTOCOLS = ("LL", "LL128", "Simple")

#: colbench op -> the NCCL function torch's NCCL backend calls, as each op's contract
#: says (``Collective.nccl_function``). barrier is an all_reduce of one element;
#: all_to_all, gather, scatter and sendrecv are sends and receives, which NCCL_ALGO does
#: not govern.
OP_FUNCTION = {op.name: op.nccl_function for op in REGISTRY if op.nccl_function}
#: NCCL function -> the colbench op whose rows its TUNING lines describe (a barrier's own
#: all_reduce of one float is not a row's call of AllReduce).
FUNCTION_OP = {
    op.nccl_function: op.name for op in REGISTRY if op.nccl_function and not op.nccl_call_type
}

# First tag whose ncclAlgoStr holds the name (v2.14.3-1 split CollNet in two, v2.17.1-1
# added NVLS, v2.18.1-1 NVLSTree, v2.23.4-1 PAT).
_COLLNET_SPLIT: Version = (2, 14, 0)
_ADDED = (("NVLS", (2, 17, 0)), ("NVLSTree", (2, 18, 0)), ("PAT", (2, 23, 0)))

#: ncclAlgoToString's upper-case spellings (TUNING lines of 2.24+) -> ncclAlgoStr's.
_UPPER_ALGO = {
    "TREE": "Tree",
    "RING": "Ring",
    "COLLNET": "CollNet",
    "COLLNET_DIRECT": "CollNetDirect",
    "COLLNET_CHAIN": "CollNetChain",
    "NVLS": "NVLS",
    "NVLS_TREE": "NVLSTree",
    "PAT": "PAT",
}
_UPPER_PROTO = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def effective(version: Version | None) -> Version:
    """The version whose rules apply: None means the newest known."""
    return NEWEST_KNOWN if version is None else version


def algorithms(version: Version | None) -> tuple[str, ...]:
    """ncclAlgoStr of ``version``, in enum order (the index is the number NCCL prints)."""
    v = effective(version)
    names = ["Tree", "Ring"]
    names += ["CollNetDirect", "CollNetChain"] if v >= _COLLNET_SPLIT else ["CollNet"]
    return tuple(names + [name for name, since in _ADDED if v >= since])


def parse_version(text: str) -> Version | None:
    """``"2.27.7+cuda13.0"`` -> (2, 27, 7); None when the text holds no a.b.c."""
    match = _VERSION.search(text)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def version_text(version: Version | None) -> str:
    return ".".join(map(str, effective(version)))


def from_code(code: int) -> Version:
    """NCCL's version code as a version: 22903 -> (2, 29, 3) (before 2.9: 2803 -> (2, 8, 3))."""
    if code >= 10000:
        return (code // 10000, code % 10000 // 100, code % 100)
    return (code // 1000, code % 1000 // 100, code % 100)


def to_code(version: Version) -> int:
    """NCCL's version code, as nccl-tests records it: (2, 29, 3) -> 22903 (before 2.9:
    (2, 8, 3) -> 2803); :func:`from_code` reads it back."""
    major, minor, patch = version
    return major * (10000 if version >= (2, 9, 0) else 1000) + minor * 100 + patch


def torch_version() -> Version | None:
    """The NCCL torch loaded (None where it has none: a CPU build). Older torch gives the
    version code, newer a tuple."""
    import torch

    try:
        raw = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return None
    if isinstance(raw, tuple):
        return (int(raw[0]), int(raw[1]), int(raw[2]))
    return from_code(int(raw))


def function_of(op: str) -> str | None:
    """NCCL function for a colbench op name (or an NCCL function name in any case)."""
    if op in OP_FUNCTION:
        return OP_FUNCTION[op]
    folded = op.replace("_", "").lower()
    return next((f for f in FUNCTIONS if f.lower() == folded), None)


def algo_name(printed: str, version: Version | None, numeric_versions: Version) -> str:
    """A TUNING line's algorithm as ncclAlgoStr spells it; a number is named by the enum of
    ``version`` (or, unknown, of ``numeric_versions``, the release that prints that form),
    and kept raw when out of range."""
    if printed.upper() in _UPPER_ALGO:
        return _UPPER_ALGO[printed.upper()]
    names = algorithms(version if version is not None else numeric_versions)
    return names[int(printed)] if printed.isdigit() and int(printed) < len(names) else printed


def proto_name(printed: str) -> str:
    """A TUNING line's protocol as ncclProtoStr spells it (the enum never changed)."""
    if printed.upper() in _UPPER_PROTO:
        return _UPPER_PROTO[printed.upper()]
    index = int(printed) if printed.isdigit() else len(PROTOCOLS)
    return PROTOCOLS[index] if index < len(PROTOCOLS) else printed
