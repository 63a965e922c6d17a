"""Packet trimming counters: SONiC and Cumulus Linux outputs (tests/data/trim_counters, each
file's source in its README) into the trim family, per port and queue; never a 0 for what the
device did not report; EOS and NX-OS say they do not trim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.device.platforms.arista_eos import AristaEos
from agent.device.platforms.base import Connection, PlatformError
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.sonic import Sonic
from agent.device.state import (
    Counters,
    InterfaceCounters,
    InterfaceState,
    QosState,
    TrimCounters,
    TrimState,
)
from exporters.store import Complement

DATA = Path(__file__).resolve().parents[1] / "data" / "trim_counters"
NA = None  # what the device printed as N/A, or did not print


def text(name: str) -> str:
    return (DATA / name).read_text()


def base_counters(*names: str) -> Counters:
    return Counters(
        device="sw1", collected_at=1.0, interfaces={n: InterfaceCounters() for n in names}
    )


def trim(trimmed: int | None, sent: int | None, dropped: int | None) -> TrimCounters:
    return TrimCounters(trimmed=trimmed, sent=sent, dropped=dropped)


# ------------------------------------------------------------------------------ SONiC

SONIC_CASES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    (
        "202511",
        {"queue": "sonic_queue_trim.json", "port": "sonic_port_trim.json"},
        {
            "queues": {
                ("Ethernet0", 0): trim(0, 0, 0),
                ("Ethernet0", 1): trim(100, 50, 50),
                ("Ethernet0", 2): trim(NA, NA, NA),
                ("Ethernet0", 3): trim(20_000, 19_000, 1_000),  # comma numbers
                ("Ethernet4", 1): trim(100, 50, 50),
            },
            "ports": {
                "Ethernet0": trim(20_100, 19_050, 1_050),
                "Ethernet4": trim(100, 50, NA),
            },
            "trim_unread": {},
        },
    ),
    (
        "202505",
        {"queue": "sonic_queue_trim_202505.json", "port": "sonic_port_trim_202505.json"},
        {
            "queues": {("Ethernet0", 1): trim(100, NA, NA), ("Ethernet0", 3): trim(20_000, NA, NA)},
            "ports": {"Ethernet0": trim(20_100, NA, NA)},
            "trim_unread": {"sent": "SONiC 202505", "dropped": "SONiC 202505"},
        },
    ),
    (
        "port-command-refused",
        {"queue": "sonic_queue_trim.json", "port": "sonic_port_trim_refused.txt"},
        {
            "queues": {("Ethernet4", 1): trim(100, 50, 50)},
            "ports": {"Ethernet0": None, "Ethernet4": None},
            "trim_unread": {},
        },
    ),
]


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in SONIC_CASES],
                         ids=[c[0] for c in SONIC_CASES])  # fmt: skip
def test_sonic_trim(files: dict[str, str], expected: dict[str, Any]) -> None:
    outputs = {key: text(name) for key, name in files.items()}
    counters = Sonic.trim_from_text(base_counters("Ethernet0", "Ethernet4"), outputs)
    assert "trim" not in counters.unread
    for (port, queue), want in expected["queues"].items():
        assert counters.interfaces[port].trim.queues[queue] == want, (port, queue)
    for port, want in expected["ports"].items():
        assert counters.interfaces[port].trim.port == want, port
    # Only unicast queues 0-7 are traffic classes (UC8, UC9, MC10 and ALL20 are not).
    assert set(counters.interfaces["Ethernet0"].trim.queues) == set(range(8))
    assert set(counters.trim_unread) == set(expected["trim_unread"])
    for column, words in expected["trim_unread"].items():
        assert words in counters.trim_unread[column]


def test_sonic_without_the_feature_reads_the_family_as_not_read() -> None:
    outputs = {
        "queue": text("sonic_queue_trim_refused.txt"),
        "port": text("sonic_port_trim_refused.txt"),
    }
    counters = Sonic.trim_from_text(base_counters("Ethernet0"), outputs)
    why = counters.unread["trim"]
    assert "show queue counters --trim -j" in why and "no such option: --trim" in why
    assert counters.interfaces["Ethernet0"].trim.queues == {}


def test_sonic_garbage_is_an_error_not_a_zero() -> None:
    with pytest.raises(PlatformError, match="did not return JSON"):
        Sonic.trim_from_text(base_counters("Ethernet0"), {"queue": "garbage", "port": "{}"})
    with pytest.raises(PlatformError, match="a packet count or N/A"):
        Sonic.trim_from_text(
            base_counters("Ethernet0"),
            {"queue": '{"Ethernet0": {"UC1": {"trimpacket": "lots"}}}', "port": "{}"},
        )


class Replies(Connection):
    def __init__(self, replies: dict[str, str]) -> None:
        super().__init__(netmiko=None, device="sw1")
        self.replies = replies
        self.sent: list[str] = []

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        self.sent.append(command)
        return next((out for prefix, out in self.replies.items() if command.startswith(prefix)), "")


TRIMMING = QosState(trim=TrimState(size_bytes=256, dscp=11, priority=4))


@pytest.mark.parametrize(
    ("state", "asked", "why"),
    [
        (None, False, "whether it trims is unknown"),
        (QosState(), False, "packet trimming is off"),
        (TRIMMING, True, None),
    ],
    ids=["state-not-read", "trimming-off", "trimming"],
)
def test_sonic_asks_for_trim_counters_only_when_it_trims(
    state: QosState | None, asked: bool, why: str | None
) -> None:
    conn = Replies({
        "show queue counters --trim -j": text("sonic_queue_trim.json"),
        "show interfaces counters trim -j": text("sonic_port_trim.json"),
        "show pfc counters": "",
    })  # fmt: skip
    counters = Sonic().read_counters(conn, state)
    assert ("show queue counters --trim -j" in conn.sent) is asked
    if why is None:
        assert "trim" not in counters.unread
    else:
        assert why in counters.unread["trim"]


def test_sonic_complement_reads_the_trim_family_alone() -> None:
    conn = Replies({
        "show queue counters --trim -j": text("sonic_queue_trim.json"),
        "show interfaces counters trim -j": text("sonic_port_trim.json"),
    })  # fmt: skip
    counters = Sonic().read_families(conn, frozenset({"trim"}), TRIMMING)
    assert conn.sent == list(Sonic.TRIM_COMMANDS.values())
    assert counters.interfaces["Ethernet0"].trim.queues[1] == trim(100, 50, 50)


# ------------------------------------------------------------------------------ Cumulus

NVUE_SPECTRUM4_SENT = "N/A on every port"
NVUE_CASES: list[tuple[str, str, dict[str, str], dict[str, Any]]] = [
    (
        "5.19-spectrum-4",
        "nvue_519_ports.txt",
        {"swp1": "nvue_519_swp1.txt"},
        {
            "queues": {("swp1", 1): trim(1000, NA, NA), ("swp1", 3): trim(3000, NA, NA)},
            "ports": {"swp1": trim(1000, NA, NA), "swp4": trim(5000, NA, NA)},
            "trim_unread": {"sent": NVUE_SPECTRUM4_SENT, "dropped": "whole switch only"},
        },
    ),
    (
        "5.19-spectrum-5",
        "nvue_519_ports_spectrum5.txt",
        {"swp1": "nvue_519_swp1.txt"},
        {
            "queues": {("swp1", 2): trim(2000, NA, NA)},
            "ports": {"swp1": trim(1000, 900, NA), "swp2": trim(2000, NA, NA)},
            "trim_unread": {"dropped": "whole switch only"},
        },
    ),
    (
        "5.15",
        "nvue_515_ports.txt",
        {"swp1": "nvue_515_swp1.txt"},
        {
            "queues": {("swp1", 1): trim(1000, NA, NA), ("swp1", 3): trim(3000, NA, NA)},
            "ports": {"swp1": None},  # its meaning depends on the ASIC: not read
            "trim_unread": {"sent": "Spectrum-5", "dropped": "whole switch only"},
        },
    ),
]


@pytest.mark.parametrize(("ports", "classes", "expected"), [c[1:] for c in NVUE_CASES],
                         ids=[c[0] for c in NVUE_CASES])  # fmt: skip
def test_nvue_trim(ports: str, classes: dict[str, str], expected: dict[str, Any]) -> None:
    counters = CumulusNvue.trim_from_text(
        base_counters("swp1", "swp2", "swp3", "swp4"),
        text(ports),
        {name: text(file) for name, file in classes.items()},
    )
    assert "trim" not in counters.unread
    for (port, queue), want in expected["queues"].items():
        assert counters.interfaces[port].trim.queues[queue] == want, (port, queue)
    for port, want in expected["ports"].items():
        assert counters.interfaces[port].trim.port == want, port
    assert set(counters.trim_unread) == set(expected["trim_unread"])
    for column, words in expected["trim_unread"].items():
        assert words in counters.trim_unread[column]


def test_nvue_before_515_reads_the_family_as_not_read() -> None:
    counters = CumulusNvue.trim_from_text(base_counters("swp1"), text("nvue_refused.txt"), {})
    assert "since Cumulus Linux 5.15" in counters.unread["trim"]


NVUE_TREE = {
    "system": {"forwarding": {"packet-trim": {
        "state": "enabled", "size": 256, "switch-priority": 4, "remark": {"dscp": 11}}}},
    "interface": {
        "swp1": {"packet-trim": {"egress-eligibility": {"traffic-class": {"1": {}}}}},
        "swp2": {},
    },
}  # fmt: skip


@pytest.mark.parametrize("release", ["5.19", "5.15"])
def test_nvue_reads_each_trimming_port_in_its_release_form(release: str) -> None:
    import json

    per_class = {
        "5.19": {"nv show interface swp1 counters packet-trim": text("nvue_519_swp1.txt")},
        "5.15": {
            "nv show interface swp1 counters packet-trim": text("nvue_refused.txt"),
            "nv show interface swp1 packet-trim counters": text("nvue_515_swp1.txt"),
        },
    }[release]
    conn = Replies({
        "nv config show -o json": json.dumps([{"header": {}}, {"set": NVUE_TREE}]),
        "nv show interface swp1 counters qos": "{}",
        "nv show interface swp2 counters qos": "{}",
        "nv show interface swp1 qos pfc-watchdog": "{}",
        "nv show interface swp2 qos pfc-watchdog": "{}",
        "nv show system forwarding packet-trim counters": text(
            "nvue_519_ports.txt" if release == "5.19" else "nvue_515_ports.txt"
        ),
        **per_class,
    })  # fmt: skip
    counters = CumulusNvue().read_counters(conn)
    assert counters.interfaces["swp1"].trim.queues[1] == trim(1000, NA, NA)
    assert not any("swp2" in sent and "packet-trim" in sent for sent in conn.sent)


# ------------------------------------------------------------------------------ EOS, NX-OS


def test_platforms_that_do_not_trim_say_so() -> None:
    nxos = CiscoNxos().read_counters(Replies({}))
    assert nxos.unread["trim"] == (
        "the platform does not trim: NX-OS's published configuration guides have no packet "
        "trimming (rule IR022)"
    )
    state = QosState(interfaces={"Ethernet1": InterfaceState()})
    eos = AristaEos().read_counters(Replies({"show": "{}"}), state)
    assert eos.unread["trim"] == (
        "the platform does not trim: EOS's published configuration guides have no packet "
        "trimming (rule IR022)"
    )


# ------------------------------------------------------------------------------ complement


def test_a_complement_without_trim_keeps_the_other_families() -> None:
    streamed = base_counters("swp1").model_copy(
        update={"unread": {"headroom_drops": "x", "trim": "y"}}
    )
    read = base_counters("swp1").model_copy(update={"unread": {"trim": "does not trim"}})
    filled = Complement(frozenset({"headroom_drops", "trim"}), read).fill(streamed)
    assert filled.unread == {"trim": "not read over SSH either: does not trim"}


def test_a_complement_takes_the_trim_family_and_its_column_reasons() -> None:
    streamed = base_counters("Ethernet0", "Ethernet8").model_copy(update={"unread": {"trim": "y"}})
    read = Sonic.trim_from_text(
        base_counters(),
        {"queue": text("sonic_queue_trim_202505.json"), "port": text("sonic_port_trim.json")},
    )
    filled = Complement(frozenset({"trim"}), read).fill(streamed)
    assert "trim" not in filled.unread
    assert filled.interfaces["Ethernet0"].trim.queues[1].trimmed == 100
    assert filled.interfaces["Ethernet8"].trim.queues == {}  # not listed: nothing, not 0
    assert filled.trim_unread == read.trim_unread
