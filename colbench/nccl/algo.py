"""Which algorithms NCCL may run for one collective call, as a pure function of the facts.

NCCL decides in two stages, and so does ``predict``:

1. At communicator creation (src/graph/tuning.cc, ncclTopoTuneModel) it models every
   (function, algorithm, protocol), zeroes what the hardware, the version and the
   ``NCCL_*_ENABLE`` switches rule out, then what ``NCCL_ALGO``/``NCCL_PROTO`` exclude. The
   result is the latency/bandwidth table it logs under ``NCCL_DEBUG_SUBSYS=TUNING``.
2. At each call (src/enqueue.cc) it drops what the (dtype, redop) cannot use (NVLS reduces
   few types, PAT cannot average a ReduceScatter...) and picks the fastest left. None left:
   ``no algorithm/protocol available``, and the call fails.

Versions differ (rules.py and spec.py name where): up to 2.16 ``NCCL_ALGO`` governed only
AllReduce; 2.17 and 2.18 never took Ring from the other functions; 2.19 to 2.23 fell back to
Ring where nothing was left; from 2.24 nothing is rescued and a bad value fails init.

Facts that are unknown (None) are tried both ways: ``algorithms`` holds what NCCL may run
under some reading of them, and ``reason`` is given only when it can run nothing under any.
Topology NCCL finds at run time (NVLS channel count, CollNet heads per node, LL128's links,
CollNet's per-type support) is not modelled: an algorithm those rule out is still listed. A
tuner plugin rewrites the costs between the two stages and may pick otherwise; nor is
multi-node NVLink (MNNVL) modelled.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from colbench.nccl.names import (
    FUNCTIONS,
    PROTOCOLS,
    Version,
    algorithms,
    effective,
    function_of,
    version_text,
)
from colbench.nccl.rules import Comm, call_refusal, collnet_support, function_algorithms, modelled
from colbench.nccl.spec import parse


@dataclass(frozen=True)
class CommFacts:
    """What NCCL's choice depends on, about one communicator; None is unknown."""

    ranks: int
    """NCCL's nRanks."""
    nodes: int
    """NCCL's nNodes: distinct host hashes (hostname, or NCCL_HOSTID where set)."""
    ranks_per_node: int | None = None
    """The most ranks on one node (NCCL's maxLocalRanks); None: ranks / nodes, rounded up."""
    nvswitch: bool | None = None
    """The GPUs of a node connect through an NVSwitch."""
    nvls: bool | None = None
    """CUDA reports NVLink SHARP multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)."""
    collnet: bool | None = None
    """A CollNet network plugin (e.g. SHARP) is loaded and usable."""
    version: Version | None = None
    """NCCL's version; None: the newest known (names.NEWEST_KNOWN)."""
    compute_capability: int | None = None
    """The lowest compute capability in the communicator, as 10*major+minor (90: Hopper)."""


@dataclass(frozen=True)
class Prediction:
    """The algorithms NCCL may choose for a call, in NCCL's order."""

    algorithms: tuple[str, ...]
    reason: str | None = None
    """When ``algorithms`` is empty: why, in one line naming NCCL_ALGO and NCCL's rule."""
    note: str | None = None
    """When NCCL overrides the request without failing (a fallback to Ring, say)."""


@dataclass
class _Outcome:
    table: dict[str, dict[str, frozenset[str]]]
    why: dict[str, dict[str, str]]
    notes: dict[str, list[str]]
    error: str | None = None


def predict(
    facts: CommFacts,
    collective: str,
    dtype: str = "float32",
    redop: str | None = "sum",
    env: Mapping[str, str] | None = None,
) -> Prediction:
    """The algorithms NCCL may run for ``collective`` (an NCCL function or a colbench op)
    with (dtype, redop) under ``env``; () and a reason when it would fail the call."""
    function = function_of(collective)
    if function is None:
        raise ValueError(f"{collective!r} is not an NCCL collective governed by NCCL_ALGO")
    env = env or {}
    if facts.ranks <= 1:
        # Every version handles a world of one before reading NCCL_ALGO (tuning, enqueue).
        note = "a world of one copies locally; NCCL_ALGO is not read"
        return Prediction(("Ring",), note=note if "NCCL_ALGO" in env else None)
    found: dict[str, None] = {}
    reasons, notes = [], []
    for comm in _readings(facts):
        algos, reason, note = _one_call(comm, env, function, dtype, redop or "sum")
        found.update(dict.fromkeys(algos))
        reasons.append(reason)
        notes.append(note)
    order = algorithms(facts.version)
    chosen = tuple(a for a in order if a in found)
    why_not = None if chosen else next(r for r in reasons if r)
    return Prediction(chosen, why_not, next((n for n in notes if n), None))


