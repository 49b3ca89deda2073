"""``colbench explain-log``: any job's NCCL INFO logs, read and explained.

The JSON form is ``log.summary`` after the log's ``path``; the text is the same facts, one
per line, with what the log does not say written as such rather than left blank.
"""

from __future__ import annotations

import os
from typing import Any

from colbench import reading, text
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.nccl.log import parse_log, summary
from colbench.output import plural
from colbench.text import Column

_UNSAID = "-"


def explain_logs(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(path, summary) of each log, in the order given. A file without a single NCCL
    line is refused: it was not written with ``NCCL_DEBUG=INFO`` (or is another file)."""
    out = []
    for path in paths:
        log = parse_log(reading.read_text(path, reading.NCCL_LOG, strict=False))
        if not any(line.level for line in log.lines) and log.version_text is None:
            raise UsageError(
                f"{path} holds no NCCL INFO or WARN line: not a log of a job run with "
                "NCCL_DEBUG=INFO"
            )
        out.append((os.fspath(path), summary(log)))
    return out


def explain_json(found: list[tuple[str, dict[str, Any]]]) -> Any:
    """``--json``'s value: each summary after its log's ``path`` (several logs are matched
    to their files by it, not by their order); one log's object, or a list."""
    data = [{"path": path, **facts} for path, facts in found]
    return data[0] if len(data) == 1 else data


def explain_text(name: str, facts: dict[str, Any]) -> str:
    """``facts`` (a ``summary``) of the log ``name``, as the lines the command prints."""
    rows = [
        ("NCCL", facts["nccl_version"] or "(version not in the log)"),
        ("ranks", _world(facts)),
        ("network", _network(facts)),
        ("transports", ", ".join(facts["transports"]) or _UNSAID),
    ]
    if not _sockets_only(facts):
        rows.append(("GDR", _flag(facts["gdr"])))
    rows.append(("NVLS", _flag(facts["nvls"])))
    rows += [("algorithms", line) for line in algorithm_lines(facts["algorithms"])]
    verdicts = facts["verdicts"] or ["none: all the log shows is as expected"]
    rows += [("verdict", line) for line in verdicts]
    columns = (*text.fit([Column("", align="<")], rows), Column("", gap="  "))
    return "\n".join([name] + [text.line(row, columns) for row in rows])


def _world(facts: dict[str, Any]) -> str:
    parts = [_count(facts["nranks"], "rank"), _count(facts["nnodes"], "node")]
    if facts["ranks_per_node"] is not None:
        parts.append(f"{facts['ranks_per_node']} per node")
    parts.append(_count(facts["channels"], "channel"))
    text = ", ".join(parts)
    if len(facts["communicators"]) > 1:
        text += f" (the largest of {len(facts['communicators'])} communicators)"
    return text


def _network(facts: dict[str, Any]) -> str:
    if facts["network"] is not None:
        return facts["network"] + (" (a fallback)" if facts["fallback"] else "")
    nets = list(dict.fromkeys(t.split("/")[1] for t in _net_transports(facts)))
    if nets:
        return f"{', '.join(nets)} (from the transport lines; no 'Using network' line)"
    return "(no 'Using network' line)"


def _net_transports(facts: dict[str, Any]) -> list[str]:
    return [t for t in facts["transports"] if t.startswith("NET/")]


def _sockets_only(facts: dict[str, Any]) -> bool:
    """The network is TCP sockets, where GPUDirect RDMA has no meaning (it is IB's and
    network plugins'): the GDR line would only say "off"."""
    if facts["gdr"]:
        return False
    nets = _net_transports(facts)
    if nets:
        return all(t.startswith("NET/Socket") for t in nets)
    return facts["network"] == "Socket"


def _flag(value: bool | None) -> str:
    return _UNSAID if value is None else ("on" if value else "off")


def _count(value: int | None, noun: str) -> str:
    return f"? {noun}s" if value is None else plural(value, noun)


def algorithm_lines(algorithms: list[dict[str, Any]]) -> list[str]:
    """One line per op and run of sizes (in the log's order) that NCCL gave one choice:
    ``all_reduce 8M..8G: Ring Simple``."""
    runs: list[tuple[tuple[Any, ...], list[int]]] = []
    for item in algorithms:
        key = (item["op"], item["algo"], item["proto"])
        if runs and runs[-1][0] == key:
            runs[-1][1].append(item["size_bytes"])
        else:
            runs.append((key, [item["size_bytes"]]))
    out = []
    for (op, algo, proto), sizes in runs:
        span = format_size(sizes[0])
        if len(sizes) > 1:
            span += f"..{format_size(sizes[-1])}"
        out.append(f"{op or '(op not printed)'} {span} bytes: {algo} {proto}")
    return out
