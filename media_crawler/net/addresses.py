"""Which IP addresses are internal: everything a feed must not steer the crawler into.

Python's `is_global` is the starting point, but it calls several spellings of an
internal IPv4 address "global" (IPv4-compatible `::127.0.0.1`, NAT64
`64:ff9b::a9fe:a9fe`, SIIT `::ffff:0:a9fe:a9fe`, 6to4 `2002:a9fe:a9fe::`), so
an IPv6 address that embeds an IPv4 one is judged by the embedded address,
and the ranges below are refused by name whatever the table says.
"""
from __future__ import annotations

import functools
import ipaddress
from typing import Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

_INTERNAL_V4 = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8",        # "this network", 0.0.0.0 reaches the local host
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # private
    "100.64.0.0/10",    # carrier-grade NAT (shared address space)
    "127.0.0.0/8",      # loopback
    "169.254.0.0/16",   # link-local: the cloud metadata service lives at 169.254.169.254
    "192.0.0.0/24", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",  # IETF and documentation
    "192.88.99.0/24",   # 6to4 relay anycast
    "198.18.0.0/15",    # benchmarking
    "224.0.0.0/4",      # multicast
    "240.0.0.0/4",      # reserved, and 255.255.255.255 broadcast
))
_INTERNAL_V6 = tuple(ipaddress.ip_network(n) for n in (
    "::/128", "::1/128",
    "64:ff9b:1::/48",   # local-use NAT64
    "100::/64",         # discard-only
    "2001::/23",        # IETF protocol assignments: Teredo, ORCHID, benchmarking
    "2001:db8::/32",    # documentation
    "fc00::/7",         # unique local
    "fe80::/10", "fec0::/10",  # link-local, old site-local
    "ff00::/8",         # multicast
))
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_SIIT = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")


def parse_address(text: str) -> Address | None:
    """An IP address in its canonical spelling (dotted quad, or IPv6 without a zone), else None."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, SIIT, compatible, NAT64, 6to4), if any."""
    for network in (_MAPPED, _SIIT, _COMPATIBLE, _NAT64):
        if address in network:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIXTOFOUR:
        return address.sixtofour
    return None


@functools.lru_cache(maxsize=4096)
def is_internal_address(address: Address) -> bool:
    """True for any address that is not plainly a public unicast one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return True
        inner = embedded_ipv4(address)
        if inner is not None:
            # ::/96 holds :: and ::1 too; their "embedded" 0.0.0.0 / 0.0.0.1 are internal either way.
            return is_internal_address(inner)
        if any(address in network for network in _INTERNAL_V6):
            return True
    elif any(address in network for network in _INTERNAL_V4):
        return True
    return not address.is_global or address.is_multicast
