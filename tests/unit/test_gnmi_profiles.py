"""Each NOS's gNMI updates folded into counters: the documented shapes, and every way an update
can be unusable (table-driven). No network: the profiles work on paths and TypedValues."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from agent.device.gnmi import profile_for
from agent.device.gnmi.base import CounterBuilder, UpdateError, under
from agent.device.gnmi.paths import PathError, parse_path

SONIC = profile_for("sonic")
NVUE = profile_for("cumulus_nvue")
EOS = profile_for("arista_eos")


def value(**kwargs: Any) -> Any:
    return gnmi_pb2.TypedValue(**kwargs)


def fold(profile: Any, updates: list[tuple[str, Any]]) -> Any:
    builder = CounterBuilder()
    for text, typed in updates:
        profile.fold(parse_path(text, profile.origin, profile.target), typed, builder)
    return builder.counters("leaf1", 1.0, dict(profile.unread))


def test_no_gnmi_profile_for_nxos_and_hosts() -> None:
    assert profile_for("cisco_nxos") is None
    assert profile_for("linux_host") is None


# --------------------------------------------------------------------------- SONiC

# Shapes of sonic-net/sonic-gnmi testdata (5ec1c20): COUNTERS:Ethernet_wildcard_PFC_7_RX.txt
# (one update keyed by port) and COUNTERS:Ethernet68:Queues_expected.txt (<port>:<queue>,
# watchdog fields on watched queues, :periodic keys).
SONIC_PORTS = {
    "Ethernet0": {
        "SAI_PORT_STAT_PFC_3_RX_PKTS": "17",
        "SAI_PORT_STAT_PFC_3_TX_PKTS": "4",
        "SAI_PORT_STAT_PFC_3_ON2OFF_RX_PKTS": "9",
        "SAI_PORT_STAT_IF_IN_OCTETS": "123456",
    },
    "Ethernet4": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "2"},
}
SONIC_QUEUES = {
    "Ethernet0:3": {
        "PFC_WD_STATUS": "stormed",
        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "2",
        "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": "1",
        "SAI_QUEUE_STAT_PACKETS": "1000",
        "SAI_QUEUE_STAT_BYTES": "1024000",
        "SAI_QUEUE_STAT_DROPPED_PACKETS": "0",
        "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "55",
        "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "9000",
    },
    "Ethernet0:3:periodic": {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "192"},
    "Ethernet0:1": {"SAI_QUEUE_STAT_PACKETS": "5"},
}


def json_ietf(data: Any) -> Any:
    return value(json_ietf_val=json.dumps(data).encode())


def test_sonic_wildcard_ports_and_queues() -> None:
    counters = fold(
        SONIC,
        [("COUNTERS/Ethernet*", json_ietf(SONIC_PORTS)),
         ("COUNTERS/Ethernet*/Queues", json_ietf(SONIC_QUEUES))],
    )  # fmt: skip
    eth0 = counters.interfaces["Ethernet0"]
    assert eth0.pfc_rx[3] == 17 and eth0.pfc_tx[3] == 4
    assert counters.interfaces["Ethernet4"].pfc_rx[7] == 2
    queue = eth0.queues[3]
    assert (queue.tx_packets, queue.tx_bytes, queue.ecn_marked_packets) == (1000, 1024000, 55)
    assert queue.watermark_bytes == 9000  # the :periodic key does not overwrite it
    assert 1 not in eth0.queues  # a queue with only some counters read is not reported
    watchdog = eth0.watchdog[3]
    assert (watchdog.storms_detected, watchdog.storms_restored, watchdog.stormed) == (2, 1, True)
    assert "headroom_drops" in counters.unread


def test_sonic_one_port_path() -> None:
    counters = fold(SONIC, [("COUNTERS/Ethernet8", json_ietf(SONIC_PORTS["Ethernet0"]))])
    assert counters.interfaces["Ethernet8"].pfc_rx[3] == 17


SONIC_BAD = [
    ("not JSON", "COUNTERS/Ethernet*", value(json_ietf_val=b"{not json"), "does not parse"),
    ("not a map", "COUNTERS/Ethernet*", json_ietf([1, 2]), "JSON object"),
    ("a typed value", "COUNTERS/Ethernet0", value(uint_val=3), "JSON_IETF"),
    ("a word", "COUNTERS/Ethernet0", json_ietf({"SAI_PORT_STAT_PFC_3_RX_PKTS": "lots"}),
     "not a counter"),
    ("negative", "COUNTERS/Ethernet0", json_ietf({"SAI_PORT_STAT_PFC_3_RX_PKTS": -1}),
     "not a counter"),
    ("over 64 bits", "COUNTERS/Ethernet0", json_ietf({"SAI_PORT_STAT_PFC_3_RX_PKTS": 2**64}),
     "not a counter"),
    ("a bad queue key", "COUNTERS/Ethernet*/Queues", json_ietf({"Ethernet0": {}}),
     "<port>:<queue>"),
    ("a queue over 7", "COUNTERS/Ethernet*/Queues",
     json_ietf({"Ethernet0:9": {"SAI_QUEUE_STAT_PACKETS": "1"}}), "outside 0-7"),
    ("another table", "RATES/Ethernet0", json_ietf({}), "not a path"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "path", "typed", "message"), SONIC_BAD, ids=[c[0] for c in SONIC_BAD]
)
def test_sonic_unusable_updates(case: str, path: str, typed: Any, message: str) -> None:
    with pytest.raises(UpdateError, match=message):
        fold(SONIC, [(path, typed)])


# --------------------------------------------------------------------------- NVUE

NVUE_IF = "/qos/interfaces/interface[interface-id=swp1]"


def nvue_sample(priority: int = 3) -> list[tuple[str, Any]]:
    sp = f"{NVUE_IF}/switch-priority[priority={priority}]/state"
    queue = f"{NVUE_IF}/output/queues/queue[name={priority}]/state"
    return [
        (f"{sp}/counters/in-pause-pkts", value(uint_val=11)),
        (f"{sp}/counters/out-pause-pkts", value(uint_val=12)),
        (f"{sp}/counters/in-discards", value(uint_val=99)),  # read, not used
        (f"{queue}/transmit-pkts", value(uint_val=100)),
        (f"{queue}/transmit-octets", value(uint_val=102400)),
        (f"{queue}/wred-dropped-pkts", value(uint_val=1)),
        (f"{queue}/ecn-marked-pkts", value(uint_val=7)),
        (f"{queue}/max-queue-len", value(uint_val=4096)),
    ]


def test_nvue_sample() -> None:
    counters = fold(NVUE, nvue_sample())
    swp1 = counters.interfaces["swp1"]
    assert (swp1.pfc_rx[3], swp1.pfc_tx[3]) == (11, 12)
    q = swp1.queues[3]
    assert (q.tx_packets, q.tx_bytes, q.dropped_packets, q.ecn_marked_packets) == (
        100,
        102400,
        1,
        7,
    )
    assert q.watermark_bytes == 4096
    assert set(counters.unread) == {"watchdog", "headroom_drops"}


NVUE_BAD = [
    ("a string counter", f"{NVUE_IF}/switch-priority[priority=3]/state/counters/in-pause-pkts",
     value(string_val="many"), "not a counter"),
    ("a bool counter", f"{NVUE_IF}/output/queues/queue[name=3]/state/transmit-pkts",
     value(bool_val=True), "bool_val"),
    ("priority 8", f"{NVUE_IF}/switch-priority[priority=8]/state/counters/in-pause-pkts",
     value(uint_val=1), "outside 0-7"),
    ("an unnamed queue", f"{NVUE_IF}/output/queues/queue[name=best]/state/transmit-pkts",
     value(uint_val=1), "not numbered"),
    ("no interface key",
     "/qos/interfaces/interface/output/queues/queue[name=3]/state/transmit-pkts",
     value(uint_val=1), "no interface"),
    ("outside /qos", "/system/state/hostname", value(string_val="x"), "not a path"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "path", "typed", "message"), NVUE_BAD, ids=[c[0] for c in NVUE_BAD]
)
def test_nvue_unusable_updates(case: str, path: str, typed: Any, message: str) -> None:
    with pytest.raises(UpdateError, match=message):
        fold(NVUE, [(path, typed)])


# --------------------------------------------------------------------------- EOS

EOS_IF = "/interfaces/interface[name=Ethernet1]/ethernet/pfc"
EOS_Q = "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state"
EOS_WD = f"{EOS_IF}/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state"


def test_eos_sample_and_watchdog() -> None:
    counters = fold(
        EOS,
        [(f"{EOS_IF}/priorities/priority[index=3]/state/in-frames", value(uint_val=5)),
         (f"{EOS_IF}/priorities/priority[index=3]/state/out-frames", value(uint_val=6)),
         (f"{EOS_Q}/transmit-pkts", value(uint_val=10)),
         (f"{EOS_Q}/transmit-octets", value(uint_val=10240)),
         (f"{EOS_Q}/dropped-pkts", value(uint_val=0)),
         (f"{EOS_Q}/ecn-marked-pkts", value(uint_val=3)),
         (f"{EOS_WD}/stuck-count", value(uint_val=1)),
         (f"{EOS_WD}/recovery-count", value(uint_val=0))],
    )  # fmt: skip
    et1 = counters.interfaces["Ethernet1"]
    assert (et1.pfc_rx[3], et1.pfc_tx[3]) == (5, 6)
    assert et1.queues[3].ecn_marked_packets == 3 and et1.queues[3].watermark_bytes is None
    assert et1.watchdog[3].stormed and et1.watchdog[3].storms_detected == 1


def test_eos_storm_over_when_recovered() -> None:
    counters = fold(
        EOS, [(f"{EOS_WD}/stuck-count", value(uint_val=2)),
              (f"{EOS_WD}/recovery-count", value(uint_val=2))],
    )  # fmt: skip
    assert not counters.interfaces["Ethernet1"].watchdog[3].stormed


def test_eos_multicast_watchdog_ignored() -> None:
    path = EOS_WD.replace("UNICAST", "MULTICAST") + "/stuck-count"
    counters = fold(EOS, [(path, value(uint_val=4))])
    assert "Ethernet1" not in counters.interfaces


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("subscribed", "path", "expected"),
    [
        ("COUNTERS/Ethernet*", "COUNTERS/Ethernet*", True),
        ("COUNTERS/Ethernet*", "COUNTERS/Ethernet8", True),
        ("COUNTERS/Ethernet*", "COUNTERS/PORT0", False),
        ("COUNTERS/Ethernet*/Queues", "COUNTERS/Ethernet*", False),
        ("/a/b[k=*]/c", "/a/b[k=x]/c/d", True),
        ("/a/b[k=x]/c", "/a/b[k=y]/c/d", False),
        ("/a/b[k=*]/c", "/a/b/c", False),
    ],
)
def test_under(subscribed: str, path: str, expected: bool) -> None:
    assert under(parse_path(subscribed), parse_path(path)) is expected


@pytest.mark.parametrize("text", ["/a/[k=v]", "/a/b[k=v", "/a/b[kv]", "/a/b[k=v]x"])
def test_bad_path_texts(text: str) -> None:
    with pytest.raises(PathError):
        parse_path(text)


KEY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True), min_size=1, max_size=5),
    keys=st.dictionaries(st.from_regex(r"[a-z][a-z-]{0,6}", fullmatch=True), KEY_TEXT, max_size=2),
)
def test_path_text_round_trips(names: list[str], keys: dict[str, str]) -> None:
    elems = tuple(
        (name, tuple(sorted(keys.items())) if i == 0 else ()) for i, name in enumerate(names)
    )
    path = parse_path("/placeholder")
    path = type(path)(elems)
    assert parse_path(path.text()).elems == elems


def test_a_stream_naming_too_many_interfaces_is_refused() -> None:
    from agent.device.gnmi.base import MAX_INTERFACES

    builder = CounterBuilder()
    for n in range(MAX_INTERFACES):
        builder.pfc(f"swp{n}", 3, "rx", 1)
    with pytest.raises(UpdateError, match="more than"):
        builder.pfc("swp-one-too-many", 3, "rx", 1)
