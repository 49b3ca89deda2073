"""How NCCL reads ``NCCL_ALGO``, ``NCCL_PROTO`` and its integer switches, per version.

Two grammars, both ``parseList`` in src/graph/tuning.cc:

- up to 2.23: one comma list for every function; a leading ``^`` inverts it; names are
  matched without case and unknown tokens are silently ignored, so ``allreduce:tree``
  enables nothing at all there. The string is not split on ``;`` or ``:``.
- 2.24 and later (v2.24.3-1): ``;``-separated lists, each ``function:list`` except the
  first, which may omit the prefix and then applies to every function (``tree;allreduce:ring``
  leaves AllGather Tree only); each list may start with ``^``. An unknown name or prefix, or
  an unprefixed list after the first, is an error that fails communicator creation.

Neither grammar trims spaces: ``"Ring, Tree"`` names ``" Tree"``, which no algorithm is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from colbench.nccl.names import FUNCTIONS, Version, effective

_PER_FUNCTION: Version = (2, 24, 0)
#: What strtoll reads in base 0: hex after 0x (a bare "0x" is the 0), octal after 0.
_STRTOLL = re.compile(r"\s*(?P<sign>[+-]?)(?P<digits>0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)", re.I)


@dataclass(frozen=True)
class Parsed:
    """What one variable enables, per NCCL function; ``error``: why NCCL refuses it."""

    enabled: Mapping[str, frozenset[str]]
    error: str | None = None


def parse(
    variable: str, value: str | None, elements: Sequence[str], version: Version | None
) -> Parsed:
    """``NCCL_ALGO``/``NCCL_PROTO`` = ``value`` -> the elements it leaves each function."""
    every = frozenset(elements)
    if value is None:
        return Parsed(dict.fromkeys(FUNCTIONS, every))
    if effective(version) < _PER_FUNCTION:
        return Parsed(dict.fromkeys(FUNCTIONS, _one_list(value, elements)))
    return _per_function(variable, value, elements)


def _one_list(value: str, elements: Sequence[str]) -> frozenset[str]:
    invert = value.startswith("^")
    tokens = {t.lower() for t in (value[1:] if invert else value).split(",") if t}
    named = {e for e in elements if e.lower() in tokens}
    return frozenset(elements) - named if invert else frozenset(named)


def _per_function(variable: str, value: str, elements: Sequence[str]) -> Parsed:
    enabled = dict.fromkeys(FUNCTIONS, frozenset(elements))
    for start, entry in _tokens(value, ";"):
        parts = [p for _, p in _tokens(entry, ":")]
        if not parts:
            continue
        prefix, listed = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        if prefix is None and start != 0:
            return Parsed(enabled, "every list after the first needs a prefix")
        functions = [f for f in FUNCTIONS if prefix is None or f.lower() == prefix.lower()]
        if not functions:
            return Parsed(enabled, f"unknown function {prefix!r}")
        invert = listed.startswith("^")
        names = [n for _, n in _tokens(listed[1:] if invert else listed, ",")]
        unknown = [n for n in names if n.lower() not in {e.lower() for e in elements}]
        if unknown:
            return Parsed(enabled, f"unknown name {unknown[0]!r}")
        chosen = frozenset(e for e in elements if e.lower() in {n.lower() for n in names})
        for f in functions:
            enabled[f] = frozenset(elements) - chosen if invert else chosen
    return Parsed(enabled)


def _tokens(text: str, sep: str) -> list[tuple[int, str]]:
    """strtok: the non-empty pieces between separators, with where each starts."""
    out, start = [], 0
    for piece in text.split(sep):
        if piece:
            out.append((start, piece))
        start += len(piece) + 1
    return out


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """An NCCL integer parameter as ncclLoadParam reads it (strtoll, base 0): unset or empty
    is the default, text that starts with no number is 0."""
    text = env.get(name)
    if text is None or text == "":
        return default
    return strtoll(text)


def strtoll(text: str) -> int:
    """C's strtoll(text, NULL, 0): leading spaces, a sign, then 0x/0 prefixes; 0 if none."""
    m = _STRTOLL.match(text)
    if m is None:
        return 0
    digits = m["digits"]
    base = 16 if digits[:2].lower() == "0x" else 8 if digits[0] == "0" else 10
    value = int(digits[2:] if base == 16 else digits, base)
    return -value if m["sign"] == "-" else value
