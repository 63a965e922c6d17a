"""IPv4 forwarding tables: longest-prefix-match routes with ECMP, and the neighbor (ARP) table."""

from __future__ import annotations

import zlib
from typing import Final, NamedTuple

from lab.vswitch.config import SwitchConfig
from lab.vswitch.packet import IP_PROTO_TCP, IP_PROTO_UDP, mac_to_bytes

_CACHE_LIMIT: Final = 65536


class Nexthop(NamedTuple):
    """Where to send: ``ip`` None means "directly connected, ARP for the destination"."""

    ip: int | None
    port: int


def ip_to_int(ip: object) -> int:
    """``IPv4Address`` (or anything ``int()`` accepts) -> int."""
    return int(ip)  # type: ignore[call-overload, no-any-return]


class RouteTable:
    """Connected + static routes; lookups are cached per destination address.

    ``version`` changes whenever a lookup may answer differently (:meth:`set_down`): a cache
    built from lookups (the switch's adjacencies) is valid while it stays the same.
    """

    def __init__(self, config: SwitchConfig, port_index: dict[str, int]) -> None:
        table: dict[tuple[int, int], tuple[Nexthop, ...]] = {}
        for route in config.routes:
            hops = []
            for nh in route.nexthops:
                port_name = nh.port or config.connected_port(nh.ip)
                assert port_name is not None  # validated by SwitchConfig
                hops.append(Nexthop(ip_to_int(nh.ip), port_index[port_name]))
            table[(ip_to_int(route.prefix.network_address), route.prefix.prefixlen)] = tuple(hops)
        # Connected subnets win over a static route to the same prefix (distance 0).
        for port in config.ports:
            net = port.ipv4.network
            table[(ip_to_int(net.network_address), net.prefixlen)] = (
                Nexthop(None, port_index[port.ifname]),
            )
        self._table = table
        self._levels: list[tuple[int, dict[int, tuple[Nexthop, ...]]]] = []
        self._cache: dict[int, tuple[Nexthop, ...] | None] = {}
        self.version = 0
        self.set_down(frozenset())

    def set_down(self, down: frozenset[int]) -> None:
        """Recompile without next hops over the ``down`` ports (ECMP local repair); a route
        left without any next hop is gone, so its destinations count as no route."""
        by_len: dict[int, dict[int, tuple[Nexthop, ...]]] = {}
        for (network, plen), hops in self._table.items():
            alive = tuple(h for h in hops if h.port not in down)
            if alive:
                by_len.setdefault(plen, {})[network] = alive
        self._levels = [
            (((0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF), entries)
            for plen, entries in sorted(by_len.items(), reverse=True)
        ]
        self._cache = {}
        self.version += 1

    def lookup(self, dst: int) -> tuple[Nexthop, ...] | None:
        """Next hops of the longest matching prefix for ``dst`` (None = no route)."""
        try:
            return self._cache[dst]
        except KeyError:
            pass
        result = None
        for mask, entries in self._levels:
            hops = entries.get(dst & mask)
            if hops is not None:
                result = hops
                break
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[dst] = result
        return result


def ecmp_index(frame: bytes | bytearray, ihl: int, count: int) -> int:
    """Deterministic 5-tuple hash (src/dst IP, protocol, L4 ports) -> member index.

    RoCEv2 puts its entropy in the UDP source port, so different source ports of the same
    host pair spread over the members.  Fragments (any of them, so that all fragments of
    one datagram take the same path) and non-TCP/UDP hash on the 3-tuple.
    """
    proto = frame[23]
    key = bytes(frame[26:34]) + bytes((proto,))
    is_fragment = (frame[20] & 0x3F) or frame[21]  # MF flag or a fragment offset
    if proto in (IP_PROTO_UDP, IP_PROTO_TCP) and not is_fragment:
        l4 = 14 + ihl
        key += bytes(frame[l4 : l4 + 4])
    return zlib.crc32(key) % count


class NeighborTable:
    """IPv4 -> (MAC, port); static entries from config, others learned from ARP.

    ``version`` changes with every entry that :meth:`learn` adds or changes (so change
    ``entries`` only through it: the switch remembers adjacencies built from them).
    """

    def __init__(self, config: SwitchConfig, port_index: dict[str, int]) -> None:
        self.entries: dict[int, tuple[bytes, int]] = {}
        self._static: set[int] = set()
        self.version = 0
        for nb in config.neighbors:
            ip = ip_to_int(nb.ip)
            self.entries[ip] = (mac_to_bytes(nb.mac), port_index[nb.port])
            self._static.add(ip)

    def learn(self, ip: int, mac: bytes, port: int) -> bool:
        """Record a dynamic entry (never overrides a static one); True if it is new/changed."""
        if ip in self._static:
            return False
        entry = (bytes(mac), port)
        if self.entries.get(ip) == entry:
            return False
        self.entries[ip] = entry
        self.version += 1
        return True
