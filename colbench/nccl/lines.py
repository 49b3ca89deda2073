"""NCCL log lines, whoever printed them: launcher prefixes off, the NCCL header split.

NCCL (src/debug.cc) starts every INFO/WARN/TRACE line with ``host:pid:tid [cudaDev]``; WARN
adds ``file:line`` (or the function) before ``NCCL WARN``. Launchers prepend their own
tags (srun ``--label``: ``0: ``; Open MPI ``--tag-output``: ``[1,0]<stdout>:``; ``[0] ``;
timestamps ``[2026-01-02 10:24:27] ``), and ranks writing to one stream can fuse a partial
line of one with a whole NCCL line of another: the header is searched for, not anchored.
Lines without the header (``NCCL version`` in old releases, ``RCCL version``, the rows of the
Func/Proto/Algo matrix, nccl-tests' own output) come back with ``level`` empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]"
    r" (?:.*? )?NCCL (?P<level>INFO|WARN|TRACE)(?: (?P<msg>.*))?$"
)
_BARE = re.compile(r"NCCL (?P<level>INFO|WARN|TRACE)(?: (?P<msg>.*))?$")
#: Launcher tags, any number in any order: mpirun --tag-output, srun --label, an
#: mpirun/pdsh-style rank tag, a timestamp.
_PREFIXES = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: |\[\d+\] ?|\[\d{4}-\d\d-\d\d[ T][^\]]*\] ?)+"
)


@dataclass(frozen=True)
class Line:
    """One line: ``level`` INFO/WARN/TRACE with ``message`` after it, or "" for other text."""

    number: int
    level: str
    message: str
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    device: int | None = None

    @property
    def thread(self) -> tuple[str | None, int | None, int | None]:
        return (self.host, self.pid, self.tid)


def strip_prefixes(text: str) -> str:
    """``text`` without the launcher tags in front of it."""
    return _PREFIXES.sub("", text, count=1)


def read_lines(text: str) -> list[Line]:
    """Every line of ``text``; a header fused onto the tail of another line ("...0mew0:1:2
    [0] NCCL INFO") gets the host that whole lines use ("mew0")."""
    found = [(number, _split(raw)) for number, raw in enumerate(text.splitlines(), start=1)]
    whole_hosts = {m["host"] for _, (_, m, at_start) in found if m and at_start}
    out = []
    for number, (line, match, at_start) in found:
        if match is None:
            bare = _BARE.search(line)
            level, message = (bare["level"], bare["msg"] or "") if bare else ("", line)
            out.append(Line(number, level, message.rstrip()))
            continue
        host = match["host"]
        if not at_start and host not in whole_hosts:
            host = next((host[i:] for i in range(len(host)) if host[i:] in whole_hosts), host)
        ids = (int(match["pid"]), int(match["tid"]), int(match["dev"]))
        out.append(Line(number, match["level"], (match["msg"] or "").rstrip(), host, *ids))
    return out


def _split(raw: str) -> tuple[str, re.Match[str] | None, bool]:
    line = strip_prefixes(raw)
    match = _HEADER.search(line)
    return line, match, match is not None and match.start() == 0
