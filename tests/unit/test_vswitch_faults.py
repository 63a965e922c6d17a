"""lab.vswitch faults, link state, per-port trust and ICMP time exceeded without root: the
validation of fault requests, the frame builders, the route table's local repair, a switch
driven in-process over socket pairs, and the management plane's views of it."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from lab.mgmt.eos.cli import CliSession
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.switch import PortInfo, SwitchManager
from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config
from lab.vswitch import packet as pkt
from lab.vswitch.commands import counters_snapshot, handle_request
from lab.vswitch.config import ConfigError, QosConfig, parse_config, parse_faults
from lab.vswitch.dataplane import Switch
from lab.vswitch.forwarding import Nexthop, RouteTable, ecmp_index
from tests.unit.vswitch_wires import Clock, Wires

PORTS = ["eth1", "eth2", "eth3"]


# ----------------------------------------------------------------------------- validation

GOOD_FAULTS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (
        {"kind": "drop", "port": "eth1", "direction": "rx", "percent": 5},
        {"kind": "drop", "port": "eth1", "direction": "rx", "percent": 5.0, "seed": 1},
    ),
    (
        {"kind": "drop", "port": "eth1", "direction": "tx", "percent": 100, "seed": 9},
        {"kind": "drop", "port": "eth1", "direction": "tx", "percent": 100.0, "seed": 9},
    ),
    (
        {"kind": "fcs_error", "port": "eth2", "percent": 0.5},
        {"kind": "fcs_error", "port": "eth2", "percent": 0.5, "seed": 1},
    ),
    (
        {"kind": "icrc_error", "port": "eth3", "percent": 1},
        {"kind": "icrc_error", "port": "eth3", "percent": 1.0, "seed": 1},
    ),
    (
        {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0},
        {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0},
    ),
    ({"kind": "ignore_pfc", "port": "eth2"}, {"kind": "ignore_pfc", "port": "eth2"}),
    (
        {"kind": "delay", "port": "eth3", "ms": 1000},
        {"kind": "delay", "port": "eth3", "ms": 1000.0},
    ),
]


@pytest.mark.parametrize(("fault", "normalised"), GOOD_FAULTS)
def test_good_faults_are_normalised(fault: dict[str, Any], normalised: dict[str, Any]) -> None:
    (parsed,) = parse_faults([fault], PORTS)
    assert parsed.model_dump(mode="json") == normalised


BAD_FAULTS: list[tuple[Any, str]] = [
    ([{"kind": "drop", "port": "eth1", "direction": "rx", "percent": 0}], "faults[0].percent:"),
    ([{"kind": "drop", "port": "eth1", "direction": "rx", "percent": -3}], "faults[0].percent:"),
    ([{"kind": "fcs_error", "port": "eth1", "percent": 100.5}], "faults[0].percent:"),
    ([{"kind": "fcs_error", "port": "eth1", "percent": "5"}], "faults[0].percent:"),
    ([{"kind": "fcs_error", "port": "eth1", "percent": True}], "faults[0].percent:"),
    ([{"kind": "fcs_error", "port": "eth1"}], "faults[0].percent: Field required"),
    ([{"kind": "drop", "port": "eth1", "percent": 5}], "faults[0].direction: Field required"),
    ([{"kind": "drop", "port": "eth1", "direction": "both", "percent": 5}], "faults[0].direction"),
    (
        [{"kind": "ignore_pfc", "port": "eth1"}, {"kind": "ignore_pfc", "port": "eth7"}],
        "faults[1].port: unknown port 'eth7'",
    ),
    ([{"kind": "ignore_pfc"}], "faults[0].port: Field required"),
    ([{"kind": "flap", "port": "eth1"}], "faults[0].kind: unknown fault kind 'flap'"),
    ([{"port": "eth1"}], "faults[0].kind: missing"),
    ([{"kind": "classify", "port": "eth1", "dscp": 64, "tc": 1}], "faults[0].dscp:"),
    ([{"kind": "classify", "port": "eth1", "dscp": 1, "tc": -1}], "faults[0].tc:"),
    ([{"kind": "delay", "port": "eth1", "ms": 0}], "faults[0].ms:"),
    ([{"kind": "delay", "port": "eth1", "ms": 1000.1}], "faults[0].ms:"),
    ([{"kind": "delay", "port": "eth1", "ms": 5, "jitter": 1}], "faults[0].jitter: Extra"),
    ([{"kind": "icrc_error", "port": "eth1", "percent": 5, "seed": 1.5}], "faults[0].seed:"),
    (
        [
            {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0},
            {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 1},
        ],
        "faults[1]: same classify fault as faults[0] on eth1",
    ),
    ([[1, 2]], "faults[0]:"),
    ({"kind": "delay"}, "faults: Input should be a valid list"),
]


@pytest.mark.parametrize(("faults", "message"), BAD_FAULTS)
def test_bad_faults_name_the_field(faults: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_faults(faults, PORTS)
    assert str(info.value).startswith(message), str(info.value)


def test_distinct_faults_may_share_a_port() -> None:
    faults = parse_faults(
        [
            {"kind": "drop", "port": "eth1", "direction": "rx", "percent": 5},
            {"kind": "drop", "port": "eth1", "direction": "tx", "percent": 5},
            {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0},
            {"kind": "classify", "port": "eth1", "dscp": 48, "tc": 0},
            {"kind": "delay", "port": "eth1", "ms": 3},
        ],
        PORTS,
    )
    assert len(faults) == 5


# ----------------------------------------------------------------------------- trust


@pytest.mark.parametrize(
    ("qos", "port", "tc_of_26", "tc_of_0"),
    [
        ({"dscp_to_tc": {"26": 3}}, "eth1", 3, 0),
        ({"dscp_to_tc": {"26": 3}, "ports": {"eth1": {"trust": "cos"}}}, "eth1", 1, 1),
        ({"dscp_to_tc": {"26": 3}, "ports": {"eth1": {"trust": "cos"}}}, "eth2", 3, 0),
        ({"dscp_to_tc": {"26": 3}, "ports": {"eth1": {"trust": "none"}}}, "eth1", 0, 0),
        ({"trust": "none", "dscp_to_tc": {"26": 3}}, "eth1", 0, 0),
        ({"trust": "none", "ports": {"eth1": {"trust": "dscp"}}}, "eth1", 3, 0),
    ],
)
def test_per_port_trust_classification(
    qos: dict[str, Any], port: str, tc_of_26: int, tc_of_0: int
) -> None:
    classes = QosConfig.model_validate(qos).port_classes(port)
    assert (classes[26], classes[0]) == (tc_of_26, tc_of_0)


# ----------------------------------------------------------------------------- frames


def _udp(dport: int, payload: bytes, checksum: bool = True, frag: int = 0x4000) -> bytearray:
    src, dst = socket.inet_aton("198.18.1.2"), socket.inet_aton("198.18.2.2")
    udp_len = 8 + len(payload)
    udp = struct.pack("!HHHH", 49321, dport, udp_len, 0) + payload
    if checksum:
        pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
        udp = udp[:6] + struct.pack("!H", pkt.checksum(pseudo + udp) or 0xFFFF) + udp[8:]
    ip = bytearray(
        struct.pack("!BBHHHBBH4s4s", 0x45, 26 << 2, 20 + udp_len, 7, frag, 1, 17, 0, src, dst)
    )
    struct.pack_into("!H", ip, 10, pkt.checksum(ip))
    return bytearray(b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x01\x01\x08\x00" + ip + udp)


def _udp_ok(frame: bytearray) -> bool:
    udp_len = struct.unpack_from("!H", frame, 38)[0]
    pseudo = bytes(frame[26:34]) + struct.pack("!BBH", 0, 17, udp_len)
    return pkt.checksum(pseudo + bytes(frame[34 : 34 + udp_len])) == 0


BTH = bytes(range(12))


@pytest.mark.parametrize(
    ("payload", "checksum", "flipped"),
    [
        (BTH + b"data" + b"ICRC", True, 34 + 8 + 12),  # first payload byte
        (BTH + b"data" + b"ICRC", False, 34 + 8 + 12),  # RoCE's usual zero UDP checksum
        (BTH + b"ICRC", True, 34 + 8 + 11),  # no payload: the last BTH byte
    ],
)
def test_corrupt_roce_flips_one_byte_and_keeps_udp_valid(
    payload: bytes, checksum: bool, flipped: int
) -> None:
    frame = _udp(4791, payload, checksum)
    before = bytes(frame)
    assert pkt.corrupt_roce(frame)
    changed = {i for i in range(len(frame)) if frame[i] != before[i]}
    assert flipped in changed and frame[flipped] == before[flipped] ^ 0xFF
    assert changed - {flipped} <= ({40, 41} if checksum else set())
    assert frame[14:34] == before[14:34]
    if checksum:
        assert _udp_ok(frame)
    else:
        assert frame[40:42] == b"\x00\x00"


@pytest.mark.parametrize(
    "frame",
    [
        _udp(5000, BTH + b"data" + b"ICRC"),  # not RoCE
        _udp(4791, b"short"),  # too short for a BTH + ICRC
        _udp(4791, BTH + b"data" + b"ICRC", frag=0x2000),  # first fragment (MF)
        _udp(4791, BTH + b"data" + b"ICRC", frag=0x0010),  # a later fragment
        bytearray(pkt.build_pfc_single(b"\x02" * 6, 3, 100)),
    ],
)
def test_corrupt_roce_leaves_other_frames_alone(frame: bytearray) -> None:
    before = bytes(frame)
    assert not pkt.corrupt_roce(frame)
    assert bytes(frame) == before


@pytest.mark.parametrize("payload_len", [0, 30, 64, 200])
def test_icmp_time_exceeded_quotes_header_and_64_bytes(payload_len: int) -> None:
    original = _udp(4791, bytes(range(256))[:payload_len])
    reply = pkt.build_icmp_time_exceeded(
        original, socket.inet_aton("198.18.1.1"), b"\x02" * 6, b"\x04" * 6
    )
    assert reply[0:6] == b"\x04" * 6 and reply[6:12] == b"\x02" * 6
    ip = reply[14:34]
    assert pkt.checksum(ip) == 0 and ip[8] == 64 and ip[1] == 0 and ip[9] == 1
    assert socket.inet_ntoa(ip[12:16]) == "198.18.1.1"
    assert socket.inet_ntoa(ip[16:20]) == "198.18.1.2"
    total = struct.unpack_from("!H", ip, 2)[0]
    icmp = reply[34 : 14 + total]
    assert icmp[0] == 11 and icmp[1] == 0 and pkt.checksum(icmp) == 0
    quote = icmp[8:]
    assert quote == bytes(original[14 : 14 + 20 + min(64, 8 + payload_len)])


# ----------------------------------------------------------------------------- routes


def test_route_table_local_repair() -> None:
    config = parse_config(
        {
            **fake_switch_config("leaf1", PORTS),
            "routes": [
                {
                    "prefix": "10.9.0.0/16",
                    "nexthops": [
                        {"ip": "198.18.1.9", "port": "eth1"},
                        {"ip": "198.18.2.9", "port": "eth2"},
                    ],
                }
            ],
        }
    )
    table = RouteTable(config, {name: i for i, name in enumerate(PORTS)})
    dst = int.from_bytes(socket.inet_aton("10.9.1.1"), "big")
    assert table.lookup(dst) is not None and len(table.lookup(dst) or ()) == 2
    table.set_down(frozenset({0}))
    assert table.lookup(dst) == (Nexthop(int.from_bytes(socket.inet_aton("198.18.2.9"), "big"), 1),)
    table.set_down(frozenset({0, 1}))
    assert table.lookup(dst) is None
    table.set_down(frozenset())
    assert len(table.lookup(dst) or ()) == 2


# ----------------------------------------------------------------------------- in-process switch


@pytest.fixture
def wired() -> Iterator[tuple[Switch, Wires, Clock]]:
    wires = Wires()
    clock = Clock()
    config = fake_switch_config("leaf1", PORTS)
    config["qos"] = {"dscp_to_tc": {"26": 3}}
    switch = Switch(
        parse_config(config), open_socket=wires.open, clock=clock, link_probe=wires.probe
    )
    try:
        yield switch, wires, clock
    finally:
        switch.close()
        wires.close()


def test_set_faults_refused_changes_nothing(wired: tuple[Switch, Wires, Clock]) -> None:
    switch, _, _ = wired
    good = [{"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0}]
    assert handle_request(switch, {"cmd": "set_faults", "faults": good})["ok"] is True
    assert switch.ports[0].tc_of_dscp[26] == 0
    bad = [*good, {"kind": "delay", "port": "eth2", "ms": -1}]
    response = handle_request(switch, {"cmd": "set_faults", "faults": bad})
    assert response == {"ok": False, "error": response["error"]}
    assert response["error"].startswith("faults[1].ms:")
    assert handle_request(switch, {"cmd": "get_faults"})["faults"] == [
        {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0}
    ]
    assert switch.ports[1].delay_s == 0.0 and not switch.ports[1].tx_faulty


def test_classify_fault_survives_a_qos_change_and_hides_from_the_config(
    wired: tuple[Switch, Wires, Clock],
) -> None:
    switch, _, _ = wired
    switch.set_faults([{"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0}])
    config_before = handle_request(switch, {"cmd": "get_config"})["config"]
    assert config_before["qos"]["dscp_to_tc"] == {"26": 3}
    response = handle_request(switch, {"cmd": "set_qos", "qos": {"dscp_to_tc": {"26": 5}}})
    assert response["ok"] is True
    assert switch.ports[0].tc_of_dscp[26] == 0  # the "ASIC" still disagrees
    assert switch.ports[1].tc_of_dscp[26] == 5
    switch.set_faults([])
    assert switch.ports[0].tc_of_dscp[26] == 5


def test_only_faulty_ports_take_the_slow_path(wired: tuple[Switch, Wires, Clock]) -> None:
    switch, _, _ = wired
    switch.set_faults(
        [
            {"kind": "fcs_error", "port": "eth1", "percent": 1},
            {"kind": "delay", "port": "eth2", "ms": 1},
        ]
    )
    flags = [(p.rx_faulty, p.tx_faulty, p.ignore_pfc) for p in switch.ports]
    assert flags == [(True, False, False), (False, True, False), (False, False, False)]
    switch.set_faults([{"kind": "ignore_pfc", "port": "eth3"}])
    flags = [(p.rx_faulty, p.tx_faulty, p.ignore_pfc) for p in switch.ports]
    assert flags == [(False, False, False), (False, False, False), (False, False, True)]


def _to_eth2(switch: Switch, ttl: int = 64) -> bytearray:
    frame = _udp(4791, BTH + b"data" + b"ICRC")
    frame[0:6] = switch.ports[0].mac
    frame[22] = ttl
    frame[24:26] = b"\x00\x00"
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    return frame


def _deliver(switch: Switch, wires: Wires, ifname: str, frames: list[bytearray]) -> None:
    for frame in frames:
        wires.peer[ifname].send(bytes(frame))
    port = next(p for p in switch.ports if p.name == ifname)
    switch._receive(port)
    for p in switch.ports:
        switch._transmit(p, switch.clock.now())


def _neighbors(switch: Switch) -> None:
    for i, port in enumerate(switch.ports):
        ip = port.ip + 1
        switch.neighbors.learn(ip, bytes([2, 0, 0, 0, 9, i]), port.index)


def test_link_down_withdraws_routes_and_counts_no_route(
    wired: tuple[Switch, Wires, Clock],
) -> None:
    switch, wires, clock = wired
    _neighbors(switch)
    frame = _to_eth2(switch)
    frame[30:34] = (switch.ports[1].ip + 1).to_bytes(4, "big")
    struct.pack_into("!H", frame, 24, 0)
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    _deliver(switch, wires, "eth1", [frame])
    assert len(wires.received("eth2")) == 1
    wires.link["eth2"] = False
    clock.t += 0.2
    switch._run_timers(clock.t)
    snapshot = counters_snapshot(switch)
    assert snapshot["ports"]["eth2"]["oper_up"] is False
    assert snapshot["ports"]["eth1"]["oper_up"] is True
    _deliver(switch, wires, "eth1", [frame])
    assert wires.received("eth2") == []
    assert counters_snapshot(switch)["ports"]["eth1"]["drops"]["no_route"] == 1
    wires.link["eth2"] = True
    clock.t += 0.2
    switch._run_timers(clock.t)
    _deliver(switch, wires, "eth1", [frame])
    assert len(wires.received("eth2")) == 1


def test_link_down_flushes_what_was_queued(wired: tuple[Switch, Wires, Clock]) -> None:
    switch, wires, clock = wired
    _neighbors(switch)
    frame = _to_eth2(switch)
    frame[30:34] = (switch.ports[1].ip + 1).to_bytes(4, "big")
    struct.pack_into("!H", frame, 24, 0)
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    for _ in range(5):
        wires.peer["eth1"].send(bytes(frame))
    switch._receive(switch.ports[0])  # queued on eth2, not yet sent
    eth1, eth2 = switch.ports[0], switch.ports[1]
    assert eth2.backlog == 5 and sum(eth1.ingress.buffered_bytes) > 0
    wires.link["eth2"] = False
    clock.t += 0.2
    switch._run_timers(clock.t)
    assert eth2.backlog == 0 and not any(q.packets for q in eth2.queues)
    assert sum(eth1.ingress.buffered_bytes) == 0  # the ingress charge went with them
    switch._transmit(eth2, clock.t)
    assert wires.received("eth2") == []


def test_ttl_expiry_answers_from_the_ingress_port(wired: tuple[Switch, Wires, Clock]) -> None:
    switch, wires, clock = wired
    _neighbors(switch)
    frame = _to_eth2(switch, ttl=1)
    frame[26:30] = (switch.ports[0].ip + 1).to_bytes(4, "big")
    struct.pack_into("!H", frame, 24, 0)
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    _deliver(switch, wires, "eth1", [frame])
    (reply,) = wires.received("eth1")
    assert reply[26:30] == switch.ports[0].ip_bytes and reply[34] == 11
    assert wires.received("eth2") == []
    counters = counters_snapshot(switch)["ports"]["eth1"]
    assert counters["drops"]["ttl"] == 1 and counters["icmp_time_exceeded"] == 1
    # The bucket holds 200: a burst of 300 at one instant gets 199 more answers.
    for _ in range(30):  # a unix datagram pair queues only a few frames at a time
        for _ in range(10):
            wires.peer["eth1"].send(bytes(frame))
        switch._receive(switch.ports[0])
    counters = counters_snapshot(switch)["ports"]["eth1"]
    assert counters["drops"]["ttl"] == 301
    assert counters["icmp_time_exceeded"] == 200 and counters["icmp_rate_limited"] == 101
    clock.t += 0.0105  # 10.5 ms refill 10.5 tokens
    for _ in range(2):
        for _ in range(10):
            wires.peer["eth1"].send(bytes(frame))
        switch._receive(switch.ports[0])
    counters = counters_snapshot(switch)["ports"]["eth1"]
    assert counters["icmp_time_exceeded"] == 210 and counters["icmp_rate_limited"] == 111


def _to_host(switch: Switch, port: int, ttl: int = 64, sport: int = 49321) -> bytearray:
    """A UDP frame into eth1 for the host at ``.2`` behind ``port`` (index)."""
    frame = _to_eth2(switch, ttl)
    frame[30:34] = (switch.ports[port].ip + 1).to_bytes(4, "big")
    frame[34:36] = sport.to_bytes(2, "big")
    struct.pack_into("!H", frame, 24, 0)
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    return frame


def _forward(
    switch: Switch, wires: Wires, clock: Clock, frames: list[bytearray]
) -> dict[str, list[bytes]]:
    """Each frame into eth1 on its own, 10 ms apart (the shaper lets it out at once); what
    every port sent."""
    sent: dict[str, list[bytes]] = {name: [] for name in PORTS}
    for frame in frames:
        clock.t += 0.01
        _deliver(switch, wires, "eth1", [frame])
        for name in PORTS:
            sent[name] += wires.received(name)
    return sent


def test_a_neighbor_that_moved_gets_the_next_frame(wired: tuple[Switch, Wires, Clock]) -> None:
    """Forwarding remembers where a destination goes; a MAC learned anew replaces it at once."""
    switch, wires, clock = wired
    _neighbors(switch)
    frame = _to_host(switch, 1)
    received = _forward(switch, wires, clock, [frame, frame])["eth2"]
    assert [f[0:6] for f in received] == [bytes([2, 0, 0, 0, 9, 1])] * 2
    assert switch.neighbors.learn(switch.ports[1].ip + 1, bytes([2, 0, 0, 0, 7, 7]), 1)
    (moved,) = _forward(switch, wires, clock, [frame])["eth2"]
    assert moved[0:6] == bytes([2, 0, 0, 0, 7, 7]) and moved[6:12] == switch.ports[1].mac
    assert moved[22] == 63 and pkt.checksum(moved[14:34]) == 0


def test_an_expired_frame_to_a_known_destination_is_answered(
    wired: tuple[Switch, Wires, Clock],
) -> None:
    switch, wires, clock = wired
    _neighbors(switch)
    assert len(_forward(switch, wires, clock, [_to_host(switch, 1)])["eth2"]) == 1
    frame = _to_host(switch, 1, ttl=1)
    frame[26:30] = (switch.ports[0].ip + 1).to_bytes(4, "big")
    struct.pack_into("!H", frame, 24, 0)
    struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
    sent = _forward(switch, wires, clock, [frame])
    assert sent["eth2"] == []
    (reply,) = sent["eth1"]
    assert reply[34] == 11 and counters_snapshot(switch)["ports"]["eth1"]["drops"]["ttl"] == 1


def test_ecmp_spreads_frames_to_one_destination_over_its_next_hops() -> None:
    """Each frame is hashed on its own 5-tuple: remembering one path per destination would
    send every flow to the same next hop."""
    wires, clock = Wires(), Clock()
    config = fake_switch_config("leaf1", PORTS)
    config["routes"] = [
        {"prefix": "10.9.0.0/16", "nexthops": [{"ip": "198.18.2.2"}, {"ip": "198.18.3.2"}]}
    ]
    switch = Switch(
        parse_config(config), open_socket=wires.open, clock=clock, link_probe=wires.probe
    )
    try:
        _neighbors(switch)
        frames = []
        for sport in range(49152, 49152 + 16):
            frame = _to_host(switch, 1, sport=sport)
            frame[30:34] = socket.inet_aton("10.9.1.1")
            struct.pack_into("!H", frame, 24, 0)
            struct.pack_into("!H", frame, 24, pkt.checksum(frame[14:34]))
            frames.append(frame)
        sent = _forward(switch, wires, clock, frames)
        eth2, eth3 = sent["eth2"], sent["eth3"]
        assert len(eth2) + len(eth3) == 16 and eth2 and eth3
        hashed = {
            int.from_bytes(f[34:36], "big"): ecmp_index(f, 20, 2) for f in frames
        }  # the switch's own hash decides, frame by frame
        assert sorted(int.from_bytes(f[34:36], "big") for f in eth3) == sorted(
            sport for sport, member in hashed.items() if member == 1
        )
    finally:
        switch.close()
        wires.close()


# ----------------------------------------------------------------------------- management plane


def _cli_with(counters: dict[str, Any]) -> tuple[CliSession, FakeDataplane, EosPersonality]:
    dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2"]))
    dataplane.counters_snapshot = counters
    ports = [PortInfo(name, 10_000_000) for name in ("Ethernet1", "Ethernet2")]
    eos = EosPersonality(SwitchManager("leaf1", ports, dataplane, FakeClock()))
    return CliSession(eos, "admin", "vty1"), dataplane, eos


COUNTERS = {
    "ports": {
        "eth1": {"oper_up": True, "rx_fcs_errors": 7, "rx_errors": 7, "fault_drops": 99},
        "eth2": {"oper_up": False, "rx_fcs_errors": 0, "rx_errors": 0, "fault_corrupted": 5},
    }
}


def test_show_interfaces_status_shows_link_state() -> None:
    async def scenario() -> None:
        cli, _, eos = _cli_with(COUNTERS)
        await eos.start()
        data = json.loads(await cli.execute("show interfaces status | json"))
        statuses = data["interfaceStatuses"]
        assert statuses["Ethernet1"]["linkStatus"] == "connected"
        assert statuses["Ethernet1"]["lineProtocolStatus"] == "up"
        assert statuses["Ethernet2"]["linkStatus"] == "notconnect"
        assert statuses["Ethernet2"]["lineProtocolStatus"] == "down"
        text = await cli.execute("show interfaces status")
        rows = {line.split()[0]: line.split()[1] for line in text.splitlines()[2:]}
        assert rows == {"Et1": "connected", "Et2": "notconnect"}

    asyncio.run(scenario())


def test_show_interfaces_counters_errors_eos_shape() -> None:
    async def scenario() -> None:
        cli, _, eos = _cli_with(COUNTERS)
        await eos.start()
        data = json.loads(await cli.execute("show interfaces counters errors | json"))
        assert data == {
            "interfaceErrorCounters": {
                "Ethernet1": {
                    "inErrors": 7,
                    "frameTooLongs": 0,
                    "outErrors": 0,
                    "frameTooShorts": 0,
                    "fcsErrors": 7,
                    "alignmentErrors": 0,
                    "symbolErrors": 0,
                },
                "Ethernet2": {
                    "inErrors": 0,
                    "frameTooLongs": 0,
                    "outErrors": 0,
                    "frameTooShorts": 0,
                    "fcsErrors": 0,
                    "alignmentErrors": 0,
                    "symbolErrors": 0,
                },
            }
        }
        text = await cli.execute("show interfaces Ethernet1 counters errors")
        lines = text.splitlines()
        assert lines[0].split() == ["Port", "FCS", "Align", "Symbol", "Rx", "Runts", "Giants", "Tx"]
        assert lines[2].split() == ["Et1", "7", "0", "0", "7", "0", "0", "0"]
        assert len(lines) == 3
        # Lab-only fault counters never reach the management plane.
        for command in ("show interfaces counters errors | json", "show interfaces status | json"):
            output = await cli.execute(command)
            assert "fault" not in output and "99" not in output

    asyncio.run(scenario())


def test_interface_trust_cos_reaches_the_data_plane_and_the_shows() -> None:
    async def scenario() -> None:
        cli, dataplane, eos = _cli_with(COUNTERS)
        await eos.start()
        await cli.execute("configure terminal")
        await cli.execute("interface Ethernet2")
        assert await cli.execute("qos trust cos") == ""
        await cli.execute("end")
        assert dataplane.set_qos_calls[-1]["ports"]["eth2"]["trust"] == "cos"
        assert dataplane.config["qos"]["ports"]["eth2"]["trust"] == "cos"
        running = await cli.execute("show running-config")
        assert "interface Ethernet2\n   qos trust cos" in running
        qos = json.loads(await cli.execute("show qos interfaces | json"))["intfQosDetailed"]
        assert qos["Ethernet2"]["trustMode"] == "COS"
        assert qos["Ethernet1"]["trustMode"] == "DSCP"

    asyncio.run(scenario())
