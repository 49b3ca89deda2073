"""NCCL's rules for which algorithm can serve which call, per version, with their sources.

Each rule returns None when it allows, else the reason in a few words. Sources are NVIDIA/nccl
tags; "tuning" is src/graph/tuning.cc (ncclTopoTuneModel), "enqueue" src/enqueue.cc (the
per-call filter: getAlgoInfo up to 2.21, updateCollCostTable from 2.22), "nvls"
src/transport/nvls.cc (ncclNvlsInit), "init" src/init.cc.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from colbench.nccl.names import PROTOCOLS, Version, algorithms, version_text
from colbench.nccl.spec import env_int

SIMPLE_ONLY = frozenset({"Simple"})
#: NCCL_MAX_DIRECT_ARITY + 1: CollNet's limit of GPUs per node (device.h).
COLLNET_MAX_LOCAL = 8
#: NCCL_MAX_NVLS_ARITY: 8 until 2.20, 32 from 2.21 (device.h).
NVLS_ARITY_32: Version = (2, 21, 0)


@dataclass(frozen=True)
class Comm:
    """One concrete communicator (no unknowns): what NCCL's rules look at."""

    version: Version
    ranks: int
    nodes: int
    local_ranks: int
    nvswitch: bool
    nvls: bool
    collnet: bool
    compute_capability: int


def modelled(function: str, algo: str, comm: Comm, env: Mapping[str, str]) -> tuple[frozenset, str]:
    """The protocols NCCL's cost model gives ``algo`` for ``function`` (an empty set means
    bandwidth 0 in its tuning table), and why when none."""
    v = comm.version
    if algo not in function_algorithms(function, v):
        return frozenset(), f"{function} has no {algo} in NCCL {version_text(v)}"
    why = _support(algo, function, comm, env)
    if why:
        return frozenset(), why
    return (frozenset(PROTOCOLS) if algo in ("Tree", "Ring") else SIMPLE_ONLY), ""


def function_algorithms(function: str, v: Version) -> frozenset[str]:
    """tuning: the (function, algorithm) pairs the model loop does not skip."""
    if function in ("Broadcast", "Reduce"):
        return frozenset({"Ring"})
    if function == "AllReduce":
        return frozenset(algorithms(v)) - {"PAT"}
    # AllGather/ReduceScatter: Ring only up to 2.16; NVLS in 2.17, dropped in 2.18, back in
    # 2.19; CollNetDirect from 2.20; PAT from 2.23.
    out = {"Ring"}
    if v >= (2, 17, 0) and not (2, 18, 0) <= v < (2, 19, 0):
        out.add("NVLS")
    if v >= (2, 20, 0):
        out.add("CollNetDirect")
    if v >= (2, 23, 0):
        out.add("PAT")
    return frozenset(out)


def _support(algo: str, function: str, comm: Comm, env: Mapping[str, str]) -> str:
    if algo == "PAT":
        return pat_support(comm, env)
    if algo in ("NVLS", "NVLSTree"):
        return nvls_support(comm, env) or _nvls_shape(algo, function, comm, env)
    if algo.startswith("CollNet"):
        why = collnet_support(comm, env)
        if not why and algo == "CollNetDirect" and comm.version >= (2, 14, 0):
            why = "" if comm.nvswitch else "CollNetDirect needs an NVSwitch"  # tuning
        return why
    return ""


def pat_support(comm: Comm, env: Mapping[str, str]) -> str:
    """tuning ncclPatEnable (2.23+): NCCL_PAT_ENABLE (default 2: automatic); automatic means
    one GPU per node (nNodes == nRanks); from 2.26 never below SM60."""
    if comm.version >= (2, 26, 0) and comm.compute_capability < 60:
        return "PAT needs compute capability 6.0 or later"
    value = env_int(env, "NCCL_PAT_ENABLE", 2)
    if value != 2:
        return "" if value else f"NCCL_PAT_ENABLE={env['NCCL_PAT_ENABLE']} disables PAT"
    if comm.nodes != comm.ranks:
        return (
            f"PAT needs one GPU per node ({comm.ranks} ranks on {comm.nodes} node(s); "
            "NCCL_PAT_ENABLE=1 would force it)"
        )
    return ""


def nvls_support(comm: Comm, env: Mapping[str, str]) -> str:
    """nvls ncclNvlsInit (ncclNvlsSetup in 2.17): NCCL_NVLS_ENABLE 0 disables, 2 (the
    default from 2.18; 1 in 2.17) asks CUDA for multicast support, any other value forces it;
    too few local GPUs disable it (2.17: one, or more than one node; 2.18 to 2.28.3: two or
    fewer; 2.28.7+: one)."""
    v = comm.version
    default = 1 if v < (2, 18, 0) else 2
    value = env_int(env, "NCCL_NVLS_ENABLE", default)
    if value == 0:
        return "NCCL_NVLS_ENABLE=0 disables NVLS"
    fewest = 2 if v < (2, 18, 0) or v >= (2, 28, 7) else 3
    if comm.local_ranks < fewest:
        return f"NVLS needs at least {fewest} GPUs on a node in NCCL {version_text(v)}"
    if v < (2, 18, 0) and comm.nodes > 1:
        return "NVLS runs on one node only in NCCL 2.17"
    if value == 2 or v < (2, 18, 0):
        if not comm.nvls:
            return "NVLS needs NVLink SHARP multicast (NVSwitch, compute capability 9.0+)"
    elif not (comm.nvswitch or comm.nvls):
        # A forced NVLS still needs the NVLS graph, which only an NVSwitch gives (init).
        return "NVLS needs an NVSwitch"
    return ""