def table_algorithms(
    facts: CommFacts, env: Mapping[str, str] | None = None
) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Per NCCL function, (must, may): the algorithms NCCL's tuning table enables under
    every / some reading of the unknown facts (bandwidth above 0 for some protocol)."""
    must: dict[str, set[str]] = {}
    may: dict[str, set[str]] = {f: set() for f in FUNCTIONS}
    for comm in _readings(facts):
        outcome = _init(comm, env or {})
        for f in FUNCTIONS:
            enabled = set() if outcome.error else set(outcome.table[f])
            may[f] |= enabled
            must[f] = must[f] & enabled if f in must else enabled
    return {f: (frozenset(must[f]), frozenset(may[f])) for f in FUNCTIONS}


def check_table(
    facts: CommFacts, available: Mapping[str, Collection[str]], env: Mapping[str, str] | None = None
) -> list[str]:
    """Where NCCL's own tuning table (``available``: function -> algorithms with some
    bandwidth, as log.TuningTable.available() gives) disagrees with the prediction."""
    out = []
    for function, (must, may) in table_algorithms(facts, env).items():
        if function not in available:
            continue
        seen = set(available[function])
        for algo in sorted(seen - may):
            out.append(f"{function}: NCCL enabled {algo}, which the prediction rules out")
        for algo in sorted(must - seen):
            out.append(f"{function}: NCCL's table disables {algo}, which the prediction expects")
    return out


def _readings(facts: CommFacts) -> Iterator[Comm]:
    """Every concrete communicator the facts allow: unknowns are tried both ways."""
    local = facts.ranks_per_node or -(-facts.ranks // max(facts.nodes, 1))

    def both(value: bool | None) -> tuple[bool, ...]:
        return (True, False) if value is None else (value,)

    ccs = (90, 50) if facts.compute_capability is None else (facts.compute_capability,)
    for nvswitch, nvls, collnet, cc in itertools.product(
        both(facts.nvswitch), both(facts.nvls), both(facts.collnet), ccs
    ):
        yield Comm(
            effective(facts.version), facts.ranks, facts.nodes, local, nvswitch, nvls, collnet, cc
        )


def _one_call(
    comm: Comm, env: Mapping[str, str], function: str, dtype: str, redop: str
) -> tuple[tuple[str, ...], str, str]:
    outcome = _init(comm, env)
    if outcome.error:
        return (), outcome.error, ""
    table, why = outcome.table[function], dict(outcome.why[function])
    left = []
    for algo in table:
        refusal = call_refusal(algo, function, comm, dtype, redop)
        if refusal:
            why[algo] = refusal
        else:
            left.append(algo)
    notes = list(outcome.notes[function])
    if not left and (2, 19, 0) <= comm.version < (2, 24, 0) and _ring_backup(comm, env, function):
        # enqueue getAlgoInfo/topoGetAlgoInfo, 2.19-2.23: the saved Ring bandwidth (ringbdw).
        left = ["Ring"]
        notes.append(f"NCCL {version_text(comm.version)} falls back to Ring for {function}")
    reason = "" if left else _reason(comm, env, function, dtype, redop, why)
    return tuple(left), reason, "; ".join(notes)


def _init(comm: Comm, env: Mapping[str, str]) -> _Outcome:
    """tuning ncclTopoTuneModel: the table of (function -> algorithm -> protocols)."""
    v, names = comm.version, algorithms(comm.version)
    algo_spec = parse("NCCL_ALGO", env.get("NCCL_ALGO"), names, v)
    proto_spec = parse("NCCL_PROTO", env.get("NCCL_PROTO"), PROTOCOLS, v)
    outcome = _Outcome({f: {} for f in FUNCTIONS}, {f: {} for f in FUNCTIONS}, {})
    outcome.notes = {f: [] for f in FUNCTIONS}
    for variable, spec in (("NCCL_ALGO", algo_spec), ("NCCL_PROTO", proto_spec)):
        if spec.error and not outcome.error:
            outcome.error = (
                f"NCCL {version_text(v)} refuses {variable}={env[variable]} ({spec.error}): "
                "no communicator starts"
            )
    enabled = {f: set(algo_spec.enabled[f]) for f in FUNCTIONS}
    _collnet_fallback(comm, env, enabled, outcome.notes)
    for f, a in itertools.product(FUNCTIONS, names):
        protos, why = modelled(f, a, comm, env)
        protos &= proto_spec.enabled[f]
        if _governed(v, f, a) and a not in enabled[f]:
            why = _EXCLUDED  # first: the reason that the user chose
        elif not why and not protos:
            runs = "/".join(p for p in PROTOCOLS if p in modelled(f, a, comm, env)[0])
            why = f"NCCL_PROTO={env.get('NCCL_PROTO')} leaves {a} none of its protocols ({runs})"
        if why:
            outcome.why[f][a] = why
        else:
            outcome.table[f][a] = protos
    if (2, 19, 0) <= v < (2, 24, 0):
        for f in FUNCTIONS:
            ring = _ring_backup(comm, env, f)
            if not outcome.table[f] and ring:
                outcome.table[f]["Ring"] = ring  # tuning: "at least set ring algo available"
                outcome.notes[f].append(f"NCCL {version_text(v)} restores Ring for {f}")
    return outcome


def _governed(v: Version, function: str, algo: str) -> bool:
    """Whether NCCL_ALGO can take ``algo`` from ``function`` (tuning: up to 2.16 only
    AllReduce's algorithms; 2.17 and 2.18 never Ring outside AllReduce)."""
    if v < (2, 17, 0):
        return function == "AllReduce"
    if v < (2, 19, 0):
        return function == "AllReduce" or algo != "Ring"
    return True


def _collnet_fallback(
    comm: Comm, env: Mapping[str, str], enabled: dict[str, set[str]], notes: dict[str, list[str]]
) -> None:
    """tuning, up to 2.23: without CollNet, an NCCL_ALGO that leaves none of Ring, Tree (and
    from 2.18 NVLS, NVLSTree) re-enables Ring and Tree, for every function."""
    if comm.version >= (2, 24, 0) or not collnet_support(comm, env):
        return
    kept = {"Ring", "Tree"} | ({"NVLS", "NVLSTree"} if comm.version >= (2, 18, 0) else set())
    if not any(kept & e for e in enabled.values()):
        for f, e in enabled.items():
            e |= {"Ring", "Tree"}
            notes[f].append("without CollNet, NCCL ignores NCCL_ALGO and enables Ring and Tree")


def _ring_backup(comm: Comm, env: Mapping[str, str], function: str) -> frozenset[str]:
    """Ring's modelled protocols (ringbdw), less those NCCL_PROTO disables from 2.22."""
    protos, _ = modelled(function, "Ring", comm, env)
    if comm.version >= (2, 22, 0):
        protos &= parse("NCCL_PROTO", env.get("NCCL_PROTO"), PROTOCOLS, comm.version).enabled[
            function
        ]
    return protos


def _reason(
    comm: Comm, env: Mapping[str, str], function: str, dtype: str, redop: str, why: dict
) -> str:
    setting = ", ".join(f"{k}={env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO") if k in env)
    call = f"{function} {dtype}" + ("" if function in ("AllGather", "Broadcast") else f" {redop}")
    head = f"NCCL {version_text(comm.version)} has no algorithm for {call}"
    owned = function_algorithms(function, comm.version)
    own = [a for a in algorithms(comm.version) if a in owned]
    if all(why.get(a) == _EXCLUDED for a in own):
        return f"{head}: {setting} excludes every algorithm it has ({', '.join(own)})"
    detail = [
        w if w.startswith(a) else f"{a}: {w}"
        for a, w in why.items()
        if a in owned and w != _EXCLUDED
    ]
    return f"{head} under {setting or 'its defaults'}: {'; '.join(detail)}"


_EXCLUDED = "excluded by NCCL_ALGO"


def asked(
    value: str | None, collective: str, version: Version | None = None
) -> frozenset[str] | None:
    """The algorithms ``NCCL_ALGO=value`` allows ``collective`` (a colbench op or an NCCL
    function), as NCCL spells them; None when it does not restrict it (unset, or a
    per-function form that names other functions only)."""
    function = function_of(collective)
    if value is None or function is None:
        return None
    every = algorithms(version)
    allowed = parse("NCCL_ALGO", value, every, version).enabled[function]
    return None if allowed == frozenset(every) else allowed
