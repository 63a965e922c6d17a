"""Families a switch's gNMI stream lacks (the PFC watchdog on Cumulus Linux, headroom drops on
every NOS) read over SSH all the same: filled in from the SSH read, or "not read" with why
(not yet read, the read failed, the read lacked a port), never a 0 made up; the exporter
schedules that read only where a stream lacks something, and never with --no-ssh-complement."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.device.platforms.base import Connection, Platform
from agent.device.platforms.sonic import Sonic
from agent.device.state import (
    Counters,
    InterfaceCounters,
    QosState,
    UnreadFamily,
    WatchdogCounters,
)
from agent.intent.loader import load_fabric
from agent.intent.model import Device
from exporters.exporter import Exporter, ExporterOptions
from exporters.fasttext import device_block
from exporters.poller import SwitchPoller, SwitchRead
from exporters.store import Complement, FabricIndex, SnapshotStore, SwitchInventory
from tests.unit.test_exporter_poller import FakeNetmiko, FakePlatform

STORMED = {3: WatchdogCounters(storms_detected=2, storms_restored=1, stormed=True)}
HEADROOM = (0, 0, 0, 9, 0, 0, 0, 0)
BOTH: frozenset[UnreadFamily] = frozenset({"watchdog", "headroom_drops"})
REPO = Path(__file__).resolve().parents[2]


def streamed(*ports: str) -> Counters:
    """What a Cumulus stream gives: PFC and queues, neither family read."""
    interfaces = {p: InterfaceCounters(pfc_rx=(0, 0, 0, 5, 0, 0, 0, 0)) for p in ports}
    unread = {"watchdog": "no gNMI path", "headroom_drops": "no gNMI path"}
    return Counters(device="leaf2", collected_at=1.0, interfaces=interfaces, unread=unread)


def over_ssh(*ports: str, unread: dict[str, str] | None = None) -> Counters:
    interfaces = {
        p: InterfaceCounters(pfc_rx=(0, 0, 0, 4, 0, 0, 0, 0), watchdog=STORMED,
                             headroom_drops=HEADROOM)
        for p in ports
    }  # fmt: skip
    return Counters(device="leaf2", collected_at=0.5, interfaces=interfaces, unread=unread or {})


FILLS: list[tuple[str, Complement, dict[str, str]]] = [
    ("not read yet", Complement(BOTH), {"watchdog": "not read over SSH yet",
                                        "headroom_drops": "not read over SSH yet"}),
    ("read", Complement(BOTH, over_ssh("swp1", "swp2")), {}),
    ("only the watchdog asked", Complement(frozenset({"watchdog"}), over_ssh("swp1", "swp2")),
     {"headroom_drops": "no gNMI path"}),
    ("the read failed", Complement(BOTH, None, "its SSH read failed (timeout): no answer"),
     {"watchdog": "its SSH read failed (timeout): no answer",
      "headroom_drops": "its SSH read failed (timeout): no answer"}),
    ("a port missing from the read", Complement(BOTH, over_ssh("swp1")),
     {"watchdog": "the SSH read did not report swp2",
      "headroom_drops": "the SSH read did not report swp2"}),
    ("not read over SSH either", Complement(BOTH, over_ssh("swp1", "swp2",
                                                            unread={"watchdog": "off"})),
     {"watchdog": "not read over SSH either: off",
      "headroom_drops": "not read over SSH either: off"}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "complement", "unread"), FILLS, ids=[f[0] for f in FILLS])
def test_fill(case: str, complement: Complement, unread: dict[str, str]) -> None:
    filled = complement.fill(streamed("swp1", "swp2"))
    assert filled.unread == unread
    for port in ("swp1", "swp2"):
        interface = filled.interfaces[port]
        assert interface.pfc_rx[3] == 5  # the stream's counters stay the stream's
        if "watchdog" not in unread and "watchdog" in complement.families:
            assert interface.watchdog == STORMED
        if "headroom_drops" not in unread and "headroom_drops" in complement.families:
            assert interface.headroom_drops == HEADROOM


def nvue_device() -> Device:
    return Device.model_validate({
        "name": "leaf2", "platform": "cumulus_nvue", "role": "leaf", "host": "127.0.0.1",
        "username": "admin", "credentials": {"password_env": "UNUSED"},
        "ports": [{"name": "swp1", "speed": "100G", "cable_m": 1, "mtu": 9000}],
    })  # fmt: skip


class SshLeaf(FakePlatform):
    """The SSH read of leaf2: the watchdog stormed on swp1, priority 3."""

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        counters = super().read_counters(conn, state)
        return over_ssh("swp1").model_copy(update={"collected_at": counters.collected_at})


def lines(store: SnapshotStore) -> str:
    snapshot = store.snapshot()
    return b"".join(device_block(snapshot.fabric, snapshot.devices["leaf2"])).decode()


def test_the_ssh_read_fills_the_stream_and_a_failure_empties_it_again() -> None:
    store = SnapshotStore(
        "lab", [SwitchInventory("leaf2", ("swp1",), ())], FabricIndex(device_names=["leaf2"])
    )
    store.set_complement("leaf2", Complement(BOTH))
    store.update_counters("leaf2", streamed("swp1"), None, at=time.time())
    assert "roce_pfc_watchdog_stormed" not in lines(store)  # not read yet: no series
    platform = SshLeaf()

    def connector(device: Device, platform: Platform) -> Connection:
        return Connection(FakeNetmiko(), device.name)

    read = SwitchRead(None, platform, connector, counters=False, complement=BOTH)
    poller = SwitchPoller(nvue_device(), store, 15.0, 5.0, read)
    poller.succeeded(poller.poll(), 0.2)
    text = lines(store)
    where = 'device="leaf2",fabric="lab",interface="swp1",priority="3"'
    assert f"roce_pfc_watchdog_stormed{{{where}}} 1" in text
    assert f"roce_headroom_dropped_packets_total{{{where}}} 9" in text
    store.update_counters("leaf2", streamed("swp1"), None, at=time.time())  # the next sample
    assert store.snapshot().devices["leaf2"].counters.interfaces["swp1"].watchdog == STORMED
    assert store.snapshot().devices["leaf2"].status.up
    poller.failed("timeout", 5.0, TimeoutError("no answer"))
    view = store.snapshot().devices["leaf2"]
    assert view.status.up  # the stream still reads the switch
    assert view.counters is not None
    assert view.counters.unread["watchdog"].startswith("its SSH read failed (timeout)")
    assert "roce_pfc_watchdog_stormed" not in lines(store)


def fabric(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump({
        "name": "complement",
        "profile": "nvidia-default",
        "defaults": {"username": "admin", "credentials": {"password_env": "ROCE_TEST_PW"}},
        "devices": [
            {"name": "leaf1", "platform": "sonic", "role": "leaf", "host": "127.0.0.1",
             "ports": [{"name": "Ethernet0", "speed": "100G", "cable_m": 1, "mtu": 9000}]},
            {"name": "leaf2", "platform": "cumulus_nvue", "role": "leaf", "host": "127.0.0.2",
             "ports": [{"name": "swp1", "speed": "100G", "cable_m": 1, "mtu": 9000}]},
            {"name": "spine1", "platform": "cisco_nxos", "role": "spine", "host": "127.0.0.3",
             "ports": [{"name": "Ethernet1/1", "speed": "100G", "cable_m": 1, "mtu": 9000}]},
        ],
    }))  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {"leaf1": frozenset({"headroom_drops", "trim"}), "leaf2": BOTH | {"trim"}}),
        ({"ssh_complement": False}, {}),
        ({"drift": True}, {"leaf1": frozenset({"headroom_drops", "trim"}), "leaf2": BOTH | {"trim"},
                           "spine1": frozenset()}),  # spine1: drift only (no gNMI, no counters)
        ({"telemetry": "ssh"}, {"leaf1": frozenset(), "leaf2": frozenset(),
                                "spine1": frozenset()}),
    ],
    ids=["gnmi", "no-ssh-complement", "gnmi-with-drift", "ssh"],
)  # fmt: skip
def test_the_ssh_read_is_scheduled_where_a_stream_lacks_a_family(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], expected: Any
) -> None:
    monkeypatch.setenv("ROCE_TEST_PW", "secret")
    fields: dict[str, Any] = {"listen": None, "interval_s": 1.0, "host_nic": False,
                              "telemetry": "gnmi", "drift": False, **changes}  # fmt: skip
    exporter = Exporter(load_fabric(fabric(tmp_path)).intent, ExporterOptions(**fields))
    jobs = {job.name: job for job in exporter.jobs if isinstance(job, SwitchPoller)}
    assert {name: job.complement for name, job in jobs.items()} == expected
    for name, job in jobs.items():
        assert job.counters == (fields["telemetry"] == "ssh"), name
        if fields["telemetry"] == "gnmi":
            assert job.interval_s >= 15.0  # the configuration read's pace


SONIC_RECORDED = REPO / "tests/data/platforms/sonic"
RECORDED = {
    "show priority-group drop counters": "show_pg_drop_counters.txt",
    "pfcwd show stats": "pfcwd_show_stats.txt",
}


class RecordedSonic:
    """A SONiC session answering the recorded outputs; it remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def send_command(self, command: str, read_timeout: float = 30.0) -> str:
        self.asked.append(command)
        return (SONIC_RECORDED / RECORDED[command]).read_text()


@pytest.mark.parametrize(
    ("families", "asked"),
    [
        (frozenset({"headroom_drops"}), ["show priority-group drop counters"]),
        (BOTH, ["pfcwd show stats", "show priority-group drop counters"]),
    ],
    ids=["headroom", "headroom-and-watchdog"],
)
def test_sonic_is_asked_only_for_what_its_stream_lacks(
    families: frozenset[UnreadFamily], asked: list[str]
) -> None:
    session = RecordedSonic()
    counters = Sonic().read_families(Connection(session, "leaf1"), families)
    assert session.asked == asked
    assert counters.interfaces  # the recorded tables name their ports
    if "watchdog" in families:
        assert any(i.watchdog for i in counters.interfaces.values())
    assert counters.interfaces["Ethernet0"].headroom_drops == tuple(range(800, 808))


class Everything(FakePlatform):
    """A platform with no per-family commands: a complement read is its whole read."""


def test_a_platform_without_family_commands_reads_everything() -> None:
    platform = Everything()
    counters = platform.read_families(Connection(FakeNetmiko(), "leaf1"), BOTH)
    assert platform.reads == 1 and counters.interfaces["Ethernet1"].pfc_rx[3] == 1
