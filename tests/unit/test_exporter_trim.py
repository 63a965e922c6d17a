"""Trim metrics: per queue and per port with the switch labels; absent (never 0) when the
family, a column, a queue or a port was not read; the fast text writes them byte for byte as
prometheus_client does; over gNMI they come from the SSH complement."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from agent.device.state import (
    Counters,
    InterfaceCounters,
    InterfaceTrim,
    QueueCounters,
    TrimCounters,
)
from exporters import metrics
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.probe_deltas import HostDirectory
from exporters.store import (
    Complement,
    FabricIndex,
    IntendedClass,
    SnapshotStore,
    SwitchInventory,
)

PORTS = ("Ethernet0", "Ethernet4")
QUEUE_METRICS = (
    "roce_queue_trimmed_packets_total",
    "roce_queue_trim_sent_packets_total",
    "roce_queue_trim_dropped_packets_total",
)
PORT_METRICS = (
    "roce_interface_trimmed_packets_total",
    "roce_interface_trim_sent_packets_total",
    "roce_interface_trim_dropped_packets_total",
)


def make_store() -> SnapshotStore:
    classes = tuple(
        IntendedClass(interface, p, pfc=False, ecn=p == 3) for interface in PORTS for p in range(8)
    )
    hosts = HostDirectory(frozenset(), {}, roce_priority=3)
    return SnapshotStore(
        "lab",
        [SwitchInventory("leaf1", PORTS, classes)],
        FabricIndex(hosts, device_names=["leaf1"]),
    )


def trimming(**update: object) -> Counters:
    """leaf1 after a 2:1 incast on a lossy-trim class: queue 3 of Ethernet0 trims, the port
    reports its total; Ethernet4's queue 3 and port printed N/A for sent and dropped."""
    ethernet0 = InterfaceCounters(
        queues={3: QueueCounters(tx_packets=10)},
        trim=InterfaceTrim(
            port=TrimCounters(trimmed=20_100, sent=19_050, dropped=1_050),
            queues={
                1: TrimCounters(trimmed=0, sent=0, dropped=0),
                3: TrimCounters(trimmed=20_000, sent=19_000, dropped=1_000),
            },
        ),
    )
    ethernet4 = InterfaceCounters(
        queues={3: QueueCounters(tx_packets=5)},
        trim=InterfaceTrim(port=TrimCounters(trimmed=100), queues={3: TrimCounters(trimmed=100)}),
    )
    counters = Counters(
        device="leaf1",
        collected_at=1.0,
        interfaces={"Ethernet0": ethernet0, "Ethernet4": ethernet4},
    )
    return counters.model_copy(update=update)


def exposition(store: SnapshotStore) -> str:
    registry = CollectorRegistry()
    registry.register(RoceCollector(store))
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def trim_samples(store: SnapshotStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = samples(exposition(store))
    return {k: v for k, v in found.items() if "trim" in k[0]}


def queue(name: str, interface: str, q: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"device": "leaf1", "fabric": "lab", "interface": interface, "queue": str(q)}
    return name, tuple(sorted(labels.items()))


def port(name: str, interface: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"device": "leaf1", "fabric": "lab", "interface": interface}
    return name, tuple(sorted(labels.items()))


def test_the_specs_follow_the_naming_rules() -> None:
    specs = {spec.name: spec for spec in metrics.SPECS}
    for name in QUEUE_METRICS:
        assert specs[name].type == "counter" and specs[name].labels == (
            "fabric", "device", "interface", "queue",
        )  # fmt: skip
    for name in PORT_METRICS:
        assert specs[name].type == "counter"
        assert specs[name].labels == ("fabric", "device", "interface")


def test_trim_series_carry_the_switch_labels_and_only_what_was_read() -> None:
    store = make_store()
    store.update_counters("leaf1", trimming(), 0.2)
    found = trim_samples(store)
    assert found == {
        queue("roce_queue_trimmed_packets_total", "Ethernet0", 1): 0.0,
        queue("roce_queue_trim_sent_packets_total", "Ethernet0", 1): 0.0,
        queue("roce_queue_trim_dropped_packets_total", "Ethernet0", 1): 0.0,
        queue("roce_queue_trimmed_packets_total", "Ethernet0", 3): 20_000.0,
        queue("roce_queue_trim_sent_packets_total", "Ethernet0", 3): 19_000.0,
        queue("roce_queue_trim_dropped_packets_total", "Ethernet0", 3): 1_000.0,
        port("roce_interface_trimmed_packets_total", "Ethernet0"): 20_100.0,
        port("roce_interface_trim_sent_packets_total", "Ethernet0"): 19_050.0,
        port("roce_interface_trim_dropped_packets_total", "Ethernet0"): 1_050.0,
        # Ethernet4 printed N/A for sent and dropped: no series, not 0.
        queue("roce_queue_trimmed_packets_total", "Ethernet4", 3): 100.0,
        port("roce_interface_trimmed_packets_total", "Ethernet4"): 100.0,
    }


@pytest.mark.parametrize(
    "counters",
    [
        trimming(unread={"trim": "the platform does not trim (rule IR022)"}),
        Counters(
            device="leaf1", collected_at=1.0, interfaces={p: InterfaceCounters() for p in PORTS}
        ),
    ],
    ids=["family-not-read", "nothing-reported"],
)
def test_no_trim_series_for_what_was_not_read(counters: Counters) -> None:
    store = make_store()
    store.update_counters("leaf1", counters, 0.2)
    assert trim_samples(store) == {}
    assert 'roce_device_up{device="leaf1",fabric="lab"} 1.0' in exposition(store)  # read


def test_no_trim_series_before_the_first_poll() -> None:
    assert trim_samples(make_store()) == {}


def test_fast_text_writes_trim_series_as_generate_latest() -> None:
    store = make_store()
    big = TrimCounters(trimmed=987_654_321_012, sent=1_234_567, dropped=None)
    counters = trimming()
    ethernet0 = counters.interfaces["Ethernet0"]
    counters.interfaces["Ethernet0"] = ethernet0.model_copy(
        update={"trim": InterfaceTrim(port=big, queues={3: big})}
    )
    store.update_counters("leaf1", counters, 0.2)
    assert render_text(store.snapshot()).decode() == exposition(store)


def test_over_gnmi_the_trim_family_comes_from_the_ssh_complement() -> None:
    store = make_store()
    streamed = Counters(
        device="leaf1",
        collected_at=1.0,
        interfaces={p: InterfaceCounters(queues={3: QueueCounters(tx_packets=1)}) for p in PORTS},
    )
    store.set_complement("leaf1", Complement(frozenset({"trim"})))
    store.update_counters("leaf1", streamed, 0.2)
    assert trim_samples(store) == {}  # not read over SSH yet: absent
    store.set_complement("leaf1", Complement(frozenset({"trim"}), trimming()))
    store.update_counters("leaf1", streamed.model_copy(update={"collected_at": 2.0}), 0.2)
    found = trim_samples(store)
    assert found[queue("roce_queue_trim_dropped_packets_total", "Ethernet0", 3)] == 1_000.0
    assert found[port("roce_interface_trimmed_packets_total", "Ethernet4")] == 100.0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_the_trim_series() -> None:
    store = make_store()
    store.update_counters("leaf1", trimming(), 0.2)
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=exposition(store), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
