"""The one reader of NCCL's INFO/WARN logs: one rank's file or many ranks interleaved.

``parse_log(text)`` returns the facts (``NcclLog``), per communicator and overall;
``summary(log)`` the JSON object of ``colbench explain-log --json``. Facts come only from the
log's own lines: where it does not say, the fact is None.

Communicators are told apart by NCCL's ``commId`` (``Init START/COMPLETE`` lines, 2.19+)
and, where a release prints none, by their size (a process showing the same rank of that
size twice starts another). A line belongs to the communicator whose
init its thread (host:pid:tid) is running; a line on another thread (older releases set up
channels on a helper thread) counts for the log as a whole and, when the log holds one
communicator, for that one.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from colbench.nccl import evidence, tuning
from colbench.nccl.lines import Line, read_lines
from colbench.nccl.names import Version, from_code, parse_version, version_text

# RCCL's own version block (NCCL_DEBUG=VERSION) spells it ``RCCL version : 2.27.7-HEAD:96a25b5``.
_VERSION = re.compile(r"^(?P<lib>NCCL|RCCL) version\s*(?::\s*)?(?P<v>\S+)")
_LIBRARY = re.compile(r"nccl-library=(\d{4,})")
_INIT = re.compile(
    r"\bcomm (?P<ptr>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<n>\d+)\b.*?"
    r"(?:commId (?P<id>0x[0-9a-f]+) )?- (?:Init|Abort) (?P<what>START|COMPLETE)"
)
_SHAPE = re.compile(
    r"^comm (?P<ptr>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<n>\d+) nNodes (?P<nodes>\d+)"
    r" localRanks (?P<local>\d+)"
)
_RCCL_COMM = re.compile(r" comm (?P<ptr>0x[0-9a-f]+) nRanks (?P<n>\d+)")
_COLL_CHANNELS = re.compile(r"^(\d+) coll channels,(?:.* (\d+) nvls channels,)?")
_RING = re.compile(r"^Channel \d+/(\d+) :((?:\s+\d+)+)\s*$")
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_ENV = re.compile(r"^(\w+) set by environment to ?(.*?)$")
# A variable NCCL echoes in its own words: ``NCCL_IB_HCA set to mlx5_0`` (net_ib.cc).
# (``NET/Plugin: Plugin name set by env to libnccl-net.so`` is not one: 2.2x prints it
# for the default library too.)
_ENV_SAID = re.compile(r"^(NCCL_\w+) set to (.*?)$")
_MULTICAST = re.compile(r"^NVLS multicast support is (not )?available")
_TEST_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")


@dataclass
class Communicator:
    """One communicator as the log shows it; None where the log does not say."""

    key: str
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    channels: int | None = None
    rank_hosts: dict[int, str] = field(default_factory=dict)


@dataclass
class NcclLog:
    """Everything read from one log."""

    version_text: str | None = None
    rccl: bool = False
    communicators: list[Communicator] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    test_ranks: dict[int, str] = field(default_factory=dict)
    channels: Counter[int] = field(default_factory=Counter)
    nvls_channels: list[int] = field(default_factory=list)
    multicast: list[bool] = field(default_factory=list)
    networks: Counter[str] = field(default_factory=Counter)
    transports: dict[str, None] = field(default_factory=dict)
    net_links: list[evidence.NetLink] = field(default_factory=list)
    calls: list[tuning.TuningCall] = field(default_factory=list)
    tables: list[tuning.TuningTable] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)

    @property
    def version(self) -> Version | None:
        return None if self.version_text is None else parse_version(self.version_text)

    @property
    def main(self) -> Communicator | None:
        """The communicator with the most ranks, the first such."""
        sized = [c for c in self.communicators if c.nranks is not None]
        return max(sized, key=lambda c: c.nranks or 0) if sized else None


class _Reader:
    def __init__(self) -> None:
        self.log = NcclLog()
        self.by_key: dict[str, Communicator] = {}
        self.ptr_key: dict[tuple[str | None, int | None, str], str] = {}
        self.thread_key: dict[tuple[str | None, int | None, int | None], str] = {}
        self.open_tables: dict[
            tuple[str | None, int | None, int | None],
            tuple[tuning.TuningTable, list[tuple[str, str]]],
        ] = {}
        self.members: dict[str, set[tuple[str | None, int | None, int]]] = {}

    def feed(self, line: Line) -> None:
        if not line.level:
            self._plain(line.message)
            return
        if line.host and line.host not in self.log.hosts:
            self.log.hosts.append(line.host)
        if line.level == "WARN":
            self.log.warnings.append(line.message)
        elif line.level == "INFO":
            self._info(line)

    def _plain(self, text: str) -> None:
        self._version(text)
        m = _TEST_RANK.match(text)
        if m:
            self.log.test_ranks[int(m[1])] = m[2]
        m = _LIBRARY.search(text) if text.startswith("#") else None
        if m and self.log.version_text is None:
            self.log.version_text = version_text(from_code(int(m[1])))

    def _version(self, text: str) -> None:
        m = _VERSION.match(text)
        if m:
            self.log.rccl = m["lib"] == "RCCL"
            self.log.version_text = m["v"]

    def _info(self, line: Line) -> None:
        msg = line.message
        for handler in (self._comm, self._channels, self._table, self._misc):
            if handler(line, msg):
                return
        self._version(msg)

    def _comm(self, line: Line, msg: str) -> bool:
        m = _INIT.search(msg)
        if m:
            comm = self._communicator(line, m["ptr"], int(m["n"]), m["id"], int(m["rank"]))
            if m["what"] == "START":
                self.thread_key[line.thread] = comm.key
            return True
        m = _SHAPE.match(msg)
        if m:
            comm = self._communicator(line, m["ptr"], int(m["n"]), None, int(m["rank"]))
            comm.nnodes = int(m["nodes"])
            comm.local_ranks = max(int(m["local"]), comm.local_ranks or 0)
            self.thread_key[line.thread] = comm.key
            return True
        return False

    def _communicator(
        self, line: Line, ptr: str, nranks: int, comm_id: str | None, rank: int
    ) -> Communicator:
        where = (line.host, line.pid, ptr)
        if comm_id and self.ptr_key.get(where, comm_id) != comm_id:
            self._rename(self.ptr_key[where], comm_id)
        key = comm_id or self.ptr_key.get(where) or self._by_size(line, nranks, rank)
        self.ptr_key[where] = key
        if key not in self.by_key:
            self.by_key[key] = Communicator(key, nranks)
            self.log.communicators.append(self.by_key[key])
        comm = self.by_key[key]
        comm.rank_hosts.setdefault(rank, line.host or "")
        self.members.setdefault(key, set()).add((line.host, line.pid, rank))
        return comm

    def _rename(self, old: str, new: str) -> None:
        """A communicator first seen without its commId (found by size) learns it."""
        comm = self.by_key.pop(old)
        if new in self.by_key:  # already known by its commId: fold the placeholder in
            self.log.communicators.remove(comm)
            known = self.by_key[new]
            known.nnodes = known.nnodes or comm.nnodes
            known.local_ranks = max(known.local_ranks or 0, comm.local_ranks or 0) or None
            known.channels = known.channels or comm.channels
            known.rank_hosts = {**comm.rank_hosts, **known.rank_hosts}
        else:
            comm.key = new
            self.by_key[new] = comm
        self.members.setdefault(new, set()).update(self.members.pop(old, set()))
        self.ptr_key = {w: new if k == old else k for w, k in self.ptr_key.items()}
        self.thread_key = {t: new if k == old else k for t, k in self.thread_key.items()}

    def _by_size(self, line: Line, nranks: int, rank: int) -> str:
        """Without a commId, ranks of one size share a communicator, unless a process
        already holds that rank in it."""
        member = (line.host, line.pid, rank)
        index = 0
        while member in self.members.get(f"nranks={nranks}#{index}", set()):
            index += 1
        return f"nranks={nranks}#{index}"

    def _channels(self, line: Line, msg: str) -> bool:
        m = _COLL_CHANNELS.match(msg)
        if m is not None:
            count, nvls = int(m[1]), (int(m[2]) if m[2] else None)
        elif (ring := _RING.match(msg)) is not None:
            count, nvls = int(ring[1]), None
        else:
            return self._transport(line, msg)
        self.log.channels[count] += 1
        if nvls is not None:
            self.log.nvls_channels.append(nvls)
        comm = self._thread_comm(line)
        if comm is not None:
            comm.channels = count
        return True

    def _transport(self, line: Line, msg: str) -> bool:
        found = evidence.transport(msg)
        if found is None:
            return False
        name, link = found
        self.log.transports.setdefault(name)
        if link is not None:
            comm = self._thread_comm(line)
            self.log.net_links.append(link if comm is None else replace(link, comm=comm.key))
        return True

    def _thread_comm(self, line: Line) -> Communicator | None:
        rccl = _RCCL_COMM.search(line.message)
        if rccl:
            return self.by_key.get(self.ptr_key.get((line.host, line.pid, rccl["ptr"]), ""))
        return self.by_key.get(self.thread_key.get(line.thread, ""))

    def _table(self, line: Line, msg: str) -> bool:
        call = tuning.parse_call(msg, self.log.version, self.log.rccl)
        if call is not None:
            self.log.calls.append(call)
            return True
        columns = tuning.table_header(msg)
        if columns is not None:
            # Each block after the first continues the table its thread is printing.
            open_table = self.open_tables.get(line.thread)
            table = open_table[0] if open_table and columns[0][0] != "Tree" else None
            if table is None:
                table = tuning.TuningTable()
                self.log.tables.append(table)
            self.open_tables[line.thread] = (table, columns)
            return True
        row = tuning.table_row(msg)
        if row is None or line.thread not in self.open_tables:
            return False
        table, columns = self.open_tables[line.thread]
        function, cells = row
        for (algo, proto), cell in zip(columns, cells, strict=False):
            table.cells[(function, algo, proto)] = cell
        return True

    def _misc(self, line: Line, msg: str) -> bool:
        m = _NETWORK.match(msg)
        if m:
            self.log.networks[m[1]] += 1
            return True
        m = _ENV.match(msg) or _ENV_SAID.match(msg)
        if m:
            value = m[2][:-1] if re.fullmatch(r"-?\d+\.", m[2]) else m[2]
            self.log.env[m[1]] = value
            return True
        m = _MULTICAST.match(msg)
        if m:
            self.log.multicast.append(m[1] is None)
            return True
        return False


def parse_log(text: str) -> NcclLog:
    """Read an NCCL INFO/WARN log (any launcher's prefixes, ranks interleaved)."""
    reader = _Reader()
    lines = read_lines(text)
    for line in lines:
        reader.feed(line)
    reader.log.lines = lines
    for host in reader.log.test_ranks.values():
        if host not in reader.log.hosts:
            reader.log.hosts.append(host)
    return reader.log


def summary(log: NcclLog, *, emulated_nodes: bool = False) -> dict[str, Any]:
    """The JSON object of ``explain-log --json`` (issue 24 section 5): null where unknown.
    ``emulated_nodes``: the log is of colbench's own --ranks-per-gpu run."""
    main = log.main
    network = log.networks.most_common(1)[0][0] if log.networks else None
    transports = list(log.transports)
    messages = [line.message for line in log.lines if line.level]
    facts = evidence.Facts(
        network,
        evidence.gdr(transports),
        nvls(log),
        evidence.failed_attempts(messages, log.env),
        messages,
        log.env,
        _same_host_links(log),
        transports,
        evidence.plugin_failures(messages),
        emulated_nodes,
        _nodes_split(main),
    )
    return {
        "nccl_version": _version(log),
        "nranks": main.nranks if main else _test_world(log),
        "nnodes": main.nnodes if main and main.nnodes else len(log.hosts) or None,
        "ranks_per_node": main.local_ranks if main else None,
        "channels": channels(log, main),
        "network": network,
        "gdr": facts.gdr,
        "nvls": facts.nvls,
        "transports": transports,
        "algorithms": _algorithms(log),
        "verdicts": evidence.verdicts(facts),
        "fallback": bool(facts.attempts) and network == "Socket",
        "communicators": [
            {"nranks": c.nranks, "nnodes": c.nnodes, "channels": channels(log, c)}
            for c in log.communicators
        ],
    }


def channels(log: NcclLog, comm: Communicator | None) -> int | None:
    """The communicator's channel count; lines no communicator claims count when the log
    holds at most one."""
    if comm is not None and comm.channels is not None:
        return comm.channels
    if len(log.communicators) > 1 or not log.channels:
        return None
    return log.channels.most_common(1)[0][0]


def nvls(log: NcclLog) -> bool | None:
    """True when NVLS channels or multicast support are reported, False for 0 NVLS channels
    (or multicast reported unavailable), None when the log does not say."""
    if log.nvls_channels:
        return max(log.nvls_channels) > 0
    return any(log.multicast) if log.multicast else None


def _version(log: NcclLog) -> str | None:
    version = log.version
    if version is None:
        return log.version_text
    text = ".".join(map(str, version))
    return f"RCCL {text}" if log.rccl else text


def _test_world(log: NcclLog) -> int | None:
    """nccl-tests' device table gives the world only when it lists ranks 0..n-1."""
    ranks = sorted(log.test_ranks)
    return len(ranks) if ranks and ranks == list(range(len(ranks))) else None


def _algorithms(log: NcclLog) -> list[dict[str, Any]]:
    seen = dict.fromkeys((c.op, c.size_bytes, c.algo, c.proto) for c in log.calls)
    return [dict(zip(("op", "size_bytes", "algo", "proto"), key, strict=True)) for key in seen]


def _nodes_split(comm: Communicator | None) -> bool:
    """NCCL counted more nodes than the host names its ranks' lines carry."""
    hosts = set(comm.rank_hosts.values()) if comm else set()
    return bool(comm and comm.nnodes and hosts and comm.nnodes > len(hosts))


def _same_host_links(log: NcclLog) -> list[tuple[evidence.NetLink, str]]:
    by_key = {c.key: c for c in log.communicators}
    only = log.communicators[0] if len(log.communicators) == 1 else None
    out = []
    for link in log.net_links:
        comm = by_key.get(link.comm or "") or only
        hosts = comm.rank_hosts if comm else {}
        if link.a in hosts and hosts.get(link.a) == hosts.get(link.b):
            out.append((link, hosts[link.a]))
    return out
