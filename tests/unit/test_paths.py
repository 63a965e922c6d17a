"""agent.observe.probes.paths without a fabric: ICMP answers recorded from real routers, probe
frames
checked with scapy, answers mapped onto the lab's leaf-spine intent, discovery with a fake
tracer. The lab test (tests/lab/test_paths_lab.py) traces the real switches."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import Any

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.observe.probes import worker
from agent.observe.probes.hops import HopCount, HopSpec, changed_on_the_way, probe_hops
from agent.observe.probes.packets import Flow, RoceTemplate, icrc_ok
from agent.observe.probes.paths import (
    BASE_SPORT,
    Hop,
    Path,
    PathError,
    _Fabric,
    discover,
    pingmesh_pairs,
    trace_many,
)
from agent.observe.probes.runner import ProbeHandle, Runner
from agent.observe.probes.scenarios import BASE_SPORT as SCENARIO_BASE_SPORT
from agent.observe.probes.traceroute import TraceSpec
from agent.observe.probes.ttl_probes import TRACE_QPN, IcmpAnswer, parse_icmp, trace_frame

FABRIC = (
    FilePath(__file__).resolve().parents[1] / "data/platforms/arista_eos/lab-leafspine-fabric.yml"
)

# Recorded with a raw ICMP socket on a host behind a Linux 6.x router (net.ipv4.ip_forward=1)
# while `python -m agent.observe.probes.worker trace` sent a probe (198.18.100.1 -> .3, sport
# 49200):
# the router's time exceeded for TTL 1 (Linux quotes the whole probe, TOS 0xca), then the
# destination host's port unreachable for TTL 2.
LINUX_TIME_EXCEEDED = bytes.fromhex(
    "45ca00600427000040012186c6126400c61264010b00649000000000456a00440100400001112416c6126401"
    "c6126403c03012b7003000000400ffff0000ffff800000005246413100000000000000000000000000000000"
    "00000000c380e25e"
)
LINUX_PORT_UNREACHABLE = bytes.fromhex(
    "45ca0060bedf00003f0167cac6126403c61264010303177d00000000456a00440200400001112316c6126401"
    "c6126403c03012b7003000000400ffff0000ffff800000005246413100000000000000000000000000000000"
    "000000001315e7da"
)

# Recorded the same way on the leaf-spine lab (h1 -> h3, sport 49200, TTL 1, 2, 3): leaf1,
# spine1 and leaf2 answer from the port the probe arrived on (contract C4: TTL 64, DSCP 0,
# the probe's IP header and 64 bytes of it quoted).
LAB_ANSWERS = tuple(
    bytes.fromhex(text)
    for text in (
        "45000060000000004001ee67c6120008c61200090b00aa5900000000456a0044010040000111ec04c6120009"
        "c612000dc03012b7003000000400ffff0000ffff800000005246413100000000000000000000000000000000"
        "00000000ae25b1f0",
        "45000060000000003f01ef6fc6120000c61200090b00d74a00000000456a0044020040000111eb04c6120009"
        "c612000dc03012b7003000000400ffff0000ffff800000005246413100000000000000000000000000000000"
        "000000007eb0b474",
        "45000060000000003e01f06cc6120003c61200090b00b17200000000456a0044030040000111ea04c6120009"
        "c612000dc03012b7003000000400ffff0000ffff800000005246413100000000000000000000000000000000"
        "00000000f13e67be",
    )
)


def rfc792_reply() -> bytes:
    """A router that quotes only the IP header and 8 bytes (RFC 792's minimum)."""
    quoted = LINUX_TIME_EXCEEDED[28 : 28 + 20 + 8]
    return bytes(IP(src="198.18.0.0", dst="198.18.100.1") / ICMP(type=11, code=0) / Raw(quoted))


@pytest.fixture(scope="module")
def intent() -> FabricIntent:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    return load_fabric(FABRIC).intent


def test_base_sport_is_the_pairwise_probes() -> None:
    assert BASE_SPORT == SCENARIO_BASE_SPORT


# --------------------------------------------------------------------------- ICMP


@pytest.mark.parametrize(
    ("packet", "expected"),
    [
        (LINUX_TIME_EXCEEDED, IcmpAnswer("198.18.100.0", 11, 0, "198.18.100.1", "198.18.100.3",
                                         0x0100, 49200, 4791)),
        (LINUX_PORT_UNREACHABLE, IcmpAnswer("198.18.100.3", 3, 3, "198.18.100.1",
                                            "198.18.100.3", 0x0200, 49200, 4791)),
        (rfc792_reply(), IcmpAnswer("198.18.0.0", 11, 0, "198.18.100.1", "198.18.100.3",
                                    0x0100, 49200, 4791)),
    ],
    ids=["linux-time-exceeded", "linux-port-unreachable", "rfc792-8-bytes"],
)  # fmt: skip
def test_parse_icmp_reads_recorded_answers(packet: bytes, expected: IcmpAnswer) -> None:
    assert parse_icmp(packet) == expected


def _patched(packet: bytes, offset: int, value: int) -> bytes:
    out = bytearray(packet)
    out[offset] = value
    return bytes(out)


@pytest.mark.parametrize(
    "packet",
    [
        b"",
        LINUX_TIME_EXCEEDED[:19],  # shorter than an IP header
        LINUX_TIME_EXCEEDED[:27],  # ICMP header cut
        LINUX_TIME_EXCEEDED[:47],  # quoted IP header cut
        LINUX_TIME_EXCEEDED[:51],  # quoted UDP ports cut
        _patched(LINUX_TIME_EXCEEDED, 0, 0x65),  # not IPv4
        _patched(LINUX_TIME_EXCEEDED, 0, 0x44),  # IHL below 5
        _patched(LINUX_TIME_EXCEEDED, 9, 17),  # not ICMP
        _patched(LINUX_TIME_EXCEEDED, 20, 0),  # echo reply
        _patched(LINUX_TIME_EXCEEDED, 20, 5),  # redirect
        _patched(LINUX_TIME_EXCEEDED, 28, 0x65),  # quoted packet not IPv4
        _patched(LINUX_TIME_EXCEEDED, 37, 6),  # quoted TCP
    ],
)
def test_parse_icmp_ignores_what_is_not_an_answer(packet: bytes) -> None:
    assert parse_icmp(packet) is None


def test_recorded_lab_answers_map_to_the_path_leaf1_spine1_leaf2(intent: FabricIntent) -> None:
    answers = [parse_icmp(packet) for packet in LAB_ANSWERS]
    assert all(
        a is not None
        and (a.src_ip, a.dst_ip, a.sport, a.dport, a.icmp_type, a.icmp_code)
        == ("198.18.0.9", "198.18.0.13", 49200, 4791, 11, 0)
        for a in answers
    )
    assert [a.ident >> 8 for a in answers if a] == [1, 2, 3]  # the TTL each one answers
    hops = [hop(a.from_ip, a.ident >> 8) for a in answers if a]
    probe = {"dst_ip": "198.18.0.13", "sport": 49200, "hops": hops, "reached": True}
    assert _Fabric(intent).path("h1", "h3", probe).links() == (
        "h1>leaf1", "leaf1:Ethernet1>spine1", "spine1:Ethernet2>leaf2", "leaf2:Ethernet3>h3",
    )  # fmt: skip


def test_parse_icmp_never_raises_on_any_truncation() -> None:
    for packet in (LINUX_TIME_EXCEEDED, LINUX_PORT_UNREACHABLE, *LAB_ANSWERS):
        for end in range(len(packet)):
            parse_icmp(packet[:end])


# --------------------------------------------------------------------------- probe frames


@pytest.mark.parametrize(("ttl", "attempt"), [(1, 0), (2, 1), (8, 0), (64, 4)])
def test_trace_frame_is_the_probe_with_ttl_and_id_and_valid_checksums(
    ttl: int, attempt: int
) -> None:
    flow = Flow("02:00:c6:12:00:09", "02:00:c6:12:00:08", "198.18.0.9", "198.18.0.13",
                dscp=26, sport=49160, qpn=TRACE_QPN, size=24)  # fmt: skip
    template = RoceTemplate(flow).frame(0, 0, 0)
    frame = trace_frame(template, ttl, attempt)
    packet = Ether(frame)
    assert (packet[IP].ttl, packet[IP].id, packet[IP].tos >> 2) == (ttl, ttl << 8 | attempt, 26)
    stored = packet[IP].chksum
    del packet[IP].chksum
    assert Ether(bytes(packet))[IP].chksum == stored  # scapy computes the same checksum
    assert (packet[UDP].sport, packet[UDP].dport, packet[UDP].chksum) == (49160, 4791, 0)
    assert packet[BTH].dqpn == TRACE_QPN
    assert icrc_ok(frame)  # a NIC that sees it takes it for valid RoCEv2
    # ECMP hashes these bytes: only TTL, identification and checksums may differ.
    assert frame[26:38] == template[26:38] and frame[23] == template[23]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"probes": ()}, "probes: Expected: 1..4096 Actual: 0"),
        ({"probes": (("198.18.0.300", 1),)}, "probes[0].dst_ip: Expected: an IPv4 address"),
        ({"probes": (("198.18.0.13", 0),)}, "probes[0].sport: Expected: 1..65535 Actual: 0"),
        ({"probes": (("198.18.0.13",),)}, "probes[0]: Expected: [dst_ip, sport]"),
        ({"max_ttl": 0}, "max_ttl: Expected: 1..64 Actual: 0"),
        ({"max_ttl": 65}, "max_ttl: Expected: 1..64 Actual: 65"),
        ({"tries": 6}, "tries: Expected: 1..5 Actual: 6"),
        ({"dscp": 64}, "dscp: Expected: 0..63 Actual: 64"),
        ({"rate_pps": 0}, "rate_pps: Expected: 1..100000 Actual: 0"),
        ({"wait_s": 0}, "wait_s: Expected: 0.001..10 s Actual: 0"),
        ({"stop_at": {"198.18.0.13": ("leaf2",)}}, "stop_at[198.18.0.13]: Expected: an IPv4"),
    ],
)
def test_trace_spec_refuses_bad_fields_by_name(change: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"probes": (("198.18.0.13", 49152),), **change}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        TraceSpec(**fields)