def _nvls_shape(algo: str, function: str, comm: Comm, env: Mapping[str, str]) -> str:
    v = comm.version
    if algo == "NVLSTree" and comm.nodes == 1:
        return "NVLSTree needs more than one node"  # tuning, 2.18+
    no_collnet = collnet_support(comm, env)
    if comm.nodes > 1 and no_collnet and algo == "NVLS" and v >= (2, 18, 0):
        # tuning 2.18+; from 2.27 AllGather/ReduceScatter also need the plugin's own
        # iallgather/ireducescatter and a NIC per GPU (collNetHeadsNum), facts not modelled.
        return f"NVLS across nodes needs CollNet ({no_collnet})"
    return ""


def collnet_support(comm: Comm, env: Mapping[str, str]) -> str:
    """init: CollNet needs a CollNet plugin, NCCL_COLLNET_ENABLE=1 (off by default), at least
    NCCL_COLLNET_NODE_THRESHOLD (2) nodes and, up to 2.22, at most 8 GPUs on every node."""
    if not comm.collnet:
        return "CollNet needs a CollNet network plugin (e.g. SHARP)"
    if env_int(env, "NCCL_COLLNET_ENABLE", 0) != 1:
        return "CollNet is off unless NCCL_COLLNET_ENABLE=1"
    if comm.nodes < env_int(env, "NCCL_COLLNET_NODE_THRESHOLD", 2):
        return "CollNet needs at least 2 nodes"
    if comm.version < (2, 23, 0) and comm.local_ranks > COLLNET_MAX_LOCAL:
        return f"CollNet supports at most {COLLNET_MAX_LOCAL} GPUs per node"
    return ""


def call_refusal(algo: str, function: str, comm: Comm, dtype: str, redop: str) -> str:
    """enqueue: why NCCL skips ``algo`` for one call of (function, dtype, redop)."""
    v = comm.version
    limited_from = {"CollNetDirect": (2, 23, 0), "CollNetChain": (2, 29, 0)}
    if algo in limited_from and v >= limited_from[algo] and comm.local_ranks > COLLNET_MAX_LOCAL:
        return f"{algo} supports at most {COLLNET_MAX_LOCAL} GPUs per node"
    if algo == "PAT" and function == "ReduceScatter" and redop == "avg":
        return "PAT ReduceScatter cannot apply avg's scaling"  # 2.23+
    if algo in ("NVLS", "NVLSTree"):
        return _nvls_call(algo, function, comm, dtype, redop)
    return ""


def _nvls_call(algo: str, function: str, comm: Comm, dtype: str, redop: str) -> str:
    v = comm.version
    # AllGather reduces nothing: exempt in 2.19 and from 2.22, not in between.
    exempt = function == "AllGather" and (v >= (2, 22, 0) or (2, 19, 0) <= v < (2, 20, 0))
    # Up to 2.18 AllGather reached the filter as bytes (int8); 2.20/2.21 with its own dtype.
    checked = "int8" if function == "AllGather" and v < (2, 19, 0) else dtype
    if not exempt and not nvls_reduces(checked, "sum" if function == "AllGather" else redop):
        return f"NVLS cannot {redop} {checked} (ncclNvlsSupported)"
    shaped = function in ("AllGather", "ReduceScatter")
    if shaped and algo == "NVLS" and (2, 19, 0) <= v < (2, 27, 0) and comm.nodes > 1:
        return "NVLS AllGather/ReduceScatter runs on one node only"
    arity = 32 if v >= NVLS_ARITY_32 else 8
    if shaped and algo == "NVLS" and (2, 25, 0) <= v < (2, 27, 0) and comm.ranks > arity:
        return f"NVLS AllGather/ReduceScatter takes at most {arity} ranks"
    if function != "AllReduce" and v >= (2, 27, 0) and comm.local_ranks > arity:
        return f"NVLS {function} takes at most {arity} GPUs per node"
    return ""


def nvls_reduces(dtype: str, redop: str) -> bool:
    """device.h ncclNvlsSupported (NCCL_NVLS_SUPPORTS in 2.17/2.18): sum, min and max of
    32/64-bit integers, half and bfloat16; only sum of float and double; never 8-bit types.
    avg is PreMulSum or SumPostDiv and prod is Prod on the device, so never."""
    if dtype in ("int32", "uint32", "int64", "uint64", "float16", "bfloat16"):
        return redop in ("sum", "min", "max")
    return dtype in ("float32", "float64") and redop == "sum"
