"""The NCCL-log reader (colbench.nccl.log): every real log (tests/data) against its INDEX.md truth
table, one test per log and fact, and synthetic logs for launcher prefixes, interleaved
ranks, the TUNING forms of each release and each verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from colbench.nccl.lines import read_lines, strip_prefixes
from colbench.nccl.log import parse_log, summary
from colbench.nccl.tuning import parse_call, printed_bytes
from tests.datadir import NCCL_DEBUG_LOGS as LOGS

KEYS = [
    "nccl_version", "nranks", "nnodes", "ranks_per_node", "channels", "network", "gdr",
    "nvls", "transports", "algorithms", "verdicts", "fallback", "communicators",
]  # fmt: skip


def comms(*shapes: tuple[int | None, int | None, int | None]) -> list[dict[str, Any]]:
    return [dict(zip(("nranks", "nnodes", "channels"), s, strict=True)) for s in shapes]


def calls(op: str | None, algo: str, proto: str, *sizes: int) -> list[dict[str, Any]]:
    return [{"op": op, "size_bytes": n, "algo": algo, "proto": proto} for n in sizes]


SOCKET_FALLBACK = "network Socket although NCCL tried InfiniBand or a network plugin ({})"
SHM_INSTEAD = "intra-node traffic through host memory (SHM), not GPU peer-to-peer ({})"

#: INDEX.md's truth, per file. Where INDEX says "unknown", the summary says null; "hosts"
#: stand in for nNodes where NCCL printed none (and where it printed none, a table of
#: nccl-tests' devices counts its hosts too: nccl1453).
TRUTH: dict[str, dict[str, Any]] = {
    "timez-a100pcie-roce-nogdr-2.27.log": {
        "nccl_version": "2.27.7", "nranks": 2, "nnodes": 1, "ranks_per_node": 2,
        "channels": 24, "network": "IB", "gdr": None, "nvls": False,
        "transports": ["P2P/direct pointer/read"],
        "algorithms": calls("all_reduce", "Ring", "Simple", *(8388608 << k for k in range(11))),
        "verdicts": [], "fallback": False, "communicators": comms((2, 1, 24)),
    },
    "awsefaeks-p4d-efa-2.9.log": {
        "nccl_version": "2.9.9", "nranks": 16, "nnodes": 2, "ranks_per_node": None,
        "channels": 8, "network": "AWS Libfabric", "gdr": True, "nvls": None,
        "transports": ["NET/AWS Libfabric/GDRDMA", "P2P/IPC/read"], "algorithms": [],
        "verdicts": [], "fallback": False, "communicators": comms((16, None, 8)),
    },
    "nccl1781-k8s-pods-nohostid-socket.log": {
        "nccl_version": None, "nranks": 2, "nnodes": 2, "ranks_per_node": 1, "channels": 2,
        "network": None, "gdr": False, "nvls": False, "transports": ["NET/Socket"],
        "algorithms": [], "verdicts": [], "fallback": False,
        "communicators": comms((2, 2, 2)),
    },
    "nccl1781-k8s-pods-hostid-cumem.log": {
        "nccl_version": None, "nranks": 2, "nnodes": 1, "ranks_per_node": 2, "channels": 24,
        "network": None, "gdr": None, "nvls": False, "transports": ["P2P/CUMEM"],
        "algorithms": [], "verdicts": [], "fallback": False, "communicators": comms((2, 1, 24)),
    },
    "gnosia-g6e-1pod-shm-2.27.log": {
        "nccl_version": "2.27.3", "nranks": 4, "nnodes": 1, "ranks_per_node": 4, "channels": 2,
        "network": "Libfabric", "gdr": None, "nvls": False, "transports": ["SHM/direct/direct"],
        "algorithms": [], "verdicts": [SHM_INSTEAD.format("NCCL_P2P_LEVEL=NVL")],
        "fallback": False,
        "communicators": comms((4, 1, 2), (4, 1, 2)),
    },
    "gnosia-g6e-4pods-efa-nogdr-2.27.log": {
        "nccl_version": "2.27.3", "nranks": 4, "nnodes": 4, "ranks_per_node": 1, "channels": 2,
        "network": "Libfabric", "gdr": False, "nvls": False, "transports": ["NET/Libfabric"],
        "algorithms": [], "verdicts": [], "fallback": False,
        "communicators": comms((4, 4, 2), (4, 4, 2)),
    },
    "gnosia-p4d-1node-ofi-fail-socket-2.27.log": {
        "nccl_version": "2.27.7", "nranks": 4, "nnodes": 1, "ranks_per_node": 4,
        "channels": 24, "network": "Socket", "gdr": None, "nvls": False,
        "transports": ["P2P/CUMEM/read"], "algorithms": [],
        "verdicts": [SOCKET_FALLBACK.format("network plugin NET/OFI failed to initialize")],
        "fallback": True, "communicators": comms((4, 1, 24), (4, 1, 24)),
    },
    "ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log": {
        "nccl_version": "2.29.7", "nranks": 2, "nnodes": 1, "ranks_per_node": None,
        "channels": None, "network": None, "gdr": None, "nvls": None, "transports": [],
        "algorithms": calls("broadcast", "Ring", "LL", 1024, 2048, 4096, 8192, 16384)
        + calls("broadcast", "Ring", "Simple", *(32768 << k for k in range(13))),
        "verdicts": [], "fallback": False, "communicators": [],
    },
    # INDEX.md: "a silent Socket fallback": sockets over Slingshot's hsn interfaces, with
    # no plugin found to drive them (No device found alone would be an Ethernet host's).
    "rccl1026-mi250x-2node-socket-abort-rccl2.16.log": {
        "nccl_version": "RCCL 2.16.5", "nranks": 8, "nnodes": 2, "ranks_per_node": None,
        "channels": 4, "network": "Socket", "gdr": False, "nvls": None,
        "transports": ["P2P/IPC", "NET/Socket"], "algorithms": [],
        "verdicts": [SOCKET_FALLBACK.format(
            "sockets over hsn0, a fabric interface that a network plugin would drive; "
            "NET/IB: No device found"
        )],
        "fallback": True,
        "communicators": comms((8, None, 4)),
    },
    "nccl1453-h100-excerpts-tuning-oldformat.log": {
        "nccl_version": None, "nranks": None, "nnodes": 2, "ranks_per_node": None,
        "channels": None, "network": None, "gdr": None, "nvls": None, "transports": [],
        "algorithms": calls(None, "Tree", "LL", 8, 256, 512, 65536)
        + calls(None, "Tree", "LL128", 131072),
        "verdicts": [], "fallback": False, "communicators": [],
    },
}  # fmt: skip

_SUMMARIES: dict[str, dict[str, Any]] = {}


def summary_of(name: str) -> dict[str, Any]:
    if name not in _SUMMARIES:
        _SUMMARIES[name] = summary(parse_log((LOGS / name).read_text()))
    return _SUMMARIES[name]


def test_every_real_log_has_a_truth_table() -> None:
    index = (LOGS / "INDEX.md").read_text()
    documented = re.findall(r"^## \d+\. (\S+\.log)", index, flags=re.M)
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(documented) == sorted(TRUTH)


@pytest.mark.parametrize(
    ("name", "key"), [(name, key) for name in TRUTH for key in KEYS], ids=lambda v: str(v)
)
def test_a_real_log_reads_as_its_truth_table_says(name: str, key: str) -> None:
    value = summary_of(name)[key]
    if key == "transports":
        assert sorted(value) == sorted(TRUTH[name][key])
    else:
        assert value == TRUTH[name][key]


def test_the_summary_has_exactly_explain_logs_keys_and_is_json() -> None:
    for name in TRUTH:
        data = summary_of(name)
        assert list(data) == KEYS
        assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize(
    ("name", "warnings", "env"),
    [
        ("rccl1026-mi250x-2node-socket-abort-rccl2.16.log", 27, {"NCCL_P2P_LEVEL": "XGMI"}),
        ("gnosia-p4d-1node-ofi-fail-socket-2.27.log", 12, {"NCCL_IB_DISABLE": "1"}),
        ("nccl1781-k8s-pods-hostid-cumem.log", 0, {"NCCL_HOSTID": "10.10.10.10"}),
        ("ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log", 0, {"NCCL_P2P_DISABLE": "1"}),
        ("gnosia-g6e-4pods-efa-nogdr-2.27.log", 0, {"NCCL_P2P_LEVEL": "NVL"}),
    ],
)
def test_warnings_and_the_environment_nccl_echoed(
    name: str, warnings: int, env: dict[str, str]
) -> None:
    log = parse_log((LOGS / name).read_text())
    assert len(log.warnings) == warnings
    assert env.items() <= log.env.items()


def test_the_rccl_abort_is_among_its_warnings() -> None:
    log = parse_log((LOGS / "rccl1026-mi250x-2node-socket-abort-rccl2.16.log").read_text())
    assert any("Proxy Call to rank 3 failed (Connect)" in w for w in log.warnings)
    assert log.rccl and log.version == (2, 16, 5)


def test_tuning_tables_of_the_real_logs() -> None:
    log = parse_log((LOGS / "timez-a100pcie-roce-nogdr-2.27.log").read_text())
    (table,) = log.tables
    assert table.cells[("AllReduce", "Tree", "LL128")] == (16.5, 112.0)
    assert table.cells[("AllGather", "CollNetDirect", "Simple")] == (39.2, 0.0)
    assert table.cells[("Broadcast", "Ring", "Simple")] == (11.8, 240.0)
    assert len(table.cells) == 5 * 7 * 3
    assert table.available() == {
        "Broadcast": ("Ring",), "Reduce": ("Ring",), "AllGather": ("Ring",),
        "ReduceScatter": ("Ring",), "AllReduce": ("Tree", "Ring"),
    }  # fmt: skip
    log = parse_log((LOGS / "ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log").read_text())
    assert log.tables[0].available()["AllGather"] == ("Ring", "PAT")


def test_nccl_tests_rows_map_to_the_bytes_tuning_lines_print() -> None:
    """Every size row nccl-tests printed in the 2.29 broadcast log finds its TUNING line."""
    text = (LOGS / "ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log").read_text()
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+float\s+none\s", text, flags=re.M)
    printed = {c.size_bytes for c in parse_log(text).calls if c.per_rank}
    assert rows
    for size, count in rows:
        assert printed_bytes("broadcast", int(count), 4, 2, per_rank=True) == int(size)
        assert int(size) in printed


@pytest.mark.parametrize(
    ("op", "count", "elem", "nranks", "per_rank", "printed"),
    [
        ("all_reduce", 1024, 4, 8, True, 4096),
        ("all_reduce", 1024, 4, 8, False, 4096),
        # colbench's all_gather/reduce_scatter count is one rank's share (nccl-tests').
        ("all_gather", 256, 2, 8, True, 512),
        ("all_gather", 256, 2, 8, False, 4096),
        ("reduce_scatter", 256, 4, 4, True, 1024),
        ("reduce_scatter", 256, 4, 4, False, 4096),
        ("broadcast", 100, 8, 4, True, 800),
        ("reduce", 100, 1, 4, False, 100),
        ("barrier", 1, 4, 4, True, 4),
    ],
)
def test_printed_bytes(
    op: str, count: int, elem: int, nranks: int, per_rank: bool, printed: int
) -> None:
    assert printed_bytes(op, count, elem, nranks, per_rank) == printed


def test_printed_bytes_refuses_an_op_without_tuning_lines() -> None:
    with pytest.raises(ValueError, match="sendrecv"):
        printed_bytes("sendrecv", 1, 4, 2, True)


@pytest.mark.parametrize(
    ("message", "version", "rccl", "expected"),
    [
        ("AllGather: 4096 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..1}", None, False,
         ("AllGather", 4096, "PAT", "Simple", True, (0, 1))),
        ("AllReduce: 64 Bytes -> Algo NVLS_TREE proto SIMPLE channel{Lo..Hi}={0..0}", None, False,
         ("AllReduce", 64, "NVLSTree", "Simple", True, (0, 0))),
        # 2.23: function, numbers; its enum has PAT at 6.
        ("ReduceScatter: 8192 Bytes -> Algo 6 proto 2 time 30.1", None, False,
         ("ReduceScatter", 8192, "PAT", "Simple", False, None)),
        # 2.20-2.22: numbers only; 4 is NVLS there.
        ("1048576 Bytes -> Algo 4 proto 2 time 12.5", None, False,
         (None, 1048576, "NVLS", "Simple", False, None)),
        # 2.12 numbered CollNet 2 (a TRACE line of that release).
        ("8 Bytes -> Algo 2 proto 2 time 1.0", (2, 12, 12), False,
         (None, 8, "CollNet", "Simple", False, None)),
        ("8 Bytes -> Algo 9 proto 7 time 1.0", None, False, (None, 8, "9", "7", False, None)),
        # RCCL numbers its algorithms its own way: kept raw.
        ("8 Bytes -> Algo 1 proto 0 time 1.0", (2, 16, 5), True, (None, 8, "1", "0", False, None)),
    ],
)  # fmt: skip
def test_tuning_line_forms(
    message: str, version: Any, rccl: bool, expected: tuple[Any, ...]
) -> None:
    call = parse_call(message, version, rccl)
    assert call is not None
    got = (call.function, call.size_bytes, call.algo, call.proto, call.per_rank, call.channels)
    assert got == expected


# A two-node, four-rank 2.28 job, as NCCL writes it (hosts n1 and n2).
SYNTHETIC = [
    "n1:100:100 [0] NCCL INFO NCCL version 2.28.9+cuda12.9",
    "n1:100:110 [0] NCCL INFO Using network IB",
    "n1:101:111 [1] NCCL INFO Using network IB",
    "n2:200:210 [0] NCCL INFO Using network IB",
    "n2:201:211 [1] NCCL INFO Using network IB",
    "n1:100:110 [0] NCCL INFO ncclCommInitRankConfig comm 0xa0 rank 0 nranks 4 cudaDev 0 "
    "nvmlDev 0 busId 1000 commId 0xc0ffee - Init START",
    "n1:101:111 [1] NCCL INFO ncclCommInitRankConfig comm 0xa1 rank 1 nranks 4 cudaDev 1 "
    "nvmlDev 1 busId 2000 commId 0xc0ffee - Init START",
    "n2:200:210 [0] NCCL INFO ncclCommInitRankConfig comm 0xb0 rank 2 nranks 4 cudaDev 0 "
    "nvmlDev 0 busId 1000 commId 0xc0ffee - Init START",
    "n2:201:211 [1] NCCL INFO ncclCommInitRankConfig comm 0xb1 rank 3 nranks 4 cudaDev 1 "
    "nvmlDev 1 busId 2000 commId 0xc0ffee - Init START",
    "n1:100:110 [0] NCCL INFO comm 0xa0 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
    "n1:101:111 [1] NCCL INFO comm 0xa1 rank 1 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0",
    "n2:200:210 [0] NCCL INFO comm 0xb0 rank 2 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
    "n2:201:211 [1] NCCL INFO comm 0xb1 rank 3 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0",
    "n1:100:110 [0] NCCL INFO Channel 00/02 : 0 1 2 3",
    "n1:100:110 [0] NCCL INFO Channel 01/02 : 0 1 2 3",
    "n1:100:110 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "n1:101:111 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0(2)/GDRDMA",
    "n2:200:210 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/1/GDRDMA/Shared",
    "n1:100:110 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p "
    "channels, 2 p2p channels per peer",
    "n2:201:211 [1] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p "
    "channels, 2 p2p channels per peer",
    "n1:100:110 [0] NCCL INFO ncclCommInitRankConfig comm 0xa0 rank 0 nranks 4 cudaDev 0 "
    "nvmlDev 0 busId 1000 commId 0xc0ffee - Init COMPLETE",
    "n1:100:100 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}",
]
EXPECTED = {
    "nccl_version": "2.28.9", "nranks": 4, "nnodes": 2, "ranks_per_node": 2, "channels": 2,
    "network": "IB", "gdr": True, "nvls": False,
    "transports": ["P2P/CUMEM/read", "NET/IB/GDRDMA", "NET/IB/GDRDMA/Shared"],
    "algorithms": calls("all_reduce", "Ring", "LL", 4096), "verdicts": [], "fallback": False,
    "communicators": comms((4, 2, 2)),
}  # fmt: skip


def _rank_of(line: str) -> int:
    host, pid = line.split(":")[:2]
    return {"n1": 0, "n2": 2}[host] + int(pid) % 100


@pytest.mark.parametrize(
    "prefix",
    [
        lambda r: "",
        lambda r: f"{r}: ",  # srun --label
        lambda r: f"[1,{r}]<stdout>:",  # mpirun --tag-output
        lambda r: f"[{r}] ",
        lambda r: f"[2026-01-02 10:24:{r:02d}] ",
        lambda r: f"{r}: [2026-01-02T10:24:27.5] ",
    ],
    ids=["bare", "srun", "mpirun", "rank-tag", "timestamp", "srun+timestamp"],
)
def test_launcher_prefixes_read_the_same(prefix: Any) -> None:
    text = "\n".join(prefix(_rank_of(line)) + line for line in SYNTHETIC)
    assert summary(parse_log(text)) == EXPECTED


def test_ranks_interleaved_in_any_order_read_the_same() -> None:
    by_rank: dict[int, list[str]] = {}
    for line in SYNTHETIC:
        by_rank.setdefault(_rank_of(line), []).append(line)
    # Round robin over the ranks, last rank first: each rank's own order kept.
    woven = []
    while any(by_rank.values()):
        for rank in sorted(by_rank, reverse=True):
            if by_rank[rank]:
                woven.append(by_rank[rank].pop(0))
    data = summary(parse_log("\n".join(woven)))
    assert {k: v for k, v in data.items() if k != "transports"} == {
        k: v for k, v in EXPECTED.items() if k != "transports"
    }
    assert sorted(data["transports"]) == sorted(EXPECTED["transports"])


def test_a_header_fused_onto_another_line_keeps_its_host() -> None:
    lines = read_lines(
        "mew0:1:1 [0] NCCL INFO Using network IB\n"
        "   83.33  100.66      0mew0:1:1 [1] NCCL INFO AllReduce: opCount 0\n"
        "[0]     64.18    0.00      0[0] h1:7:7 [0] NCCL INFO 8 Bytes -> Algo 0 proto 0 time 2.0\n"
    )
    assert [(line.host, line.device) for line in lines] == [("mew0", 0), ("mew0", 1), ("h1", 0)]
    assert lines[2].message == "8 Bytes -> Algo 0 proto 0 time 2.0"
    assert strip_prefixes("[1,3]<stderr>:0: [2026-01-02 10:00:00] x") == "x"


def test_a_warn_line_keeps_its_message() -> None:
    (line,) = read_lines("h:1:2 [3] transport/net.cc:101 NCCL WARN NET/IB : bad thing")
    assert (line.level, line.message, line.device) == ("WARN", "NET/IB : bad thing", 3)


def _log(*lines: str) -> dict[str, Any]:
    """A log of ``lines``, each an INFO message of its own process."""
    text = "\n".join(f"h{i % 2}:{i}:{i} [0] NCCL INFO {m}" for i, m in enumerate(lines))
    return summary(parse_log(text))


def shape(ptr: str, nranks: int, nodes: int, local: int) -> str:
    return (
        f"comm {ptr} rank 0 nRanks {nranks} nNodes {nodes} localRanks {local} localRank 0 MNNVL 0"
    )


@pytest.mark.parametrize(
    ("lines", "verdict"),
    [
        (["NCCL_IB_HCA set to mlx5_0", "NET/IB : No device found.", "Using network Socket"],
         SOCKET_FALLBACK.format("NCCL_IB_HCA=mlx5_0; NET/IB: No device found")),
        (["NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>",
          "Using network Socket"],
         SOCKET_FALLBACK.format("InfiniBand devices found ([0]mlx5_0:1/IB)")),
        (["NCCL_NET_PLUGIN set by environment to ofi", "Failed to open libibverbs.so[.1]",
          "Using network Socket"],
         SOCKET_FALLBACK.format("NCCL_NET_PLUGIN=ofi; libibverbs failed to load")),
        (["Failed to initialize NET plugin Libfabric", "Using network Socket"],
         SOCKET_FALLBACK.format("NET plugin Libfabric failed")),
        (["NET/Plugin : Plugin load returned 2 : libnccl-net.so: undefined symbol",
          "Using network IB"],
         "the network plugin failed; NCCL used its built-in IB"),
        (["NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
          "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"],
         "GDR off although the NIC supports it (NET/IB : GPU Direct RDMA Enabled for HCA 0 "
         "'mlx5_0')"),
        (["GPU Direct RDMA Disabled for GPU 1 / HCA 0 (distance 5 > 3)",
          "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"],
         "GDR off: the GPU is farther from the NIC than NCCL_NET_GDR_LEVEL (GPU Direct RDMA "
         "Disabled for GPU 1 / HCA 0 (distance 5 > 3))"),
        (["+ NVL[480.0] - NVS/0", "NVLS multicast support is not available on dev 0"],
         "NVLS unavailable although the topology shows an NVSwitch"),
        (["NCCL_NVLS_ENABLE set by environment to 0."], "NVLS disabled by NCCL_NVLS_ENABLE=0"),
        (["Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"],
         SHM_INSTEAD.format("NCCL found no peer-to-peer path between the GPUs")),
        (["NCCL_P2P_DISABLE set by environment to 1",
          "Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"],
         SHM_INSTEAD.format("NCCL_P2P_DISABLE=1")),
    ],
)  # fmt: skip
def test_each_verdict_from_its_evidence(lines: list[str], verdict: str) -> None:
    assert _log(*lines)["verdicts"] == [verdict]


def test_intra_node_traffic_over_the_network_names_ranks_and_host() -> None:
    text = "\n".join(
        [
            "lab:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1",
            "lab:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 "
            "MNNVL 0",
            "lab:2:2 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 "
            "MNNVL 0",
            "lab:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
        ]
    )
    data = summary(parse_log(text))
    assert data["verdicts"] == [
        "intra-node traffic over the network: ranks 0 and 1 on lab use NET/Socket "
        "(NCCL_P2P_DISABLE=1)"
    ]
    assert data["nnodes"] == 2 and data["fallback"] is False
    # Ranks on two hosts talking over the network are as expected: silence.
    other = text.replace("lab:2:2", "lab2:2:2")
    assert summary(parse_log(other))["verdicts"] == []


def test_nccl_hostid_is_named_as_the_cause_and_an_emulated_run_is_silent() -> None:
    """Ranks of one host with NCCL_HOSTID each (as --ranks-per-gpu sets it): explain-log
    names the cause; colbench's own emulated run asked for exactly this, so says nothing
    (on an H200 every --ranks-per-gpu run printed this verdict, once per variant)."""
    text = "\n".join(
        [
            "vm:1:1 [0] NCCL INFO NCCL_HOSTID set by environment to vm-colbench-rank0",
            "vm:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 "
            "MNNVL 0",
            "vm:2:2 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0 "
            "MNNVL 0",
            "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
        ]
    )
    assert summary(parse_log(text))["verdicts"] == [
        "intra-node traffic over the network: ranks 0 and 1 on vm use NET/Socket "
        "(NCCL_HOSTID makes each rank a node of its own)"
    ]
    assert summary(parse_log(text), emulated_nodes=True)["verdicts"] == []
    # A site's one NCCL_HOSTID for the whole host splits nothing (NCCL counts 1 node):
    # P2P and SHM off are then the cause, and NCCL_HOSTID is not named.
    one_node = text.replace("nNodes 2 localRanks 1", "nNodes 1 localRanks 2").replace(
        "NCCL_HOSTID set by environment to vm-colbench-rank0",
        "NCCL_HOSTID set by environment to vm\nvm:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by "
        "environment to 1",
    )
    assert summary(parse_log(one_node))["verdicts"] == [
        "intra-node traffic over the network: ranks 0 and 1 on vm use NET/Socket "
        "(NCCL_P2P_DISABLE=1)"
    ]


@pytest.mark.parametrize(
    ("meta", "emulated"),
    [
        ({"fabric": {"kind": "emulated"}}, True),  # a sweep's
        ({"config": {"ranks_per_gpu": 4}}, True),  # p2p's and health's
        ({"fabric": {"kind": "real"}, "config": {"ranks_per_gpu": 1}}, False),
    ],
    ids=["sweep", "p2p-health", "real"],
)
def test_a_runs_verdicts_follow_its_fabric(
    tmp_path: Path, meta: dict[str, Any], emulated: bool
) -> None:
    from colbench.host.supervise import record_nccl_log

    (tmp_path / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "nccl-rank0.log").write_text(
        "vm:1:1 [0] NCCL INFO NCCL_HOSTID set by environment to vm-colbench-rank0\n"
        "vm:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0\n"
        "vm:2:2 [0] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 2 localRanks 1 localRank 0\n"
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
    )
    record_nccl_log(tmp_path)
    verdicts = json.loads((tmp_path / "meta.json").read_text())["verdicts"]
    assert len(verdicts) == (0 if emulated else 1), verdicts


@pytest.mark.parametrize(
    "lines",
    [
        # What NCCL prints on any host without InfiniBand (2.18 and 2.19+ forms).
        ["NET/Plugin: Could not find: libnccl-net.so.", "Failed to open libibverbs.so[.1]",
         "NET/IB : No device found.", "Using network Socket"],
        ["NET/Plugin : No plugin found (librccl-net.so), using internal implementation",
         "NET/IB : No device found.", "Using network Socket"],
        ["Failed to open libibverbs.so[.1]", "Failed to initialize NET plugin IB",
         "Initialized NET plugin Socket", "Using network Socket"],
        # IB devices there, but Socket asked for; IB turned off beside its HCA list.
        ["NET/IB : Using [0]mlx5_0:1/IB", "NCCL_NET set by environment to Socket",
         "Using network Socket"],
        ["NCCL_IB_DISABLE set by environment to 1.", "NCCL_IB_HCA set to mlx5_0",
         "Using network Socket"],
    ],
    ids=["no-ibverbs", "rccl-no-device", "2.19-no-ib", "socket-asked", "ib-disabled"],
)  # fmt: skip
def test_an_ethernet_host_is_no_fallback(lines: list[str]) -> None:
    """Absent InfiniBand is not a fallback: on Ethernet, Socket is what there is."""
    data = _log(*lines)
    assert (data["network"], data["verdicts"], data["fallback"]) == ("Socket", [], False)


def test_sockets_run_without_gdr() -> None:
    """Sockets never use GPUDirect RDMA (false, as INDEX.md's "no GDRDMA" says); one IB
    transport with GDRDMA beside them makes it true."""
    assert _log("Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0")["gdr"] is False
    both = _log(
        "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
        "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    )
    assert both["gdr"] is True


def test_rccls_version_block_gives_its_version() -> None:
    """rccl-tests with NCCL_DEBUG=VERSION print ``RCCL version : 2.27.7-HEAD:...``."""
    from tests.datadir import NCCL_TESTS_LOGS

    log = parse_log((NCCL_TESTS_LOGS / "alltoall__rccl-mi355x-2node-alibaba.log").read_text())
    assert (log.rccl, log.version, summary(log)["nccl_version"]) == (
        True, (2, 27, 7), "RCCL 2.27.7",
    )  # fmt: skip


def test_silence_where_all_is_as_expected() -> None:
    assert summary(parse_log("\n".join(SYNTHETIC)))["verdicts"] == []
    data = _log("NET/Plugin: Could not find: libnccl-net.so.", "Using network IB")
    assert data["verdicts"] == [] and data["fallback"] is False


def test_the_main_communicator_is_the_largest_first() -> None:
    text = "\n".join(
        [
            "h:1:5 [0] NCCL INFO " + shape("0x1", 2, 1, 2),
            "h:1:5 [0] NCCL INFO 4 coll channels, 0 collnet channels, 0 nvls channels, 4 p2p "
            "channels, 4 p2p channels per peer",
            "h:1:6 [0] NCCL INFO " + shape("0x2", 8, 2, 4),
            "h:1:6 [0] NCCL INFO Channel 00/16 : 0 1 2 3 4 5 6 7",
            "h:1:7 [0] NCCL INFO " + shape("0x3", 8, 4, 2),
        ]
    )
    data = summary(parse_log(text))
    assert (data["nranks"], data["nnodes"], data["ranks_per_node"], data["channels"]) == (
        8, 2, 4, 16,
    )  # fmt: skip
    assert data["communicators"] == comms((2, 1, 4), (8, 2, 16), (8, 4, None))
    assert data["nvls"] is False


def test_a_communicator_seen_before_its_comm_id_is_one_communicator() -> None:
    shapes = [line for line in SYNTHETIC if "nNodes" in line]
    rest = [line for line in SYNTHETIC if "nNodes" not in line]
    assert summary(parse_log("\n".join(shapes + rest))) == EXPECTED
    # Two shape lines of one process holding rank 0 twice are two communicators.
    twice = [shapes[0], shapes[0].replace("0xa0", "0xa9")]
    assert len(parse_log("\n".join(twice)).communicators) == 2
