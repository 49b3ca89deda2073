"""Message sizes: parsing user specs and formatting sizes back.

Conventions, stated once (as nccl-tests does): size suffixes are *binary*
(1K = 1024 bytes, 1M = 1024**2, 1G = 1024**3) while bandwidth is reported in
*decimal* GB/s (1 GB/s = 1e9 bytes/s).
"""

from __future__ import annotations

import math
import re

from colbench.errors import UsageError

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
# Accept 1K, 1k, 1KB, 1KiB, 512, 1.5M (must land on a whole byte count).
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)

#: Largest size we accept; beyond this a typo (1T instead of 1G) is more likely than intent.
MAX_SIZE_BYTES = 1024**4


def parse_size(text: str) -> int:
    """Parse one size such as ``"1K"``, ``"64M"`` or ``"4096"`` into bytes (binary units)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise UsageError(
            f"bad size {text!r}: use a byte count with an optional binary suffix "
            "(1K = 1024 bytes), e.g. 512, 1K, 64M, 1G"
        )
    number, unit = match.groups()
    size_bytes = float(number) * _UNITS[unit.upper()]
    if size_bytes != int(size_bytes):
        raise UsageError(f"bad size {text!r}: it is not a whole number of bytes")
    if size_bytes > MAX_SIZE_BYTES:
        raise UsageError(f"bad size {text!r}: larger than 1T")
    return int(size_bytes)


def size_range(
    min_bytes: int, max_bytes: int, factor: float | None = None, step_bytes: int | None = None
) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` inclusive, like nccl-tests' -b/-e/-f/-i: by
    a multiplicative ``factor`` (default 2) or an additive ``step_bytes``; given both, the
    factor, as nccl-tests steps by -f when it is above 1 and by -i only otherwise."""
    if min_bytes < 1:
        raise UsageError(f"minimum size must be at least 1 byte, got {min_bytes}")
    if min_bytes > max_bytes:
        raise UsageError(
            f"minimum size {format_size(min_bytes)} is larger than maximum size "
            f"{format_size(max_bytes)}"
        )
    sizes: list[int] = []
    if step_bytes is not None and factor is None:
        if step_bytes < 1:
            raise UsageError(f"step must be at least 1 byte, got {step_bytes}")
        sizes = list(range(min_bytes, max_bytes + 1, step_bytes))
    else:
        factor = 2.0 if factor is None else factor
        if not math.isfinite(factor) or factor <= 1:
            raise UsageError(f"step factor must be greater than 1, got {factor:g}")
        size = float(min_bytes)
        while int(size) <= max_bytes:
            if not sizes or int(size) != sizes[-1]:
                sizes.append(int(size))
            size *= factor
    if len(sizes) > 10_000:
        raise UsageError(
            f"that range has {len(sizes)} sizes; use a larger step (at most 10000 sizes)"
        )
    return sizes


def parse_sizes(spec: str, factor: float | None = None, step_bytes: int | None = None) -> list[int]:
    """Parse ``"1K-1G"`` (a range) or ``"1K,4K,1M"`` (a list) into sorted unique byte sizes."""
    spec = spec.strip()
    if not spec:
        raise UsageError("empty size specification: use e.g. 1K-1G or 1K,4K,1M")
    if "," in spec:
        if factor is not None or step_bytes is not None:
            raise UsageError("a step factor or step applies to a size range (1K-1G), not a list")
        parts = [part.strip() for part in spec.split(",")]
        if parts[-1] == "" and len(parts) > 1:
            parts.pop()  # "1K," is a list of one
        if "" in parts:
            raise UsageError(
                f"bad size list {spec!r}: item {parts.index('') + 1} is empty; "
                "separate sizes by single commas, e.g. 1K,4K,1M"
            )
        return sorted({parse_size(part) for part in parts})
    if "-" in spec:
        low, _, high = (part.strip() for part in spec.partition("-"))
        if not low or not high or "-" in high:
            raise UsageError(
                f"bad size range {spec!r}: give MIN-MAX such as 1K-1G "
                "(sizes are whole bytes, never negative)"
            )
        return size_range(parse_size(low), parse_size(high), factor, step_bytes)
    return [parse_size(spec)]


def format_size(size_bytes: int) -> str:
    """Shortest exact binary form: 1024 -> '1K', 1536 -> '1536', 0 -> '0'."""
    for suffix, unit in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"{size_bytes // unit}{suffix}"
    return str(size_bytes)
