"""lab.vswitch pieces that need no namespace: config contract, WRED curve, scheduler, frame
encoding, checksums, ECMP hash, and the process's refusal of a bad config file."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from lab.vswitch import packet
from lab.vswitch.config import ConfigError, parse_config, with_qos
from lab.vswitch.forwarding import ecmp_index
from lossless.config import EcnConfig, PortQosConfig
from lossless.pfc import pause_duration
from lossless.queues import EgressQueue, Scheduler, scheduler_weights
from lossless.wred import EcnMarker

REPO_ROOT = Path(__file__).resolve().parents[2]

_ECN = {"min_bytes": 15000, "max_bytes": 45000, "max_probability": 100}
EXAMPLE: dict[str, Any] = {
    "name": "leaf1",
    "ports": [
        {
            "ifname": "eth1",
            "mac": "02:00:00:00:01:01",
            "ipv4": "198.18.0.1/31",
            "speed_bps": 10_000_000,
        }
    ],
    "neighbors": [{"ip": "198.18.0.0", "mac": "02:00:00:00:02:01", "port": "eth1"}],
    "routes": [{"prefix": "198.18.1.0/24", "nexthops": [{"ip": "198.18.0.0", "port": "eth1"}]}],
    "buffer": {
        "xoff_bytes": 30000,
        "xon_bytes": 15000,
        "headroom_bytes": 20000,
        "queue_limit_bytes": 60000,
    },
    "qos": {
        "trust": "dscp",
        "dscp_to_tc": {"26": 3, "48": 6},
        "watchdog": {
            "enabled": False,
            "detection_ms": 200,
            "restoration_ms": 400,
            "polling_ms": 100,
            "action": "drop",
        },
        "ports": {
            "eth1": {
                "pfc_enabled": True,
                "pfc_priorities": [3],
                "watchdog": None,
                "queues": {
                    "3": {"ecn": _ECN, "bandwidth_percent": 50},
                    "6": {"strict": True},
                    "0": {"bandwidth_percent": 50},
                },
            }
        },
    },
}


def test_the_documented_example_is_valid_and_round_trips() -> None:
    config = parse_config(EXAMPLE)
    assert config.qos.tc_for_dscp(26) == 3
    assert config.qos.tc_for_dscp(46) == 5  # unmapped: EOS default dscp >> 3
    assert config.qos.watchdog_for("eth1").enabled is False
    assert parse_config(json.loads(json.dumps(config.to_json_dict()))) == config


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("neighbors", 0, "port"), "eth7", "neighbors[0].port: unknown port 'eth7'"),
        (("buffer", "xon_bytes"), 40000, "buffer: xon_bytes (40000) must be <= xoff_bytes"),
        (("ports", 0, "mac"), "01:00:5e:00:00:01", "ports.0.mac: multicast MAC"),
        (("ports", 0, "speed_bps"), 0, "ports.0.speed_bps"),
        (("ports", 0, "ifname"), "this-name-is-too-long", "ports.0.ifname"),
        (
            ("qos", "ports", "eth1", "queues", "6", "bandwidth_percent"),
            10,
            "qos.ports.eth1.queues.6",
        ),
        (("qos", "ports", "eth1", "queues", "0", "bandwidth_percent"), 60, "adds up to 110"),
        (("qos", "ports", "eth1", "pfc_priorities"), [3, 3], "qos.ports.eth1.pfc_priorities"),
        (("routes", 0, "nexthops", 0), {"ip": "198.19.250.1"}, "not in any connected subnet"),
        (("qos", "watchdog", "detection_ms"), -1, "qos.watchdog.detection_ms"),
    ],
)
def test_bad_config_is_refused_naming_the_field(
    path: tuple[Any, ...], value: Any, expected: str
) -> None:
    data = json.loads(json.dumps(EXAMPLE))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert expected in str(info.value)


def test_set_qos_validation_uses_the_running_ports() -> None:
    config = parse_config(EXAMPLE)
    with pytest.raises(ConfigError, match=r"qos\.ports\.eth2: unknown port"):
        with_qos(config, {"ports": {"eth2": {}}})
    assert with_qos(config, {}).qos.ports == {}


def test_wred_probability_curve() -> None:
    marker = EcnMarker(EcnConfig(min_bytes=10000, max_bytes=30000, max_probability=40))
    assert marker.probability(9999) == 0.0
    assert marker.probability(10000) == 0.0
    assert marker.probability(20000) == pytest.approx(0.2)
    assert marker.probability(29999) == pytest.approx(0.4, abs=1e-3)
    assert marker.probability(30000) == 1.0  # at/above max: mark every ECT packet
    seeded = EcnMarker(EcnConfig(min_bytes=0, max_bytes=100, max_probability=50), random.Random(7))
    marks = sum(seeded.should_mark(50) for _ in range(20000))
    assert marks / 20000 == pytest.approx(0.25, abs=0.015)


def _queues_with(frames_per_queue: dict[int, int], size: int = 1000) -> list[EgressQueue]:
    queues = [EgressQueue() for _ in range(8)]
    for tc, n in frames_per_queue.items():
        for _ in range(n):
            queues[tc].push((bytearray(size), 0, tc))
    return queues


def _serve(
    scheduler: Scheduler, queues: list[EgressQueue], n: int, paused: frozenset[int] = frozenset()
) -> Counter[int]:
    served: Counter[int] = Counter()
    for _ in range(n):
        eligible = [bool(q.packets) and tc not in paused for tc, q in enumerate(queues)]
        tc = scheduler.pick(queues, eligible)
        if tc is None:
            break
        queues[tc].pop()
        served[tc] += 1
    return served


def test_strict_priority_then_dwrr_by_bandwidth_percent() -> None:
    qos = TypeAdapter(PortQosConfig).validate_python(
        {
            "queues": {
                "6": {"strict": True},
                "3": {"bandwidth_percent": 75},
                "0": {"bandwidth_percent": 20},
            }
        }
    )
    strict, weights = scheduler_weights(qos)
    # The 5 % left over is shared by the 5 unconfigured non-strict queues.
    assert strict[6] and (weights[3], weights[0], weights[1], weights[7]) == (75, 20, 1, 1)
    scheduler = Scheduler(strict, weights)
    queues = _queues_with({6: 10, 3: 2000, 0: 2000})
    first = _serve(scheduler, queues, 10)
    assert first == Counter({6: 10})  # strict drains first
    served = _serve(scheduler, queues, 1900)
    assert served[3] / (served[3] + served[0]) == pytest.approx(75 / 95, abs=0.02)
    # A paused queue is skipped, the others keep going.
    served = _serve(scheduler, queues, 50, paused=frozenset({3}))
    assert set(served) == {0}


def test_default_port_is_equal_dwrr() -> None:
    strict, weights = scheduler_weights(PortQosConfig())
    assert not any(strict) and len(set(weights)) == 1
    scheduler = Scheduler(strict, weights)
    served = _serve(scheduler, _queues_with({0: 500, 5: 500}, size=300), 600)
    assert abs(served[0] - served[5]) <= 6


def test_pfc_frame_has_all_eight_time_fields_and_minimum_size() -> None:
    frame = packet.build_pfc_single(bytes.fromhex("020000000001"), 3, 0xFFFF)
    assert len(frame) == 60
    assert frame[:6] == bytes.fromhex("0180c2000001")
    assert frame[12:16] == b"\x88\x08\x01\x01"
    assert struct.unpack_from("!H8H", frame, 16) == (0x0008, 0, 0, 0, 0xFFFF, 0, 0, 0, 0)
    assert packet.parse_pfc(frame) == (0x08, [0, 0, 0, 0xFFFF, 0, 0, 0, 0])
    assert pause_duration(0xFFFF, 10e6) == pytest.approx(3.355, abs=1e-3)


@given(
    header=st.binary(min_size=20, max_size=20),
    new_byte=st.integers(0, 255),
    index=st.integers(0, 19),
)
def test_incremental_checksum_matches_recompute(header: bytes, new_byte: int, index: int) -> None:
    hdr = bytearray(header)
    hdr[0] = 0x45  # a real IPv4 header never sums to zero (the +0/-0 corner of RFC 1624)
    hdr[10:12] = b"\x00\x00"
    hdr[10:12] = packet.checksum(hdr).to_bytes(2, "big")
    if index in (0, 10, 11):
        return
    word_at = index & ~1
    old_word = (hdr[word_at] << 8) | hdr[word_at + 1]
    hdr[index] = new_byte
    new_word = (hdr[word_at] << 8) | hdr[word_at + 1]
    updated = packet.checksum_update((hdr[10] << 8) | hdr[11], old_word, new_word)
    hdr[10:12] = updated.to_bytes(2, "big")
    assert packet.checksum(hdr) == 0


def _udp_frame(sport: int) -> bytes:
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        28,
        0,
        0,
        64,
        17,
        0,
        bytes([198, 18, 1, 2]),
        bytes([198, 18, 100, 1]),
    )
    return bytes(12) + b"\x08\x00" + ip + struct.pack("!HHHH", sport, 4791, 8, 0)


def test_ecmp_hash_is_deterministic_and_spreads_source_ports() -> None:
    picks = [ecmp_index(_udp_frame(sport), 20, 2) for sport in range(49152, 49152 + 256)]
    assert picks == [ecmp_index(_udp_frame(sport), 20, 2) for sport in range(49152, 49152 + 256)]
    assert 90 <= sum(picks) <= 166
    fragment = bytearray(_udp_frame(1))
    fragment[20] = 0x20  # MF: hashes on the 3-tuple, like every fragment of its datagram
    other = bytearray(_udp_frame(2))
    other[20] = 0x20
    assert ecmp_index(fragment, 20, 7) == ecmp_index(other, 20, 7)


def test_process_refuses_a_bad_config_file(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(EXAMPLE))
    bad["qos"]["ports"]["eth1"]["queues"]["3"]["ecn"]["max_probability"] = 150
    config_path = tmp_path / "bad.json"
    config_path.write_text(json.dumps(bad))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.vswitch",
            "--config",
            str(config_path),
            "--control",
            str(tmp_path / "c.sock"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "qos.ports.eth1.queues.3.ecn.max_probability" in proc.stderr
    assert not (tmp_path / "c.sock").exists()