def test_worker_trace_role_answers_a_bad_spec_with_exit_2_and_the_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = {"probes": [["198.18.0.13", 49152]], "max_ttl": 99}
    assert worker.main(["worker", "trace", json.dumps(spec)]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "max_ttl: Expected: 1..64 Actual: 99" in error


# --------------------------------------------------------------------------- mapping


def hop(ip: str | None, ttl: int = 1, icmp_type: int = 11, code: int = 0) -> Any:
    if ip is None:
        return None
    return {"ttl": ttl, "ip": ip, "icmp_type": icmp_type, "icmp_code": code, "rtt_s": 0.002}


# Worker results (run_trace's "probes" rows) and the links the agent must name for them.
MAPPING = [
    pytest.param(
        "h1", "h3", [hop("198.18.0.8"), hop("198.18.0.0", 2), hop("198.18.0.3", 3)], True,
        ("h1>leaf1", "leaf1:Ethernet1>spine1", "spine1:Ethernet2>leaf2", "leaf2:Ethernet3>h3"),
        id="cross-leaf-via-spine1",
    ),
    pytest.param(
        "h4", "h2", [hop("198.18.0.14"), hop("198.18.0.6", 2), hop("198.18.0.5", 3)], True,
        ("h4>leaf2", "leaf2:Ethernet2>spine2", "spine2:Ethernet1>leaf1", "leaf1:Ethernet4>h2"),
        id="cross-leaf-via-spine2",
    ),
    pytest.param(
        "h2", "h1", [hop("198.18.0.10")], True, ("h2>leaf1", "leaf1:Ethernet3>h1"),
        id="tor-local",
    ),
    pytest.param(
        "h1", "h3", [hop("198.18.0.8"), None, hop("198.18.0.3", 3)], True,
        ("h1>leaf1", "leaf1>?", "?>leaf2", "leaf2:Ethernet3>h3"),
        id="silent-spine",
    ),
    pytest.param(
        "h1", "h3", [hop("198.18.0.8"), hop("198.18.0.0", 2), None, None], False,
        ("h1>leaf1", "leaf1:Ethernet1>spine1", "spine1>?", "?>?"),
        id="incomplete",
    ),
    pytest.param(
        "h1", "h3", [hop("198.18.0.8"), hop("10.9.9.9", 2), hop("198.18.0.3", 3)], True,
        ("h1>leaf1", "leaf1>?", "?>leaf2", "leaf2:Ethernet3>h3"),
        id="address-not-in-intent",
    ),
    pytest.param(
        "h1", "h3",
        [hop("198.18.0.8"), hop("198.18.0.0", 2), hop("198.18.0.3", 3),
         hop("198.18.0.13", 4, 3, 3)],
        True,
        ("h1>leaf1", "leaf1:Ethernet1>spine1", "spine1:Ethernet2>leaf2", "leaf2:Ethernet3>h3"),
        id="linux-destination-port-unreachable",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("src", "dst", "hops", "reached", "links"), MAPPING)
def test_answers_map_onto_switches_ports_and_links(
    intent: FabricIntent,
    src: str,
    dst: str,
    hops: list[Any],
    reached: bool,
    links: tuple[str, ...],
) -> None:
    dst_ip = {"h1": "198.18.0.9", "h2": "198.18.0.11", "h3": "198.18.0.13"}[dst]
    probe = {"dst_ip": dst_ip, "sport": 49153, "hops": hops, "reached": reached}
    path = _Fabric(intent).path(src, dst, probe)
    assert (path.src, path.dst, path.sport, path.complete) == (src, dst, 49153, reached)
    assert path.links() == links


def test_hops_name_the_ingress_port_and_its_address(intent: FabricIntent) -> None:
    probe = {"dst_ip": "198.18.0.13", "sport": 49152, "reached": True,
             "hops": [hop("198.18.0.8"), hop("198.18.0.4", 2), hop("198.18.0.7", 3)]}  # fmt: skip
    path = _Fabric(intent).path("h1", "h3", probe)
    assert path.hops == (
        Hop("leaf1", "Ethernet3", "198.18.0.8", "Ethernet2"),
        Hop("spine2", "Ethernet1", "198.18.0.4", "Ethernet2"),
        Hop("leaf2", "Ethernet2", "198.18.0.7", "Ethernet3"),
    )
    assert path.full


def test_stop_addresses_are_the_destination_leafs_ports(intent: FabricIntent) -> None:
    assert _Fabric(intent).stop_addresses("h3") == (
        "198.18.0.12", "198.18.0.14", "198.18.0.3", "198.18.0.7",
    )  # fmt: skip


class RecordedRunner(Runner):
    """Hands back one worker result recorded from a run (no host involved)."""

    host = "h1"

    def __init__(self, result: dict[str, Any]) -> None:
        self.recorded = result
        self.specs: list[dict[str, Any]] = []

    def start(self, role: str, spec: dict[str, Any]) -> ProbeHandle:
        assert role == "trace"
        self.specs.append(spec)
        recorded = self.recorded

        class Done(ProbeHandle):
            host, role = "h1", "trace"

            def wait_ready(self, timeout: float = 0) -> None: ...

            def result(self, timeout: float) -> dict[str, Any]:
                return recorded

            def kill(self) -> None: ...

        return Done()


def test_trace_many_sends_the_fabric_probe_and_maps_the_answers(intent: FabricIntent) -> None:
    rows = [
        {"dst_ip": "198.18.0.13", "sport": 49152, "reached": True,
         "hops": [hop("198.18.0.8"), hop("198.18.0.0", 2), hop("198.18.0.3", 3)]},
        {"dst_ip": "198.18.0.11", "sport": 49153, "reached": True, "hops": [hop("198.18.0.8")]},
    ]  # fmt: skip
    runner = RecordedRunner({"role": "trace", "probes": rows})
    paths = trace_many(intent, "h1", [("h3", 49152), ("h2", 49153)], runner=runner)
    assert [p.links()[1] for p in paths] == ["leaf1:Ethernet1>spine1", "leaf1:Ethernet4>h2"]
    (spec,) = runner.specs
    assert spec["probes"] == [["198.18.0.13", 49152], ["198.18.0.11", 49153]]
    assert spec["dscp"] == intent.profile.roce.dscp  # the RoCE class's DSCP: same queues
    assert spec["stop_at"]["198.18.0.11"] == ["198.18.0.1", "198.18.0.10", "198.18.0.5",
                                              "198.18.0.8"]  # fmt: skip


def test_trace_many_refuses_a_result_of_the_wrong_shape(intent: FabricIntent) -> None:
    runner = RecordedRunner({"role": "trace", "probes": []})
    with pytest.raises(PathError, match="trace from h1: Expected: 1 probe results Actual: "):
        trace_many(intent, "h1", [("h3", 49152)], runner=runner)


@pytest.mark.parametrize(
    ("src", "probes", "message"),
    [
        ("h9", [("h3", 1)], "no host named 'h9' in fabric roce-leafspine"),
        ("leaf1", [("h3", 1)], "leaf1 is a leaf; probes run on hosts"),
        ("h1", [("h1", 1)], "trace h1 -> h1: source and destination are the same host"),
        ("h1", [("h3", 0)], r"trace from h1: probes\[0\].sport: Expected: 1..65535 Actual: 0"),
    ],
)
def test_trace_many_refuses_bad_input_by_name(
    intent: FabricIntent, src: str, probes: list[tuple[str, int]], message: str
) -> None:
    runner = RecordedRunner({"probes": []})
    with pytest.raises(PathError, match=message):
        trace_many(intent, src, probes, runner=runner)
    assert runner.specs == []  # nothing was started


def test_path_links_as_the_contract_writes_them() -> None:
    path = Path("h1", "h3", 49152, (
        Hop("leaf1", "eth3", "198.18.0.8", "eth1"),
        Hop("spine1", "eth1", "198.18.0.0", "eth2"),
        Hop("leaf2", "eth1", "198.18.0.3", "eth3"),
    ))  # fmt: skip
    assert path.links() == ("h1>leaf1", "leaf1:eth1>spine1", "spine1:eth2>leaf2", "leaf2:eth3>h3")


# --------------------------------------------------------------------------- discovery


SPINE_HOPS = {"spine1": ("198.18.0.0", "198.18.0.3"), "spine2": ("198.18.0.4", "198.18.0.7")}


class FakeTracer:
    """Paths from a chosen function of the source port; records every port traced."""

    def __init__(
        self, intent: FabricIntent, spine_of: Any, silent: frozenset[int] | set[int] = frozenset()
    ) -> None:
        self.fabric = _Fabric(intent)
        self.spine_of = spine_of
        self.silent = silent
        self.traced: dict[tuple[str, str], list[int]] = {}

    def __call__(self, src: str, probes: Sequence[tuple[str, int]]) -> list[Path]:
        out = []
        leaf = {"h1": "198.18.0.8", "h2": "198.18.0.10", "h3": "198.18.0.12", "h4": "198.18.0.14"}
        dst_ip = {"h1": "198.18.0.9", "h2": "198.18.0.11", "h3": "198.18.0.13", "h4": "198.18.0.15"}
        same_leaf = {frozenset(("h1", "h2")), frozenset(("h3", "h4"))}
        for dst, sport in probes:
            self.traced.setdefault((src, dst), []).append(sport)
            hops = [hop(leaf[src])]
            if frozenset((src, dst)) not in same_leaf:
                up, down = SPINE_HOPS[self.spine_of(sport)]
                if src in ("h3", "h4"):
                    up = {"198.18.0.0": "198.18.0.2", "198.18.0.4": "198.18.0.6"}[up]
                    down = {"198.18.0.3": "198.18.0.1", "198.18.0.7": "198.18.0.5"}[down]
                hops += [None if sport in self.silent else hop(up, 2), hop(down, 3)]
            probe = {"dst_ip": dst_ip[dst], "sport": sport, "hops": hops, "reached": True}
            out.append(self.fabric.path(src, dst, probe))
        return out


def crc_spine(sport: int) -> str:
    return ("spine1", "spine2")[zlib.crc32(sport.to_bytes(2, "big")) % 2]


def test_discover_finds_both_spines_and_stops_after_patience(intent: FabricIntent) -> None:
    # 49152, 49153 -> spine1, 49154 -> spine2: the new path resets the streak of 4.
    spine_of = {49152: "spine1", 49153: "spine1", 49154: "spine2"}
    tracer = FakeTracer(intent, lambda s: spine_of.get(s, "spine2" if s % 2 else "spine1"))
    found = discover(intent, [("h1", "h3"), ("h1", "h2")], patience=4, tracer=tracer)
    cross = found[("h1", "h3")]
    assert [(p.sport, p.links()[1]) for p in cross] == [
        (49152, "leaf1:Ethernet1>spine1"),
        (49154, "leaf1:Ethernet2>spine2"),
    ]
    assert [p.sport for p in found[("h1", "h2")]] == [49152]  # one path under one leaf
    # Sequential semantics: h1->h3 stops at the 4th port in a row without a new path
    # (49155..49158), h1->h2 after 49152 + 4; rounds may trace more, never fewer.
    assert tracer.traced[("h1", "h3")][:7] == list(range(49152, 49159))
    assert tracer.traced[("h1", "h2")][:5] == list(range(49152, 49157))


@pytest.mark.parametrize(
    ("max_sports", "patience", "traced", "spines"),
    [
        (16, 4, 8, ["spine1", "spine2"]),  # new path at the 3rd port, 4 more: round 1's 8
        (16, 1, 2, ["spine1"]),  # the 2nd port brings nothing new: done
        (3, 3, 3, ["spine1", "spine2"]),  # max_sports ends it
    ],
)
def test_discover_bounds_the_ports_it_tries(
    intent: FabricIntent, max_sports: int, patience: int, traced: int, spines: list[str]
) -> None:
    tracer = FakeTracer(intent, lambda s: "spine1" if s < BASE_SPORT + 2 else "spine2")
    found = discover(intent, [("h4", "h1")], max_sports=max_sports, patience=patience,
                     tracer=tracer)  # fmt: skip
    assert tracer.traced[("h4", "h1")] == list(range(BASE_SPORT, BASE_SPORT + traced))
    assert [p.hops[1].switch for p in found[("h4", "h1")] if p.hops[1] is not None] == spines


def test_discover_alternating_paths_runs_to_max_sports(intent: FabricIntent) -> None:
    tracer = FakeTracer(intent, lambda s: ("spine1", "spine2")[s % 2])
    found = discover(intent, [("h2", "h4")], max_sports=5, patience=4, tracer=tracer)
    assert len(found[("h2", "h4")]) == 2
    assert tracer.traced[("h2", "h4")] == list(range(49152, 49157))


def test_discover_silent_hops_are_no_new_path(intent: FabricIntent) -> None:
    # The traces of 49152..49155 lose their spine answer; 49156 shows spine1 in full.
    tracer = FakeTracer(intent, lambda s: "spine1", silent={49152, 49153, 49154, 49155})
    found = discover(intent, [("h1", "h3")], max_sports=16, patience=6, tracer=tracer)
    paths = found[("h1", "h3")]
    assert [p.sport for p in paths] == [49156]  # the partial ones are explained by it
    assert paths[0].full


def test_discover_keeps_a_partial_path_no_full_one_explains(intent: FabricIntent) -> None:
    tracer = FakeTracer(intent, lambda s: "spine1", silent=set(range(49152, 49200)))
    (path,) = discover(intent, [("h1", "h3")], patience=2, tracer=tracer)[("h1", "h3")]
    assert path.hops[1] is None and path.links()[1:3] == ("leaf1>?", "?>leaf2")


def test_discover_with_a_crc_hash_finds_every_path_of_every_pair(intent: FabricIntent) -> None:
    tracer = FakeTracer(intent, crc_spine)
    found = discover(intent, pingmesh_pairs(intent), tracer=tracer)
    for (src, dst), paths in found.items():
        same_leaf = {src, dst} in ({"h1", "h2"}, {"h3", "h4"})
        assert len(paths) == (1 if same_leaf else 2), (src, dst)


@pytest.mark.parametrize(
    ("pairs", "options", "message"),
    [
        ([("h1", "h9")], {}, "no host named 'h9'"),
        ([("h1", "h1")], {}, "pair h1 -> h1: source and destination are the same host"),
        ([("spine1", "h1")], {}, "spine1 is a spine; probes run on hosts"),
        ([("h1", "h3")], {"max_sports": 0}, "max_sports: Expected: 1..4096 Actual: 0"),
        ([("h1", "h3")], {"patience": 17}, r"patience: Expected: 1..max_sports \(16\) Actual: 17"),
    ],
)
def test_discover_refuses_bad_input_before_tracing(
    intent: FabricIntent, pairs: list[tuple[str, str]], options: dict[str, Any], message: str
) -> None:
    tracer = FakeTracer(intent, crc_spine)
    with pytest.raises(PathError, match=message):
        discover(intent, pairs, tracer=tracer, **options)
    assert tracer.traced == {}


def test_pingmesh_pairs_on_the_leaf_spine_lab(intent: FabricIntent) -> None:
    assert pingmesh_pairs(intent) == [
        ("h1", "h2"), ("h2", "h1"), ("h3", "h4"), ("h4", "h3"), ("h1", "h3"), ("h3", "h1"),
    ]  # fmt: skip


# --------------------------------------------------------------------------- per-hop probes


def sent_l4(sport: int) -> bytes:
    """The bytes after the IP header of the trace probe the lab answers above quote."""
    flow = Flow("02:00:c6:12:00:09", "02:00:c6:12:00:08", "198.18.0.9", "198.18.0.13",
                sport=sport, qpn=TRACE_QPN, size=24)  # fmt: skip
    return RoceTemplate(flow).frame(0, 0, 0)[34:]


@pytest.mark.parametrize(
    ("offset", "changed"),
    [
        (None, False),  # as sent
        (8 + 4, False),  # BTH reserved byte: not covered (the ICRC leaves it out too)
        (8 + 12, True),  # first payload byte: what a corrupting port flips
        (8 + 11, True),  # PSN
        (2, True),  # UDP destination port
        (47, False),  # the ICRC itself: differs per packet (it covers the identification)
    ],
)
def test_changed_on_the_way_compares_the_recorded_quote(offset: int | None, changed: bool) -> None:
    answer = parse_icmp(LAB_ANSWERS[1])
    assert answer is not None
    quoted = bytearray(answer.quoted_l4)
    if offset is not None:
        quoted[offset] ^= 0x01
    assert changed_on_the_way(sent_l4(49200), bytes(quoted)) is changed


def test_an_rfc792_quote_is_compared_as_far_as_it_goes() -> None:
    answer = parse_icmp(rfc792_reply())
    assert answer is not None and len(answer.quoted_l4) == 8
    flow = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.100.1", "198.18.100.3",
                sport=49200, qpn=TRACE_QPN, size=24)  # fmt: skip
    assert not changed_on_the_way(RoceTemplate(flow).frame(0, 0, 0)[34:], answer.quoted_l4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"probes": ()}, "probes: Expected: 1..4096 Actual: 0"),
        ({"probes": (("198.18.0.13", 1),)}, r"probes\[0\]: Expected: \[dst_ip, sport, hops\]"),
        ({"probes": (("198.18.0.13", 1, 0),)}, r"probes\[0\].hops: Expected: 1..63 Actual: 0"),
        ({"probes": (("x", 1, 3),)}, r"probes\[0\].dst_ip: Expected: an IPv4 address"),
        ({"count": 1025}, "count: Expected: 1..1024 Actual: 1025"),
        ({"rate_pps": 0}, "rate_pps: Expected: 1..100000 Actual: 0"),
    ],
)
def test_hop_spec_refuses_bad_fields_by_name(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HopSpec(**{"probes": (("198.18.0.13", 49152, 3),), **change})


def test_worker_hops_role_answers_a_bad_spec_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert worker.main(["worker", "hops", json.dumps({"probes": "all"})]) == 2
    assert "probes: Expected: a list of [dst_ip, sport, hops]" in capsys.readouterr().out


class RecordedHopRunner(RecordedRunner):
    def start(self, role: str, spec: dict[str, Any]) -> ProbeHandle:
        assert role == "hops"
        return super().start("trace", spec)


def test_probe_hops_sends_each_paths_hops_and_reads_the_counts(intent: FabricIntent) -> None:
    full = _Fabric(intent).path("h1", "h3", {
        "dst_ip": "198.18.0.13", "sport": 49153, "reached": True,
        "hops": [hop("198.18.0.8"), hop("198.18.0.4", 2), hop("198.18.0.7", 3)],
    })  # fmt: skip
    local = _Fabric(intent).path("h1", "h2", {
        "dst_ip": "198.18.0.11", "sport": 49152, "reached": True, "hops": [hop("198.18.0.8")],
    })  # fmt: skip
    counts = [{"sent": 20, "answered": 20, "corrupted": 0},
              {"sent": 20, "answered": 11, "corrupted": 9},
              {"sent": 20, "answered": 10, "corrupted": 0}]  # fmt: skip
    rows = [{"dst_ip": "198.18.0.13", "sport": 49153, "hops": counts},
            {"dst_ip": "198.18.0.11", "sport": 49152, "hops": counts[:1]}]  # fmt: skip
    runner = RecordedHopRunner({"role": "hops", "probes": rows})
    got = probe_hops(intent, [full, local], tries=20, runner=lambda host: runner)
    assert got[("h1", "h3", 49153)] == (HopCount(20, 20, 0), HopCount(20, 11, 9), HopCount(20, 10))
    assert got[("h1", "h2", 49152)] == (HopCount(20, 20, 0),)
    (spec,) = runner.specs
    assert spec["probes"] == [["198.18.0.13", 49153, 3], ["198.18.0.11", 49152, 1]]
    assert spec["count"] == 20


def test_probe_hops_refuses_a_result_of_the_wrong_shape(intent: FabricIntent) -> None:
    path = Path("h1", "h2", 49152, (Hop("leaf1", "Ethernet3", "198.18.0.8", "Ethernet4"),))
    runner = RecordedHopRunner({"probes": [{"dst_ip": "198.18.0.11", "hops": [{"sent": 1}]}]})
    with pytest.raises(PathError, match="hop probes h1 -> h2: Expected: hops with sent, answered"):
        probe_hops(intent, [path], runner=lambda host: runner)
