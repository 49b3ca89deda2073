"""Which interface carries a node's traffic toward an address: the kernel's route
choice, read by connecting a UDP socket (no packet is sent) and finding the interface
that holds the local address it picked."""

from __future__ import annotations

import fcntl
import socket
import struct

_SIOCGIFADDR = 0x8915


def _ipv4(interface: str) -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(
                s.fileno(), _SIOCGIFADDR, struct.pack("256s", interface[:15].encode())
            )
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def interface_towards(host: str | None) -> str | None:
    """The interface the kernel would send to ``host`` through; None where unknown."""
    if not host:
        return None
    try:
        address = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            local = s.getsockname()[0]
    except OSError:
        return None
    for _, name in socket.if_nameindex():
        if _ipv4(name) == local:
            return name
    return None
