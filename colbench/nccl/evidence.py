"""What a log's lines prove about the fabric: transports, GDR, fallbacks, and verdicts.

Every verdict is triggered by lines of the log, which it quotes; none by what is merely
usual. The transport lines are NCCL's (src/transport/{p2p,shm,net,coll_net}.cc):
``Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA``; the device index (and PXN's
proxy rank in parentheses) is dropped, the rest kept as NCCL spells it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINK = re.compile(
    r"^Channel \d+(?:/\d+)? : (?P<a>\d+)\[[0-9a-f]+\] -> (?P<b>\d+)\[[0-9a-f]+\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>.+?)(?: comm 0x[0-9a-f]+ nRanks \d+)?\s*$"
)
_COLLNET = re.compile(
    r"^CollNet \d+(?:/\d+)? : \d+ \[(?:send|receive)\] via (?P<via>COLLNET/.+?)\s*$"
)
_NET = re.compile(r"^(?P<kind>NET|COLLNET)/(?P<name>.+?)/\d+(?:\(\d+\))?(?P<rest>(?:/.*)?)$")
_INDIRECT = re.compile(r"/\d+\[[0-9a-f]+\]")

#: Lines of a network plugin that failed to load or to start. The built-in IB "plugin"
#: failing (2.19+ says ``Failed to initialize NET plugin IB``) is a host without
#: InfiniBand, and ``No plugin found`` / ``Could not find: libnccl-net.so`` is a host
#: without a plugin: neither is here.
_PLUGIN_FAILED = (
    (
        re.compile(r"Failed to initialize NET plugin (?!(?:Socket|IB)\b)(\S+)"),
        "NET plugin {0} failed",
    ),
    (
        re.compile(r"NET/(\w+) .*(?:initialization failed|Initializing plugin failed)"),
        "network plugin NET/{0} failed to initialize",
    ),
    (re.compile(r"NET/Plugin\s*:\s*Plugin load returned"), "the network plugin failed to load"),
    (re.compile(r"External network plugin (\S+) is unsupported"), "network plugin {0} unsupported"),
    (re.compile(r"Failed to initialize any NET plugin"), "no NET plugin initialized"),
)
#: What NCCL prints on every host without InfiniBand (src/transport/net_ib.cc,
#: src/misc/ibvwrap.cc): on Ethernet that is all there is, so these lines only explain a
#: fallback that other lines prove.
_NO_IB = (
    (re.compile(r"NET/IB\s*:\s*No device found"), "NET/IB: No device found"),
    (re.compile(r"Failed to open libibverbs"), "libibverbs failed to load"),
    (re.compile(r"Failed to initialize NET plugin IB\b"), "NET plugin IB failed"),
)
#: InfiniBand (or RoCE) devices NCCL found: ``NET/IB : Using [0]mlx5_0:1/IB ...``; and
#: sockets over a high-speed fabric's interfaces (HPE Slingshot's hsnN, IPoIB's ibN),
#: which an RDMA transport or a network plugin drives when one is there.
_IB_FOUND = (
    (re.compile(r"NET/IB\s*:\s*Using (\[\d+\]\S+)"), "InfiniBand devices found ({0})"),
    (
        re.compile(r"NET/Socket\s*:\s*Using .*?\[\d+\]((?:hsn|ib)\d+):"),
        "sockets over {0}, a fabric interface that a network plugin would drive",
    ),
)
_GDR_CAPABLE = re.compile(r"GPU Direct RDMA Enabled for (?:HCA|GPU)")
_GDR_DISTANCE = re.compile(r"GPU Direct RDMA Disabled for GPU \S+ / HCA \S+ \(distance \d+ > \d+\)")
_NVSWITCH = re.compile(r"\bNVS/")


@dataclass(frozen=True)
class NetLink:
    """A channel over the network between two ranks (of communicator ``comm``, if known)."""

    a: int
    b: int
    transport: str
    comm: str | None = None


def transport(message: str) -> tuple[str, NetLink | None] | None:
    """(transport name, the network link if it is one) of a transport line, else None."""
    m = _LINK.match(message) or _COLLNET.match(message)
    if m is None:
        return None
    via = _INDIRECT.sub("", m["via"])
    net = _NET.match(via)
    if net is None:
        return via, None
    name = f"{net['kind']}/{net['name']}{net['rest']}"
    link = NetLink(int(m["a"]), int(m["b"]), name) if "a" in m.groupdict() else None
    return name, link


def gdr(transports: list[str]) -> bool | None:
    """True when a NET transport uses GDRDMA, False when NET transports run without it
    (sockets always do: the text then says nothing of GDR)."""
    net = [t for t in transports if t.startswith("NET/")]
    return any("/GDRDMA" in t for t in net) if net else None


def _found(messages: list[str], patterns: tuple[tuple[re.Pattern[str], str], ...]) -> list[str]:
    found: dict[str, None] = {}
    for message in messages:
        for pattern, text in patterns:
            m = pattern.search(message)
            if m:
                found.setdefault(text.format(*m.groups()))
    return list(found)


def plugin_failures(messages: list[str]) -> list[str]:
    """Each distinct failure of a network plugin the log shows."""
    return _found(messages, _PLUGIN_FAILED)


def _asked(env: dict[str, str]) -> list[str]:
    """The variables that asked NCCL for InfiniBand or a plugin (NCCL_NET_PLUGIN=none
    asks for none; NCCL_IB_DISABLE=1 overrides NCCL_IB_HCA)."""
    out = []
    if env.get("NCCL_IB_HCA") and env.get("NCCL_IB_DISABLE") != "1":
        out.append(f"NCCL_IB_HCA={env['NCCL_IB_HCA']}")
    if env.get("NCCL_NET") and env["NCCL_NET"].lower() != "socket":
        out.append(f"NCCL_NET={env['NCCL_NET']}")
    if env.get("NCCL_NET_PLUGIN") and env["NCCL_NET_PLUGIN"].lower() != "none":
        out.append(f"NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']}")
    return out


def failed_attempts(messages: list[str], env: dict[str, str]) -> list[str]:
    """Why NCCL's Socket network would be a fallback: InfiniBand devices it found, a
    variable asking for InfiniBand or a plugin, a plugin that failed (with the lines of
    a host without InfiniBand as context). Empty where the log shows a host that only
    has Ethernet: Socket is then what there is, not a fallback."""
    if env.get("NCCL_NET", "").lower() == "socket":
        return []
    proof = _asked(env) + _found(messages, _IB_FOUND) + plugin_failures(messages)
    return proof + _found(messages, _NO_IB) if proof else []


@dataclass(frozen=True)
class Facts:
    """What the verdicts look at, already read from the log."""

    network: str | None
    gdr: bool | None
    nvls: bool | None
    #: failed_attempts: empty where Socket is all the host has.
    attempts: list[str]
    messages: list[str]
    env: dict[str, str]
    same_host_links: list[tuple[NetLink, str]]
    transports: list[str] = field(default_factory=list)
    #: plugin_failures: a plugin that failed beside NCCL's built-in IB.
    plugin_failed: list[str] = field(default_factory=list)
    #: colbench's own --ranks-per-gpu run: ranks of one host are NCCL nodes of their own
    #: by design, so their network traffic is what was asked for, not a finding.
    emulated_nodes: bool = False
    #: NCCL counted more nodes than the log has host names (NCCL_HOSTID splits a host).
    nodes_split: bool = False


def verdicts(facts: Facts) -> list[str]:
    """One line per problem the log proves; none where all is as expected."""
    out = []
    if facts.attempts and facts.network == "Socket":
        out.append(
            "network Socket although NCCL tried InfiniBand or a network plugin ("
            + "; ".join(facts.attempts)
            + ")"
        )
    elif facts.network == "IB" and facts.plugin_failed:
        out.append(f"the network plugin failed; NCCL used its built-in {facts.network}")
    out += _gdr_verdicts(facts)
    if facts.nvls is False and any(_NVSWITCH.search(m) for m in facts.messages):
        out.append("NVLS unavailable although the topology shows an NVSwitch")
    if facts.env.get("NCCL_NVLS_ENABLE") == "0":
        out.append("NVLS disabled by NCCL_NVLS_ENABLE=0")
    if facts.same_host_links and not facts.emulated_nodes:
        link, host = facts.same_host_links[0]
        why = [
            f"{k}={facts.env[k]}"
            for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")
            if k in facts.env
        ]
        if "NCCL_HOSTID" in facts.env and facts.nodes_split:
            # NCCL_HOSTID values that differ on one host make its ranks separate nodes:
            # NCCL then has only its network transport between them. (A site's uniform
            # NCCL_HOSTID splits nothing, and is not named.)
            why.insert(0, "NCCL_HOSTID makes each rank a node of its own")
        out.append(
            f"intra-node traffic over the network: ranks {link.a} and {link.b} on {host} use "
            f"{link.transport}" + (f" ({', '.join(why)})" if why else "")
        )
    out += _shm_verdicts(facts)
    return out


def _shm_verdicts(facts: Facts) -> list[str]:
    """GPUs of one node that NCCL connected through host memory rather than directly."""
    if not any(t.startswith("SHM/") for t in facts.transports):
        return []
    why = [f"{k}={facts.env[k]}" for k in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") if k in facts.env]
    cause = ", ".join(why) if why else "NCCL found no peer-to-peer path between the GPUs"
    return [f"intra-node traffic through host memory (SHM), not GPU peer-to-peer ({cause})"]


def _gdr_verdicts(facts: Facts) -> list[str]:
    if facts.gdr is not False:
        return []
    capable = next((m for m in facts.messages if _GDR_CAPABLE.search(m)), None)
    if capable:
        return [f"GDR off although the NIC supports it ({capable})"]
    distance = next((m for m in facts.messages if _GDR_DISTANCE.search(m)), None)
    if distance:
        return [f"GDR off: the GPU is farther from the NIC than NCCL_NET_GDR_LEVEL ({distance})"]
    return []
