"""Slurm's compact host and task lists (``node[01-02,07]``, ``2(x3),1``)."""

from __future__ import annotations

import re

from colbench.errors import UsageError


def _split_top(text: str, what: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"{what}={text!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"{what}={text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"{what}={text!r}: '[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_range(body: str, text: str, what: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise UsageError(f"{what}={text!r}: bad range {item!r} in brackets")
        if not sep:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise UsageError(f"{what}={text!r}: range {item!r} runs backwards")
        # Slurm keeps the zero padding of the lower bound: node[08-10] -> node08..node10.
        width = len(lo) if lo.startswith("0") else 0
        out.extend(f"{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return out


def _expand_one(item: str, text: str, what: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest, text, what)
    return [prefix + num + tail for num in _expand_range(body, text, what) for tail in tails]


def expand_hostlist(text: str, what: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm hostlist syntax -> host names: ``node[01-02,07],gpu-a[1-2]`` ->
    node01 node02 node07 gpu-a1 gpu-a2. Several bracket groups in one name expand as a
    product (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2)."""
    hosts: list[str] = []
    for item in _split_top(text.strip(), what):
        item = item.strip()
        if not item:
            raise UsageError(f"{what}={text!r}: empty host name")
        hosts.extend(_expand_one(item, text, what))
    return hosts


_TASKS_ITEM = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_tasks_per_node(text: str, what: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's ``2(x3),1`` -> [2, 2, 2, 1]: tasks on each node of the step, in node order."""
    out: list[int] = []
    for item in text.split(","):
        match = _TASKS_ITEM.match(item.strip())
        if match is None:
            raise UsageError(f"{what}={text!r}: expected counts like 8(x2),4")
        out.extend([int(match.group(1))] * int(match.group(2) or 1))
    return out
