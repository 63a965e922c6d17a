"""Each NOS's gNMI tree on one data-plane snapshot: the documented paths give the documented
shapes, filled from the counters, and the paths a NOS does not serve are refused by name.

No server here (tests/unit/test_lab_gnmi_server.py serves them over TLS): the trees' answers
are compared with the vendors' documents and, for SONiC, sonic-gnmi's test data (field names
in tests/unit/lab_gnmi_support.py).
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt import gnmi
from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.nos import GnmiError, NosTree
from lab.mgmt.gnmi.snapshot import Sampler
from tests.unit.lab_gnmi_support import (
    PORTS,
    SONIC_ECN_FIELD,
    SONIC_PG_FIELDS,
    SONIC_PORT_FIELDS,
    SONIC_QUEUE_FIELDS,
    SONIC_WATCHED_QUEUE_FIELDS,
    dataplane,
    leaves,
    run,
    view,
)

PROTO = gnmi_pb2.Encoding.PROTO
JSON = gnmi_pb2.Encoding.JSON
JSON_IETF = gnmi_pb2.Encoding.JSON_IETF
DB = gnmi_pb2.Path(target="COUNTERS_DB")


def tree(nos: str) -> NosTree:
    found = gnmi.tree_for(nos, PORTS)
    assert found is not None
    return found


def answer(nos: str, xpath: str, encoding: int = PROTO, prefix: gnmi_pb2.Path | None = None,
           **setup: Any) -> dict[str, Any]:  # fmt: skip
    """``{path: value}`` of what ``xpath`` gives on a snapshot ``setup`` fills in."""
    dp = dataplane(watchdog=setup.pop("watchdog", True))
    fill(dp.counters_snapshot, **setup)
    nos_tree = tree(nos)
    query = nos_tree.resolve(prefix or gnmi_pb2.Path(), paths.to_proto(paths.parse(xpath)))
    updates = nos_tree.updates(query, view(dp), encoding)
    return leaves([gnmi_pb2.Notification(update=updates)])


def fill(counters: dict[str, Any], **setup: Any) -> None:
    """Numbers on eth1 (SONiC Ethernet0, Cumulus swp1, EOS Ethernet1) and eth3."""
    eth1, eth3 = counters["ports"]["eth1"], counters["ports"]["eth3"]
    eth1["pfc"]["rx_xoff"][3] = setup.get("rx_xoff", 7)
    eth1["pfc"]["rx_xon"][3] = 2
    eth1["pfc"]["tx_xoff"][3] = 5
    eth1["rx_bytes"], eth1["rx_packets"], eth1["tx_bytes"] = 123_456, 100, 654_321
    eth1["drops"]["ttl"] = 1
    eth1["ingress"]["headroom_drops"][3] = 4
    eth1["ingress"]["watermark_bytes"][3] = 42_000  # XOFF is 30000: 12000 above it
    queue = eth1["queues"]["3"]
    queue.update(tx_packets=50, tx_bytes=5_000, tail_drops=6, ecn_marked=9)
    queue.update(depth_bytes=1_500, watermark_bytes=20_000)
    queue["watchdog"].update(setup.get("wd", {}))
    eth3["pfc"]["rx_xoff"][7] = 11


# ----------------------------------------------------------------------------- SONiC


def test_sonic_port_counters_are_the_sai_field_map_as_strings() -> None:
    got = answer("sonic", "COUNTERS/Ethernet0", JSON_IETF, DB)
    (value,) = got.values()
    assert list(got) == ["/COUNTERS/Ethernet0"]
    assert set(value) <= SONIC_PORT_FIELDS  # every field a real SONiC switch has
    assert all(isinstance(v, str) for v in value.values())
    assert value["SAI_PORT_STAT_PFC_3_RX_PKTS"] == "9"  # XOFF and XON frames
    assert value["SAI_PORT_STAT_PFC_3_TX_PKTS"] == "5"
    assert value["SAI_PORT_STAT_IF_IN_OCTETS"] == "123456"
    assert value["SAI_PORT_STAT_IF_OUT_OCTETS"] == "654321"
    assert value["SAI_PORT_STAT_IF_IN_DISCARDS"] == "5"  # TTL drop + headroom drops
    assert value["SAI_PORT_STAT_IF_OUT_DISCARDS"] == "6"
    pfc = {f"SAI_PORT_STAT_PFC_{p}_{d}_PKTS" for p in range(8) for d in ("RX", "TX")}
    assert pfc <= set(value)


def test_sonic_one_field_is_a_string_val_and_the_wildcard_a_map_by_port() -> None:
    assert answer("sonic", "COUNTERS/Ethernet0/SAI_PORT_STAT_PFC_3_RX_PKTS", prefix=DB) == {
        "/COUNTERS/Ethernet0/SAI_PORT_STAT_PFC_3_RX_PKTS": "9"
    }
    # The shape of testdata/COUNTERS:Ethernet_wildcard_PFC_7_RX.txt.
    got = answer("sonic", "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_RX_PKTS", prefix=DB)
    assert got == {
        "/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_RX_PKTS": {
            "Ethernet0": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "0"},
            "Ethernet4": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "0"},
            "Ethernet8": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "11"},
            "Ethernet12": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "0"},
        }
    }
    every = answer("sonic", "COUNTERS/Ethernet*", prefix=DB)["/COUNTERS/Ethernet*"]
    assert list(every) == ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]


def test_sonic_queues_carry_the_watchdog_fields_on_watched_queues_only() -> None:
    got = answer("sonic", "COUNTERS/Ethernet0/Queues", prefix=DB, wd={"storms_detected": 2})
    queues = got["/COUNTERS/Ethernet0/Queues"]
    assert list(queues) == [f"Ethernet0:{q}" for q in range(8)]
    assert set(queues["Ethernet0:0"]) <= SONIC_QUEUE_FIELDS | {SONIC_ECN_FIELD}
    watched = queues["Ethernet0:3"]
    assert set(watched) <= SONIC_WATCHED_QUEUE_FIELDS | {SONIC_ECN_FIELD}
    assert watched == {
        "PFC_WD_ACTION": "drop",
        "PFC_WD_DETECTION_TIME": "200000",  # µs, as pfcwdorch writes the configured 200 ms
        "PFC_WD_RESTORATION_TIME": "400000",
        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "2",
        "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": "0",
        "PFC_WD_STATUS": "operational",
        "SAI_QUEUE_ATTR_PAUSE_STATUS": "false",
        "SAI_QUEUE_STAT_BYTES": "5000",
        "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": "1500",
        "SAI_QUEUE_STAT_DROPPED_PACKETS": "6",
        "SAI_QUEUE_STAT_PACKETS": "50",
        "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "20000",
        "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "9",
    }
    every = answer("sonic", "COUNTERS/Ethernet*/Queues", prefix=DB)["/COUNTERS/Ethernet*/Queues"]
    assert len(every) == 4 * 8 and "Ethernet12:7" in every


@pytest.mark.parametrize("watchdog", [True, False])
def test_sonic_pfcwd_path_lists_the_watched_queues(watchdog: bool) -> None:
    got = answer("sonic", "COUNTERS/Ethernet*/Pfcwd", prefix=DB, watchdog=watchdog)
    pfcwd = got["/COUNTERS/Ethernet*/Pfcwd"]
    if watchdog:
        assert sorted(pfcwd) == sorted(f"Ethernet{4 * i}:3" for i in range(4))
        assert pfcwd["Ethernet0:3"]["PFC_WD_STATUS"] == "operational"
    else:
        assert pfcwd == {}
        queues = answer("sonic", "COUNTERS/Ethernet0/Queues", prefix=DB, watchdog=False)
        assert "PFC_WD_STATUS" not in queues["/COUNTERS/Ethernet0/Queues"]["Ethernet0:3"]


def test_sonic_priority_group_watermarks_split_at_xoff() -> None:
    got = answer("sonic", "PERIODIC_WATERMARKS/Ethernet0/PriorityGroups", prefix=DB)
    groups = got["/PERIODIC_WATERMARKS/Ethernet0/PriorityGroups"]
    assert all(set(v) == SONIC_PG_FIELDS for v in groups.values())
    assert groups["Ethernet0:3"] == {
        "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": "30000",
        "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": "12000",
    }


@pytest.mark.parametrize(
    ("target", "origin", "xpath", "code", "words"),
    [
        ("", "", "COUNTERS/Ethernet0", grpc.StatusCode.UNIMPLEMENTED, "Empty target"),
        ("APPL_DB", "", "COUNTERS/Ethernet0", grpc.StatusCode.NOT_FOUND, "target APPL_DB"),
        ("COUNTERS_DB", "openconfig", "COUNTERS/Ethernet0", grpc.StatusCode.UNIMPLEMENTED,
         "origin"),
        ("COUNTERS_DB", "", "COUNTERS/Ethernet99", grpc.StatusCode.NOT_FOUND, "Ethernet99"),
        ("COUNTERS_DB", "", "COUNTERS/Ethernet0/SAI_PORT_STAT_PFC_3_ON2OFF_RX_PKTS",
         grpc.StatusCode.NOT_FOUND, "ON2OFF"),
        ("COUNTERS_DB", "", "COUNTERS/Ethernet0/Bogus/x", grpc.StatusCode.NOT_FOUND,
         "COUNTERS/Ethernet0/Bogus/x"),
        ("COUNTERS_DB", "", "PERIODIC_WATERMARKS/Ethernet0", grpc.StatusCode.NOT_FOUND,
         "PERIODIC_WATERMARKS/Ethernet0"),
        ("COUNTERS_DB", "", "COUNTERS/Ethernet0[k=v]", grpc.StatusCode.NOT_FOUND, "[key=value]"),
    ],
)  # fmt: skip
def test_sonic_refuses_what_sonic_gnmi_refuses(
    target: str, origin: str, xpath: str, code: grpc.StatusCode, words: str
) -> None:
    with pytest.raises(GnmiError) as raised:
        tree("sonic").resolve(
            gnmi_pb2.Path(target=target, origin=origin), paths.to_proto(paths.parse(xpath))
        )
    assert raised.value.code == code
    assert words in raised.value.message


# ----------------------------------------------------------------------------- Cumulus (NVUE)

NVUE_IF = "/qos/interfaces/interface[interface-id=swp1]"


@pytest.mark.parametrize(
    ("xpath", "expected"),
    [
        (f"{NVUE_IF}/switch-priority[priority=3]/state/counters/in-pause-pkts", 9),
        (f"{NVUE_IF}/switch-priority[priority=3]/state/counters/out-pause-pkts", 5),
        (f"{NVUE_IF}/switch-priority[priority=3]/state/counters/in-discards", 4),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/transmit-pkts", 50),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/transmit-octets", 5000),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/ecn-marked-pkts", 9),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/wred-dropped-pkts", 0),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/no-buffer-uc-dropped-pkts", 6),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/max-queue-len", 20000),
        (f"{NVUE_IF}/output/queues/queue[name=3]/state/instant-queue-len", 1500),
    ],
)
def test_nvue_documented_leaves_are_uint_vals(xpath: str, expected: int) -> None:
    assert answer("nvue", xpath) == {xpath: expected}


def test_nvue_wildcards_and_containers_expand_to_their_leaves() -> None:
    got = answer(
        "nvue", "/qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state"
    )
    assert len(got) == 4 * 8 * 3  # ports x priorities x counters; no pause durations
    assert (
        got[
            "/qos/interfaces/interface[interface-id=swp3]/switch-priority[priority=7]/state/counters"
            "/in-pause-pkts"
        ]
        == 11
    )
    queues = answer("nvue", f"{NVUE_IF}/output/queues/queue[name=*]/state/transmit-octets")
    assert len(queues) == 8
    assert answer("nvue", "/qos/interfaces/interface/output/queues") != {}  # keys left out


def test_nvue_pause_durations_are_valid_paths_the_lab_cannot_fill() -> None:
    xpath = f"{NVUE_IF}/switch-priority[priority=3]/state/in-pause-duration"
    assert answer("nvue", xpath) == {}


def test_nvue_json_encoding_sends_json_numbers() -> None:
    xpath = f"{NVUE_IF}/switch-priority[priority=3]/state/counters/in-pause-pkts"
    dp = dataplane()
    fill(dp.counters_snapshot)
    nvue = tree("nvue")
    query = nvue.resolve(gnmi_pb2.Path(), paths.to_proto(paths.parse(xpath)))
    (update,) = nvue.updates(query, view(dp), JSON)
    assert update.val.json_val == b"9"


@pytest.mark.parametrize(
    ("nos", "xpath"),
    [
        ("nvue", "/qos/interfaces/interface[interface-id=swp1]/pfc-watchdog/state"),
        ("nvue", "/qos/interfaces/interface[name=swp1]/output"),  # the key is interface-id
        ("nvue", "/interfaces/interface[name=swp1]/ethernet/pfc"),
        ("eos", "/qos/interfaces/interface[interface-id=Ethernet1]/switch-priority"),
        ("eos", "/interfaces/interface[name=Ethernet1]/state/counters/bogus"),
        ("eos", "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue/state"
                "/max-queue-len"),  # an EOS 4.36.1F deviation: not supported
    ],
)  # fmt: skip
def test_unknown_openconfig_paths_are_not_found_by_name(nos: str, xpath: str) -> None:
    with pytest.raises(GnmiError) as raised:
        tree(nos).resolve(gnmi_pb2.Path(), paths.to_proto(paths.parse(xpath)))
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert paths.text(paths.parse(xpath)) in raised.value.message


# ----------------------------------------------------------------------------- EOS

EOS_IF = "/interfaces/interface[name=Ethernet1]"
EOS_PFC = f"{EOS_IF}/ethernet/pfc"


def test_eos_pfc_augment_gives_frames_per_priority() -> None:
    got = answer("eos", f"{EOS_PFC}/priorities/priority[index=3]/state")
    assert got == {
        f"{EOS_PFC}/priorities/priority[index=3]/state/index": 3,
        f"{EOS_PFC}/priorities/priority[index=3]/state/in-frames": 9,
        f"{EOS_PFC}/priorities/priority[index=3]/state/out-frames": 5,
    }


def test_eos_watchdog_tx_queues_count_storms_of_watched_queues() -> None:
    state = f"{EOS_PFC}/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state"
    got = answer("eos", f"{EOS_PFC}/watchdog", wd={"storms_detected": 2, "storms_restored": 1})
    assert got == {
        f"{state}/index": 3,
        f"{state}/queue-type": "UNICAST",
        f"{state}/stuck-count": 2,
        f"{state}/recovery-count": 1,
    }
    assert answer("eos", f"{EOS_PFC}/watchdog", watchdog=False) == {}


def test_eos_interface_and_queue_counters() -> None:
    counters = answer("eos", f"{EOS_IF}/state/counters")
    assert counters[f"{EOS_IF}/state/counters/in-octets"] == 123_456
    assert counters[f"{EOS_IF}/state/counters/in-pkts"] == 100
    assert counters[f"{EOS_IF}/state/counters/out-octets"] == 654_321
    assert counters[f"{EOS_IF}/state/counters/in-discards"] == 5
    assert counters[f"{EOS_IF}/state/counters/out-discards"] == 6
    queue = "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state"
    assert answer("eos", queue) == {
        f"{queue}/transmit-pkts": 50,
        f"{queue}/transmit-octets": 5000,
        f"{queue}/dropped-pkts": 6,
        f"{queue}/ecn-marked-pkts": 9,
    }
    assert answer("eos", f"{EOS_IF}/ethernet/state/counters/in-mac-pause-frames") == {}


def test_eos_json_ietf_writes_counter64_as_strings_and_small_ints_as_numbers() -> None:
    got = answer("eos", f"{EOS_PFC}/priorities/priority[index=3]/state", JSON_IETF)
    assert got[f"{EOS_PFC}/priorities/priority[index=3]/state/in-frames"] == "9"
    assert got[f"{EOS_PFC}/priorities/priority[index=3]/state/index"] == 3
    stuck = answer("eos", f"{EOS_PFC}/watchdog", JSON_IETF, wd={"storms_detected": 1})
    assert 1 in stuck.values() and "UNICAST" in stuck.values()  # counter32 is a number


@pytest.mark.parametrize("origin", ["", "openconfig"])
def test_eos_takes_the_openconfig_origin_or_none(origin: str) -> None:
    path = paths.to_proto(paths.parse(f"{EOS_PFC}/priorities"), origin=origin)
    assert tree("eos").resolve(gnmi_pb2.Path(), path)
    with pytest.raises(GnmiError) as raised:
        tree("eos").resolve(gnmi_pb2.Path(origin="eos_native"), path)
    assert raised.value.code == grpc.StatusCode.UNIMPLEMENTED


def test_nxos_serves_no_gnmi_and_the_ports_are_the_nos_defaults() -> None:
    assert gnmi.tree_for("nxos") is None and gnmi.default_port("nxos") is None
    assert {n: gnmi.default_port(n) for n in ("sonic", "nvue", "eos")} == {
        "sonic": 8080, "nvue": 9339, "eos": 6030,
    }  # fmt: skip


# ----------------------------------------------------------------------------- sampling


def test_samplers_share_one_read_within_a_tenth_of_a_second() -> None:
    dp = dataplane()
    now = [0.0]
    sampler = Sampler(dp, PORTS, clock=lambda: now[0])

    async def scenario() -> None:
        first = await sampler.view()
        assert await sampler.view() is first
        now[0] = 0.05
        assert await sampler.view() is first
        now[0] = 0.2
        assert await sampler.view() is not first

    run(scenario)
    assert dp.reads == 2


def test_json_ietf_of_sonic_is_valid_json_with_string_values() -> None:
    got = answer("sonic", "COUNTERS/Ethernet*/Queues", JSON_IETF, DB)
    text = json.dumps(got)
    assert json.loads(text) == got
