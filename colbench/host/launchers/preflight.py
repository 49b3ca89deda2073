"""Network checks that run before rendezvous, so a misconfigured job fails in
milliseconds instead of hanging until a timeout.

The classic multi-node gloo hang: gloo binds the address its host name resolves to (or
the interface in ``GLOO_SOCKET_IFNAME``); many distributions map the host name to a
loopback address in /etc/hosts, which gloo then advertises to the other nodes, who wait
forever to connect to their own loopback. We reproduce gloo's choice (torch's
``ProcessGroupGloo::createDefaultDevice``) and compare it with the route to MASTER_ADDR.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from colbench.errors import UsageError
from colbench.host.launchers.devices import pick_cuda_index
from colbench.host.launchers.env import LaunchEnv

_IFF_LOOPBACK = 0x8


@dataclass(frozen=True)
class Interface:
    """A network interface and the addresses it holds."""

    name: str
    loopback: bool
    addresses: tuple[str, ...] = field(default=())


class _SockAddr(ctypes.Structure):
    _fields_ = (("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14))


class _IfAddrs(ctypes.Structure):
    pass


_IfAddrs._fields_ = (
    ("next", ctypes.POINTER(_IfAddrs)),
    ("name", ctypes.c_char_p),
    ("flags", ctypes.c_uint),
    ("addr", ctypes.POINTER(_SockAddr)),
    ("netmask", ctypes.c_void_p),
    ("ifu", ctypes.c_void_p),
    ("data", ctypes.c_void_p),
)


def _address(sa: _SockAddr) -> str | None:
    raw = ctypes.string_at(ctypes.addressof(sa), 28 if sa.family == socket.AF_INET6 else 16)
    if sa.family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8])
    if sa.family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24])
    return None


def interfaces() -> dict[str, Interface]:
    """Every interface of this network namespace with its IPv4/IPv6 addresses (Linux
    ``getifaddrs``; the Python standard library has no call for addresses)."""
    libc_name = ctypes.util.find_library("c")
    if os.uname().sysname != "Linux" or libc_name is None:
        return {}
    libc = ctypes.CDLL(libc_name, use_errno=True)
    head = ctypes.POINTER(_IfAddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        return {}
    found: dict[str, tuple[bool, list[str]]] = {}
    try:
        node = head
        while node:
            entry = node.contents
            name = (entry.name or b"").decode(errors="replace")
            loopback, addrs = found.setdefault(name, (False, []))
            loopback = loopback or bool(entry.flags & _IFF_LOOPBACK)
            if entry.addr:
                addr = _address(entry.addr.contents)
                if addr is not None and addr not in addrs:
                    addrs.append(addr)
            found[name] = (loopback, addrs)
            node = entry.next
    finally:
        libc.freeifaddrs(head)
    return {n: Interface(n, lb, tuple(a)) for n, (lb, a) in found.items()}


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _bindable(family: int, address: str) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, 0))
        except OSError:
            return False
    return True


def gloo_default_address(hostname: str | None = None) -> str:
    """The address gloo binds without GLOO_SOCKET_IFNAME: the first address of the
    host name that can be bound, else loopback (torch warns and falls back)."""
    hostname = socket.gethostname() if hostname is None else hostname
    try:
        infos = socket.getaddrinfo(hostname, None, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except OSError:
        return "127.0.0.1"
    for family, _, _, _, sockaddr in infos:
        if _bindable(family, str(sockaddr[0])):
            return str(sockaddr[0])
    return "127.0.0.1"


def route_source(master: str) -> str | None:
    """The local address the kernel would send from to reach ``master`` (a UDP
    connect sends nothing; it only asks the routing table)."""
    try:
        infos = socket.getaddrinfo(master, 9, socket.AF_UNSPEC, socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, _, _, _, sockaddr in infos:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect(sockaddr)
                return str(sock.getsockname()[0])
            except OSError:
                continue
    return None


def resolve(host: str) -> list[str]:
    try:
        return [str(i[4][0]) for i in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]
    except OSError:
        return []


def owner(address: str, ifaces: Mapping[str, Interface]) -> Interface | None:
    """The interface holding ``address``: the one other nodes reach us through."""
    for iface in ifaces.values():
        if address in iface.addresses:
            return iface
    return None


def diagnose_gloo(
    *,
    master_addr: str,
    master_ips: Sequence[str],
    multi_node: bool | None,
    socket_ifname: str | None,
    hostname: str,
    default_address: str,
    source: str | None,
    ifaces: Mapping[str, Interface],
) -> str | None:
    """Why gloo cannot work in this job, or None. Pure: every fact is an argument."""
    if not master_ips:
        return f"MASTER_ADDR={master_addr} does not resolve to an address on this host"
    master_local = all(is_loopback(ip) for ip in master_ips)
    if multi_node is False or (multi_node is None and master_local):
        return None
    if master_local:
        return (
            f"MASTER_ADDR={master_addr} is a loopback address but the job spans several "
            "nodes, so the other nodes cannot reach rank 0; give an address they can reach "
            "(for torchrun: --rdzv-endpoint and --local-addr)"
        )
    spans = (
        f"the job spans several nodes (MASTER_ADDR={master_addr})"
        if multi_node
        else f"MASTER_ADDR={master_addr} is not loopback, so ranks on other nodes are expected"
    )
    route = owner(source, ifaces) if source else None
    suggestion = (
        f"; set GLOO_SOCKET_IFNAME={route.name}, the interface that routes to {master_addr}"
        if route is not None and not route.loopback
        else "; set GLOO_SOCKET_IFNAME to the interface the nodes reach each other through"
    )
    if socket_ifname:
        for name in (n.strip() for n in socket_ifname.split(",") if n.strip()):
            iface = ifaces.get(name)
            if iface is None or not iface.addresses:
                why = "no such interface here" if iface is None else "it has no address"
                return f"GLOO_SOCKET_IFNAME={socket_ifname}: {why} ({name})" + suggestion
            if iface.loopback or all(is_loopback(a) for a in iface.addresses):
                return (
                    f"GLOO_SOCKET_IFNAME={socket_ifname} makes gloo bind loopback interface "
                    f"{name}, but {spans}, and they could never connect to this rank" + suggestion
                )
        return None
    if is_loopback(default_address):
        return (
            f"gloo would bind loopback address {default_address} (what host name "
            f"{hostname!r} resolves to), but {spans}, and they could never "
            "connect to this rank" + suggestion
        )
    return None


def check_gloo(launch: LaunchEnv, env: Mapping[str, str] | None = None) -> None:
    """Raise UsageError when gloo would hang this launched job; a no-op on one node (the
    caller, :func:`check`, names the rank)."""
    env = os.environ if env is None else env
    if launch.world_size < 2 or launch.master_addr is None:
        return
    master = launch.master_addr
    ifname = env.get("GLOO_SOCKET_IFNAME")
    problem = diagnose_gloo(
        master_addr=master,
        master_ips=resolve(master),
        multi_node=launch.multi_node,
        socket_ifname=ifname,
        hostname=socket.gethostname(),
        default_address="" if ifname else gloo_default_address(),
        source=route_source(master),
        ifaces=interfaces(),
    )
    if problem is not None:
        raise UsageError(problem)


def socket_ifname_problem(value: str, ifaces: Mapping[str, Interface]) -> str | None:
    """Why gloo cannot use the interfaces ``GLOO_SOCKET_IFNAME=value`` names, or None.

    gloo binds the first address of each named interface (torch makes one device per
    comma-separated name) and fails, past the rendezvous, with a C++ enforce message
    when it finds none. Pure: the interfaces are an argument.
    """
    usable = sorted(name for name, iface in ifaces.items() if iface.addresses)
    here = f"interfaces with an address here: {', '.join(usable) or 'none'}"
    for name in (n.strip() for n in value.split(",") if n.strip()):
        iface = ifaces.get(name)
        if iface is None:
            return f"GLOO_SOCKET_IFNAME={value}: no interface {name} on this host ({here})"
        if not iface.addresses:
            return (
                f"GLOO_SOCKET_IFNAME={value}: interface {name} has no address for gloo to "
                f"bind ({here})"
            )
    return None


def check_socket_ifname(env: Mapping[str, str] | None = None) -> None:
    """Refuse, before any rank starts, a GLOO_SOCKET_IFNAME that gloo cannot use here.

    Every backend needs it: NCCL runs keep their bookkeeping on a gloo side group.
    """
    env = os.environ if env is None else env
    value = env.get("GLOO_SOCKET_IFNAME", "")
    ifaces = interfaces() if value.strip() else {}
    # Without getifaddrs (not Linux) nothing is known, and nothing is refused.
    problem = socket_ifname_problem(value, ifaces) if ifaces else None
    if problem is not None:
        raise UsageError(f"{problem}: name one of those, or unset GLOO_SOCKET_IFNAME")


def check(launch: LaunchEnv, backend: str, gpu_count: int) -> None:
    """Everything a launched rank can verify alone before it waits on the others.

    gloo is checked on every backend: bookkeeping goes over a gloo side group on NCCL
    runs too, so a gloo that cannot reach the other nodes would hang them as well.
    """
    try:
        check_socket_ifname()
        check_gloo(launch)
        if backend != "gloo":
            pick_cuda_index(launch.local_rank, launch.local_world_size, gpu_count)
    except UsageError as exc:
        raise UsageError(f"rank {launch.rank}: {exc}") from None
