"""Which algorithms NCCL may run (colbench.nccl.algo), table-tested against the rules read
from NCCL's sources, and checked against NCCL's own tuning tables and matrices in real logs
(tests/data/nccl-debug-logs)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from colbench.nccl.algo import CommFacts, check_table, predict, table_algorithms
from colbench.nccl.lines import read_lines
from colbench.nccl.log import parse_log
from colbench.nccl.names import FUNCTIONS, PROTOCOLS, Version, algorithms, function_of
from colbench.nccl.spec import parse, strtoll
from tests.datadir import NCCL_DEBUG_LOGS as LOGS

V28 = (2, 28, 9)
#: One node of 8 GPUs on PCIe: no NVSwitch, so no NVLS and no CollNetDirect.
PCIE8 = CommFacts(8, 1, 8, nvswitch=False, nvls=False, collnet=False, version=V28)
#: One node of 8 Hopper GPUs on an NVSwitch with NVLS multicast.
HGX = CommFacts(8, 1, 8, nvswitch=True, nvls=True, collnet=False, version=V28)
#: Two such nodes with a CollNet (SHARP) plugin.
HGX2 = replace(HGX, ranks=16, nodes=2, collnet=True)
#: Four nodes with one GPU each: PAT's home.
ONE_PER_NODE = CommFacts(4, 4, 1, nvswitch=False, nvls=False, collnet=False, version=V28)
COLLNET_ON = {"NCCL_COLLNET_ENABLE": "1"}


def algo(value: str, **extra: str) -> dict[str, str]:
    return {"NCCL_ALGO": value, **extra}


def case(
    name: str,
    facts: CommFacts,
    op: str,
    env: dict[str, str],
    expected: tuple[str, ...],
    words: str = "",
    dtype: str = "float32",
    redop: str = "sum",
) -> Any:
    """A call of ``op`` on ``facts`` under ``env``: the algorithms NCCL may run, and when
    none, words its reason must hold."""
    return pytest.param(facts, op, dtype, redop, env, expected, words, id=name)


AG, AR, RS = "all_gather", "all_reduce", "reduce_scatter"
EVERY_AG = "excludes every algorithm it has (Ring, CollNetDirect, NVLS, PAT)"

CASES = [
    # The name-only rules of colbench.nccl.algo's tests, where NCCL 2.28 agrees.
    case("tree-allreduce", PCIE8, AR, algo("Tree"), ("Tree",)),
    case("tree-allgather", PCIE8, AG, algo("Tree"), (),
         f"NCCL 2.28.9 has no algorithm for AllGather float32: NCCL_ALGO=Tree {EVERY_AG}"),
    case("tree-lower", PCIE8, AG, algo("tree"), (), EVERY_AG),
    case("tree-reducescatter", PCIE8, RS, algo("Tree"), (), EVERY_AG),
    case("tree-broadcast", PCIE8, "broadcast", algo("Tree"), (), "it has (Ring)"),
    case("tree-reduce", PCIE8, "reduce", algo("Tree"), (), "it has (Ring)"),
    case("ring-allgather", PCIE8, AG, algo("Ring"), ("Ring",)),
    case("ring,tree-broadcast", PCIE8, "broadcast", algo("Ring,Tree"), ("Ring",)),
    case("^ring-broadcast", PCIE8, "broadcast", algo("^Ring"), (), "it has (Ring)"),
    case("^tree-allreduce", PCIE8, AR, algo("^Tree"), ("Ring",)),
    # ^Ring leaves AllGather what the hardware can do: nothing on one PCIe node, PAT where
    # each node has one GPU, NVLS on an NVSwitch.
    case("^ring-allgather-pcie", PCIE8, AG, algo("^Ring"), (), "PAT needs one GPU per node"),
    case("^ring-allgather-pat", ONE_PER_NODE, AG, algo("^Ring"), ("PAT",)),
    case("^ring-allgather-nvls", HGX, AG, algo("^Ring"), ("NVLS",)),
    case("prefixed-allreduce", PCIE8, AR, algo("allreduce:tree;allgather:ring"), ("Tree",)),
    case("prefixed-allgather", PCIE8, AG, algo("allreduce:tree;allgather:ring"), ("Ring",)),
    case("prefixed-unnamed", PCIE8, "broadcast", algo("allreduce:tree;allgather:ring"), ("Ring",)),
    case("prefixed-tree", PCIE8, AG, algo("allgather:tree"), (), EVERY_AG),
    case("other-prefix", PCIE8, AG, algo("allreduce:tree"), ("Ring",)),
    # An unprefixed first list applies to every function.
    case("first-list-all", PCIE8, AG, algo("tree;allreduce:ring"), (), EVERY_AG),
    case("first-list-ar", PCIE8, AR, algo("tree;allreduce:ring"), ("Ring",)),
    case("barrier", PCIE8, "barrier", algo("Tree"), ("Tree",)),
    # Defaults, no NCCL_ALGO.
    case("default-pcie", PCIE8, AR, {}, ("Tree", "Ring")),
    case("default-hgx", HGX, AR, {}, ("Tree", "Ring", "NVLS")),
    case("default-hgx-int8", HGX, AR, {}, ("Tree", "Ring"), dtype="int8"),
    case("default-hgx-ag", HGX, AG, {}, ("Ring", "NVLS")),
    case("default-2nodes", HGX2, AR, {}, ("Tree", "Ring", "NVLSTree")),
    case("default-2nodes-collnet", HGX2, AR, COLLNET_ON,
         ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree")),
    case("default-pat", ONE_PER_NODE, RS, {}, ("Ring", "PAT")),
    # PAT: one GPU per node, AllGather/ReduceScatter, no avg scaling (tuning, enqueue).
    case("pat-8gpu", PCIE8, AG, algo("PAT"), (), "PAT needs one GPU per node (8 ranks on 1 node"),
    case("pat-allreduce", ONE_PER_NODE, AR, algo("PAT"), (),
         "excludes every algorithm it has (Tree, Ring, CollNetDirect"),
    case("pat-rs-avg", ONE_PER_NODE, RS, algo("PAT"), (), "PAT ReduceScatter cannot apply avg",
         redop="avg"),
    case("pat-rs-sum", ONE_PER_NODE, RS, algo("PAT"), ("PAT",), dtype="bfloat16"),
    case("pat-forced", PCIE8, AG, algo("PAT", NCCL_PAT_ENABLE="1"), ("PAT",)),
    case("pat-off", ONE_PER_NODE, AG, algo("PAT", NCCL_PAT_ENABLE="0"), (), "NCCL_PAT_ENABLE=0"),
    case("pat-sm50", replace(ONE_PER_NODE, compute_capability=50), AG, algo("PAT"), (),
         "compute capability 6.0"),
    case("pat-simple-only", ONE_PER_NODE, AG, algo("PAT", NCCL_PROTO="LL"), (),
         "NCCL_PROTO=LL leaves PAT none of its protocols (Simple)"),
    # NVLS: NVSwitch multicast, >= 2 GPUs (2.28.7+), reducible types, across nodes CollNet.
    case("nvls-pcie", PCIE8, AR, algo("NVLS"), (), "NVLS needs NVLink SHARP multicast"),
    case("nvls-sum-f32", HGX, AR, algo("NVLS"), ("NVLS",)),
    case("nvls-max-f32", HGX, AR, algo("NVLS"), (), "NVLS cannot max float32", redop="max"),
    case("nvls-max-bf16", HGX, AR, algo("NVLS"), ("NVLS",), dtype="bfloat16", redop="max"),
    case("nvls-min-i32", HGX, AR, algo("NVLS"), ("NVLS",), dtype="int32", redop="min"),
    case("nvls-sum-i8", HGX, AR, algo("NVLS"), (), "NVLS cannot sum int8", dtype="int8"),
    case("nvls-prod-f16", HGX, AR, algo("NVLS"), (), "cannot prod", dtype="float16",
         redop="prod"),
    case("nvls-avg-f32", HGX, AR, algo("NVLS"), (), "cannot avg", redop="avg"),
    case("nvls-rs-bf16", HGX, RS, algo("NVLS"), ("NVLS",), dtype="bfloat16"),
    case("nvls-ag-int8", HGX, AG, algo("NVLS"), ("NVLS",), dtype="int8"),
    case("nvls-off", HGX, AR, algo("NVLS", NCCL_NVLS_ENABLE="0"), (), "NCCL_NVLS_ENABLE=0"),
    case("nvls-forced", replace(HGX, nvls=False), AR, algo("NVLS", NCCL_NVLS_ENABLE="1"),
         ("NVLS",)),
    case("nvls-forced-no-nvswitch", PCIE8, AR, algo("NVLS", NCCL_NVLS_ENABLE="1"), (),
         "NVLS needs an NVSwitch"),
    case("nvls-2gpus", replace(HGX, ranks=2, ranks_per_node=2), AR, algo("NVLS"), ("NVLS",)),
    case("nvls-2gpus-2.28.3", replace(HGX, ranks=2, ranks_per_node=2, version=(2, 28, 3)), AR,
         algo("NVLS"), (), "at least 3 GPUs"),
    case("nvls-2nodes-no-collnet", replace(HGX2, collnet=False), AR, algo("NVLS"), (),
         "NVLS across nodes needs CollNet"),
    case("nvls-2nodes-collnet", HGX2, AR, algo("NVLS", **COLLNET_ON), ("NVLS",)),
    case("nvls-proto-ll", HGX, AR, algo("NVLS", NCCL_PROTO="LL"), (),
         "leaves NVLS none of its protocols (Simple)"),
    case("nvlstree-1node", HGX, AR, algo("NVLSTree"), (), "NVLSTree needs more than one node"),
    case("nvlstree-2nodes", HGX2, AR, algo("NVLSTree"), ("NVLSTree",)),
    # CollNet: a plugin, NCCL_COLLNET_ENABLE=1, two nodes; Direct also an NVSwitch.
    case("collnet-no-plugin", replace(HGX2, collnet=False), AR,
         algo("CollNetDirect", **COLLNET_ON), (), "CollNet needs a CollNet network plugin"),
    case("collnet-not-enabled", HGX2, AR, algo("CollNetChain"), (), "NCCL_COLLNET_ENABLE=1"),
    case("collnet-direct", HGX2, AR, algo("CollNetDirect", **COLLNET_ON), ("CollNetDirect",)),
    case("collnet-direct-no-nvswitch", replace(HGX2, nvswitch=False, nvls=False), AR,
         algo("CollNetDirect", **COLLNET_ON), (), "CollNetDirect needs an NVSwitch"),
    case("collnet-chain-no-nvswitch", replace(HGX2, nvswitch=False, nvls=False), AR,
         algo("CollNetChain", **COLLNET_ON), ("CollNetChain",)),
    case("collnet-1node", replace(HGX, collnet=True), AR, algo("CollNetChain", **COLLNET_ON), (),
         "CollNet needs at least 2 nodes"),
    case("collnet-direct-16-local", replace(HGX2, ranks=32, ranks_per_node=16), AR,
         algo("CollNetDirect", **COLLNET_ON), (), "at most 8 GPUs per node"),
    case("collnet-ag", HGX2, AG, algo("CollNetDirect", **COLLNET_ON), ("CollNetDirect",)),
    # A world of one never communicates, and NCCL reads no NCCL_ALGO for it.
    case("world-of-one", CommFacts(1, 1), AG, algo("Tree"), ("Ring",)),
    # 2.24+ refuses a value it cannot parse: the communicator fails to start.
    case("spaces", PCIE8, AR, algo("Ring, Tree"), (),
         "NCCL 2.28.9 refuses NCCL_ALGO=Ring, Tree (unknown name ' Tree'): no communicator"),
    case("unprefixed-second", PCIE8, AR, algo("ring;tree"), (),
         "every list after the first needs a prefix"),
    case("bad-prefix", PCIE8, AR, algo("allreduc:ring"), (), "unknown function 'allreduc'"),
    case("old-name", PCIE8, AR, algo("CollNet"), (), "unknown name 'CollNet'"),
    case("bad-proto", PCIE8, AR, {"NCCL_PROTO": "simpel"}, (), "NCCL_PROTO=simpel"),
]  # fmt: skip

V = {"v2.9.9": (2, 9, 9), "v2.13.4": (2, 13, 4), "v2.16.5": (2, 16, 5), "v2.17.1": (2, 17, 1),
     "v2.18.6": (2, 18, 6), "v2.19.4": (2, 19, 4), "v2.20.5": (2, 20, 5), "v2.21.5": (2, 21, 5),
     "v2.22.3": (2, 22, 3), "v2.23.4": (2, 23, 4), "v2.24.3": (2, 24, 3)}  # fmt: skip


def at(facts: CommFacts, tag: str) -> CommFacts:
    return replace(facts, version=V[tag])


NO_PROTO = "^LL,LL128,Simple"
VERSION_CASES = [
    # Up to 2.16 NCCL_ALGO governs AllReduce only.
    case("2.16-tree-ag", at(PCIE8, "v2.16.5"), AG, algo("Tree"), ("Ring",)),
    case("2.16-tree-ar", at(PCIE8, "v2.16.5"), AR, algo("Tree"), ("Tree",)),
    # 2.17 and 2.18 never take Ring from the other functions.
    case("2.18-tree-bcast", at(PCIE8, "v2.18.6"), "broadcast", algo("Tree"), ("Ring",)),
    case("2.17-nvls-ag", at(HGX, "v2.17.1"), AG, algo("NVLS"), ("Ring",)),
    case("2.18-nvls-int8", at(HGX, "v2.18.6"), AR, algo("NVLS"), (), "NVLS cannot sum int8",
         dtype="int8"),
    # 2.17 runs NVLS on one node only; without CollNet an NCCL_ALGO that leaves neither Ring
    # nor Tree is ignored (2.17 looks at those two only).
    case("2.17-nvls-2nodes", at(replace(HGX2, collnet=False), "v2.17.1"), AR, algo("NVLS"),
         ("Tree", "Ring")),
    case("2.17-nvls-ring-2nodes", at(replace(HGX2, collnet=False), "v2.17.1"), AR,
         algo("NVLS,Ring"), ("Ring",)),
    # 2.19-2.23 restore Ring where NCCL_ALGO leaves a function nothing...
    case("2.19-tree-ag", at(PCIE8, "v2.19.4"), AG, algo("Tree"), ("Ring",)),
    case("2.23-tree-rs", at(PCIE8, "v2.23.4"), RS, algo("Tree"), ("Ring",)),
    # ...and fall back to it where a call can use nothing.
    case("2.22-nvls-int8", at(HGX, "v2.22.3"), AR, algo("NVLS"), ("Ring",), dtype="int8"),
    case("2.20-nvls-ag-int8", at(HGX, "v2.20.5"), AG, algo("NVLS"), ("Ring",), dtype="int8"),
    case("2.20-nvls-ag-f32", at(HGX, "v2.20.5"), AG, algo("NVLS"), ("NVLS",)),
    case("2.19-nvls-ag-2nodes", at(HGX2, "v2.19.4"), AG, algo("NVLS", **COLLNET_ON), ("Ring",)),
    # The saved Ring keeps every protocol up to 2.21, only NCCL_PROTO's from 2.22.
    case("2.21-no-proto", at(PCIE8, "v2.21.5"), AR, algo("Tree", NCCL_PROTO=NO_PROTO), ("Ring",)),
    case("2.22-no-proto", at(PCIE8, "v2.22.3"), AR, algo("Tree", NCCL_PROTO=NO_PROTO), (),
         "Tree none of its protocols (LL/LL128/Simple)"),
    # Up to 2.23 one list for all, unknown tokens ignored: a prefixed value enables nothing,
    # and without CollNet NCCL then re-enables Ring and Tree.
    case("2.23-prefixed", at(PCIE8, "v2.23.4"), AR, algo("allreduce:tree"), ("Tree", "Ring")),
    case("2.24-prefixed", at(PCIE8, "v2.24.3"), AR, algo("allreduce:tree"), ("Tree",)),
    case("2.23-spaces", at(PCIE8, "v2.23.4"), AR, algo("Ring, Tree"), ("Ring",)),
    case("2.13-collnetdirect", at(PCIE8, "v2.13.4"), AR, algo("CollNetDirect"), ("Tree", "Ring")),
    case("2.9-collnet", at(PCIE8, "v2.9.9"), AR, algo("CollNet"), ("Tree", "Ring")),
    case("2.22-pat-unknown", at(ONE_PER_NODE, "v2.22.3"), AG, algo("PAT"), ("Ring",)),
    case("2.24-pat-8gpu", at(PCIE8, "v2.24.3"), AG, algo("PAT"), (), "one GPU per node"),
    case("2.24-pat", at(ONE_PER_NODE, "v2.24.3"), AG, algo("PAT"), ("PAT",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("facts", "op", "dtype", "redop", "env", "expected", "words"), CASES + VERSION_CASES
)
def test_which_algorithms_nccl_may_run(
    facts: CommFacts,
    op: str,
    dtype: str,
    redop: str,
    env: dict[str, str],
    expected: tuple[str, ...],
    words: str,
) -> None:
    prediction = predict(facts, op, dtype, redop, env)
    assert prediction.algorithms == expected, prediction.reason
    if expected:
        assert prediction.reason is None
        return
    assert prediction.reason is not None and words in prediction.reason, prediction.reason
    # One line, naming the NCCL version and the variables the user set.
    assert "\n" not in prediction.reason and "NCCL 2." in prediction.reason
    assert all(f"{k}={v}" in prediction.reason for k, v in env.items() if k in ("NCCL_ALGO",))


def test_fallbacks_to_ring_are_noted() -> None:
    note = predict(at(PCIE8, "v2.21.5"), "all_gather", env=algo("Tree")).note
    assert note == "NCCL 2.21.5 restores Ring for AllGather"
    note = predict(at(HGX, "v2.22.3"), "all_reduce", "int8", "sum", algo("NVLS")).note
    assert note == "NCCL 2.22.3 falls back to Ring for AllReduce"
    note = predict(at(PCIE8, "v2.9.9"), "all_reduce", env=algo("CollNet")).note
    assert note is not None and "enables Ring and Tree" in note
    assert predict(PCIE8, "all_reduce", env=algo("Tree")).note is None
    assert predict(CommFacts(1, 1), "all_reduce", env=algo("Tree")).note is not None


@pytest.mark.parametrize(
    ("facts", "env", "expected"),
    [
        # An unknown fact is tried both ways: NVLS may run...
        (replace(HGX, nvls=None), algo("NVLS"), ("NVLS",)),
        (replace(HGX, nvls=None, nvswitch=None, compute_capability=None), algo("NVLS"), ("NVLS",)),
        (CommFacts(8, 1), algo("NVLS"), ("NVLS",)),
        # ...and where one reading enables CollNet and the other falls back (2.23), both.
        (
            at(replace(HGX2, collnet=None), "v2.23.4"),
            algo("CollNetDirect", **COLLNET_ON),
            ("Tree", "Ring", "CollNetDirect"),
        ),
        # The newest known rules apply when the version is unknown.
        (CommFacts(8, 1), algo("Tree"), ("Tree",)),
    ],
)
def test_unknown_facts_are_tried_both_ways(
    facts: CommFacts, env: dict[str, str], expected: tuple[str, ...]
) -> None:
    assert predict(facts, "all_reduce", "float32", "sum", env).algorithms == expected


def test_only_known_facts_make_a_call_unsupported() -> None:
    unknown = CommFacts(8, 1)
    assert predict(unknown, "all_gather", env=algo("PAT")).algorithms == ()
    assert predict(unknown, "all_gather", env=algo("NVLS")).algorithms == ("NVLS",)


def test_point_to_point_ops_are_not_governed() -> None:
    for op in ("all_to_all", "gather", "scatter", "sendrecv"):
        assert function_of(op) is None
        with pytest.raises(ValueError, match="not an NCCL collective"):
            predict(PCIE8, op)
    assert function_of("allreduce") == "AllReduce" and function_of("ReduceScatter")


@pytest.mark.parametrize(
    ("version", "names"),
    [
        ((2, 9, 9), ("Tree", "Ring", "CollNet")),
        ((2, 14, 3), ("Tree", "Ring", "CollNetDirect", "CollNetChain")),
        ((2, 17, 1), ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS")),
        ((2, 18, 1), ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree")),
        ((2, 23, 4), ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")),
        (None, ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")),
    ],
)
def test_algorithm_names_per_version(version: Any, names: tuple[str, ...]) -> None:
    assert algorithms(version) == names


@pytest.mark.parametrize(
    ("value", "version", "allreduce", "allgather", "error"),
    [
        ("tree;allreduce:ring", None, {"Ring"}, {"Tree"}, None),
        (
            "^ring;allgather:^pat",
            None,
            set(algorithms(None)) - {"Ring"},
            set(algorithms(None)) - {"PAT"},
            None,
        ),
        ("RING,,tree", None, {"Ring", "Tree"}, {"Ring", "Tree"}, None),
        ("^", None, set(algorithms(None)), set(algorithms(None)), None),
        ("allreduce:", None, None, None, "unknown name 'allreduce'"),
        (";tree", None, None, None, "needs a prefix"),
        ("allreduce:tree", (2, 23, 4), set(), set(), None),
        (
            "^Tree",
            (2, 23, 4),
            set(algorithms((2, 23, 4))) - {"Tree"},
            set(algorithms((2, 23, 4))) - {"Tree"},
            None,
        ),
        ("", (2, 23, 4), set(), set(), None),
        ("", None, set(algorithms(None)), set(algorithms(None)), None),
    ],
)
def test_nccl_algo_grammar(
    value: str, version: Any, allreduce: Any, allgather: Any, error: str | None
) -> None:
    parsed = parse("NCCL_ALGO", value, algorithms(version), version)
    if error:
        assert parsed.error is not None and error in parsed.error
        return
    assert parsed.error is None
    assert set(parsed.enabled["AllReduce"]) == allreduce
    assert set(parsed.enabled["AllGather"]) == allgather


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1), ("0x10", 16), ("010", 8), (" -3x", -3), ("abc", 0), ("2", 2)],
)
def test_integer_switches_read_like_strtoll(text: str, value: int) -> None:
    assert strtoll(text) == value


# NCCL's own tables: the facts each log shows (nranks, nNodes, what NCCL_HOSTID did) and
# the hardware its source states. ncclebpf: two ranks on one RTX 5090 with distinct
# NCCL_HOSTID, so NCCL counts two nodes of one GPU each (its table enables PAT).
REAL_TABLES = [
    ("ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log",
     CommFacts(2, 2, 1, nvswitch=False, nvls=False, collnet=False, compute_capability=120),
     {"NCCL_P2P_DISABLE": "1"},
     {"nodes": 1, "ranks_per_node": 2}, "NCCL enabled PAT, which the prediction rules out"),
    ("timez-a100pcie-roce-nogdr-2.27.log",
     CommFacts(2, 1, 2, nvswitch=False, nvls=False, collnet=False, compute_capability=80), {},
     {"nodes": 2, "ranks_per_node": 1}, "NCCL's table disables PAT, which the prediction expects"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "facts", "env", "wrong", "complaint"), REAL_TABLES, ids=[t[0] for t in REAL_TABLES]
)
def test_the_prediction_agrees_with_nccls_own_table(
    name: str, facts: CommFacts, env: dict[str, str], wrong: dict[str, int], complaint: str
) -> None:
    log = parse_log((LOGS / name).read_text())
    facts = replace(facts, version=log.version)
    (table,) = log.tables
    assert check_table(facts, table.available(), env) == []
    # The check can fail: the same table read with the other node count disagrees on PAT.
    assert check_table(replace(facts, **wrong), table.available(), env) == [
        f"AllGather: {complaint}",
        f"ReduceScatter: {complaint}",
    ]


def test_a_table_missing_an_expected_algorithm_is_reported() -> None:
    available = {"AllReduce": ("Ring",), "AllGather": ("Ring",)}
    assert check_table(PCIE8, available) == [
        "AllReduce: NCCL's table disables Tree, which the prediction expects"
    ]
    must, may = table_algorithms(replace(HGX, nvls=None))["AllReduce"]
    assert "NVLS" in may and "NVLS" not in must


#: NCCL's own parse of NCCL_ALGO/NCCL_PROTO, printed from 2.24 when either is set: a
#: ``Function | protocols | algorithms`` header, then one row of 1 (on) / 0 (off) / 2
#: (LL128: left to NCCL) per function, on lines without NCCL's header.
_MATRIX_START = "Enabled NCCL Func/Proto/Algo Matrix"
_MATRIX_ROW = re.compile(r"^\s*(?P<func>[A-Za-z]+)\s*\|(?P<protos>[^|]*)\|(?P<algos>[^|]*)$")
Matrix = dict[str, tuple[dict[str, int], dict[str, int]]]


def nccl_matrices(text: str) -> list[Matrix]:
    """Each Func/Proto/Algo matrix of a log: function -> (protocols, algorithms)."""
    found: list[Matrix] = []
    matrix: Matrix | None = None
    columns: tuple[list[str], list[str]] = ([], [])
    for line in read_lines(text):
        if line.level:
            matrix = {} if line.message.startswith(_MATRIX_START) else None
            found += [] if matrix is None else [matrix]
            continue
        m = _MATRIX_ROW.match(line.message)
        if matrix is None or m is None:
            continue
        protos, algos = m["protos"].split(), m["algos"].split()
        if m["func"] == "Function":
            columns = ([{p.upper(): p for p in PROTOCOLS}[p.upper()] for p in protos], algos)
        elif m["func"] in FUNCTIONS:
            matrix[m["func"]] = (
                dict(zip(columns[0], map(int, protos), strict=True)),
                dict(zip(columns[1], map(int, algos), strict=True)),
            )
    return found


def check_matrix(version: Version | None, env: dict[str, str], matrix: Matrix) -> list[str]:
    """Where NCCL's printed matrix disagrees with spec.parse's reading of the variables."""
    out = []
    for index, variable, names in ((0, "NCCL_PROTO", PROTOCOLS), (1, "NCCL_ALGO", None)):
        parsed = parse(variable, env.get(variable), names or algorithms(version), version)
        for function, row in matrix.items():
            on = {name for name, value in row[index].items() if value}
            if on != set(parsed.enabled[function]):
                out.append(f"{function}: NCCL enabled {sorted(on)} under {variable}")
    return out


@pytest.mark.parametrize(
    "name", ["gnosia-g6e-1pod-shm-2.27.log", "gnosia-g6e-4pods-efa-nogdr-2.27.log"]
)
def test_the_grammar_agrees_with_nccls_own_matrix(name: str) -> None:
    text = (LOGS / name).read_text()
    log = parse_log(text)
    matrices = nccl_matrices(text)
    assert len(matrices) == 2 and all(len(m) == len(FUNCTIONS) for m in matrices)
    assert log.env["NCCL_PROTO"] == "simple"
    for matrix in matrices:
        assert check_matrix(log.version, log.env, matrix) == []
        other = {"NCCL_PROTO": "LL"}
        assert len(check_matrix(log.version, other, matrix)) == 5


@pytest.mark.parametrize(
    ("version", "code"), [((2, 29, 3), 22903), ((2, 9, 6), 20906), ((2, 8, 3), 2803)]
)
def test_nccl_version_codes_read_back_as_written(version: tuple[int, int, int], code: int) -> None:
    from colbench.nccl.names import from_code, to_code

    assert to_code(version) == code
    assert from_code(code) == version


def test_torch_nccl_version_takes_a_tuple_or_a_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from colbench.nccl.names import torch_version

    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 27, 7), raising=False)
    assert torch_version() == (2, 27, 7)
    # Older torch returned NCCL's version code.
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: 2803, raising=False)
    assert torch_version() == (2, 8, 3)

    def cpu_build() -> None:
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")

    monkeypatch.setattr(torch.cuda.nccl, "version", cpu_build, raising=False)
    assert torch_version() is None
