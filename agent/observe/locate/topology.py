"""The fabric as locate sees it: directed links between (device, port) ends, named the way
``lab fault`` and the probe paths name them, built from the fabric intent."""

from __future__ import annotations

from dataclasses import dataclass

from agent.intent.model import FabricIntent


@dataclass(frozen=True)
class DirectedLink:
    """One direction of a cable: frames leave ``tx`` and arrive at ``rx``."""

    name: str
    tx: tuple[str, str]  # (device, port)
    rx: tuple[str, str]
    tx_host: bool
    rx_host: bool

    @property
    def cable(self) -> str:
        """Both directions' common name: ``leaf1:Ethernet1<>spine1:Ethernet1``."""
        a, b = sorted((f"{self.tx[0]}:{self.tx[1]}", f"{self.rx[0]}:{self.rx[1]}"))
        return f"{a}<>{b}"


def link_name(device: str, port: str, peer: str, from_host: bool) -> str:
    """``leaf1:Ethernet1>spine1`` (a switch port's egress) or ``h1>leaf1`` (a host's)."""
    return f"{device}>{peer}" if from_host else f"{device}:{port}>{peer}"


@dataclass(frozen=True)
class Topology:
    """Every directed link of the fabric by name, and which devices are hosts."""

    links: dict[str, DirectedLink]
    hosts: frozenset[str]

    @classmethod
    def from_intent(cls, intent: FabricIntent) -> Topology:
        roles = {d.name: d.role for d in intent.devices}
        links: dict[str, DirectedLink] = {}
        for device in intent.devices:
            for port in device.ports:
                if port.peer is None:
                    continue
                peer, _, peer_port = port.peer.partition(":")
                if peer not in roles:
                    continue  # a peer outside the fabric file: nothing to probe through it
                from_host = device.role == "host"
                name = link_name(device.name, port.name, peer, from_host)
                links[name] = DirectedLink(
                    name,
                    (device.name, port.name),
                    (peer, peer_port),
                    from_host,
                    roles[peer] == "host",
                )
        hosts = frozenset(n for n, role in roles.items() if role == "host")
        return cls(links, hosts)

    def into(self, device: str, port: str) -> DirectedLink | None:
        """The direction that arrives at ``device:port``."""
        return next((link for link in self.links.values() if link.rx == (device, port)), None)

    def out_of(self, device: str, port: str) -> DirectedLink | None:
        return next((link for link in self.links.values() if link.tx == (device, port)), None)
