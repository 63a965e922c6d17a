"""The collector: snapshot in, exposition text out (table-driven), zero-fill, naming, labels."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from agent.device.state import (
    Counters,
    InterfaceCounters,
    PendingSession,
    QueueCounters,
    WatchdogCounters,
)
from agent.observe.hostnic import NicCounters, PortPause
from exporters import metrics
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.probe_deltas import LATENCY_BUCKETS_S, HostDirectory
from exporters.store import (
    CheckOutcome,
    ConfigRead,
    FabricIndex,
    IntendedClass,
    SnapshotStore,
    StoreError,
    SwitchInventory,
)

REPO = Path(__file__).resolve().parents[2]
HOSTS = HostDirectory(
    frozenset({"h1", "h2", "h3"}),
    {"198.18.0.9": "h1", "198.18.0.11": "h2", "198.18.0.13": "h3"},
    roce_priority=3,
)


def make_store() -> SnapshotStore:
    classes = tuple(
        IntendedClass(interface, p, pfc=p == 3, ecn=p == 3)
        for interface in ("Ethernet1", "Ethernet2")
        for p in range(8)
    )
    return SnapshotStore(
        "lab",
        [
            SwitchInventory("leaf1", ("Ethernet1", "Ethernet2"), classes),
            SwitchInventory("leaf2", ("Ethernet1", "Ethernet2"), classes),
        ],
        FabricIndex(HOSTS, device_names=["leaf1", "leaf2", "h1", "h2", "h3"]),
    )


def exposition(store: SnapshotStore) -> str:
    registry = CollectorRegistry()
    registry.register(RoceCollector(store))
    return generate_latest(registry).decode()


def samples(text: str) -> dict[str, float]:
    """``name{sorted labels}`` -> value for every sample line."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def key(name: str, **labels: str) -> str:
    """A sample's name and labels; ``fabric="lab"`` unless given (every series carries it)."""
    labels = {"fabric": "lab", **labels}
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def polled(store: SnapshotStore) -> None:
    """leaf1 answers like an EOS switch after an incast: PFC on priority 3, queue 3 drops."""
    store.update_counters(
        "leaf1",
        Counters(
            device="leaf1",
            collected_at=1.0,
            interfaces={
                "Ethernet1": InterfaceCounters(
                    pfc_tx=(0, 0, 0, 118, 0, 0, 0, 0),
                    queues={
                        3: QueueCounters(
                            tx_packets=7118,
                            tx_bytes=7530844,
                            dropped_packets=3102,
                            ecn_marked_packets=3488,
                        )
                    },
                    headroom_drops=(0, 0, 0, 5, 0, 0, 0, 0),
                    watchdog={
                        3: WatchdogCounters(storms_detected=2, storms_restored=1, stormed=True)
                    },
                ),
                "Ethernet9": InterfaceCounters(
                    queues={0: QueueCounters(tx_packets=1, watermark_bytes=4096)}
                ),
            },
        ),
        duration_s=0.41,
        at=1700000000.0,
        config=ConfigRead(
            drift=2,
            sessions=[
                PendingSession("leaf1", "roce-agent-x", "EOS session", "pending", age_s=30.0),
                PendingSession(
                    "leaf1",
                    "ops",
                    "EOS session",
                    "pendingCommitTimer",
                    age_s=95.5,
                    rollback_in_s=200.0,
                    live=True,
                ),
            ],
        ),
    )


def failed_after_poll(store: SnapshotStore) -> None:
    polled(store)
    store.record_poll_failure("leaf1", "timeout", 3.0, "no answer")


def probe_results(store: SnapshotStore) -> None:
    store.update_probe(
        {
            "scenario": "incast",
            "passed": False,
            "flows": [
                {
                    "from": "h1",
                    "to": "h3",
                    "sent": 100,
                    "received": 90,
                    "lost": 10,
                    "reordered": 1,
                    "ce_marked": 50,
                    "cnps_received": 7,
                    "paused_s": 0.25,
                },
                {
                    "from": "10.1.2.3",
                    "to": "h3",
                    "sent": 5,
                    "received": 5,
                    "lost": 0,
                    "reordered": 0,
                    "ce_marked": 0,
                    "cnps_received": 0,
                    "paused_s": 0.0,
                },
            ],
        }
    )
    buckets = dict.fromkeys([*map(str, LATENCY_BUCKETS_S), "+Inf"], 0)
    buckets["0.0005"] = 3
    buckets["0.001"] = 1
    store.update_probe(
        {
            "role": "receive",
            "flows": [
                {
                    "src_ip": "198.18.0.9",
                    "dst_ip": "198.18.0.13",
                    "qpn": 256,
                    "received": 4,
                    "lost": 0,
                    "reordered": 0,
                    "ce_marked": 0,
                    "latency": {"count": 4, "avg_s": 0.0006, "buckets_le_s": buckets},
                }
            ],
            "totals": {"invalid": 2},
            "pfc": {"priorities": {"3": {"paused_s": 0.5}}},
        }
    )


def checks(store: SnapshotStore) -> None:
    store.update_checks(
        [CheckOutcome("RC001", "leaf1", "failure"), CheckOutcome("RC002", "", "pass")]
    )


def lossy_pfc_then_cleared(store: SnapshotStore) -> None:
    """A peer sends PFC on lossy priority 5 (a misconfiguration), then the counters are
    cleared on the device."""
    ports = ("Ethernet1", "Ethernet2")
    for pfc_rx in ((0, 0, 0, 0, 0, 7, 0, 0), (0,) * 8):
        interfaces = {
            name: InterfaceCounters(pfc_rx=pfc_rx if name == "Ethernet1" else (0,) * 8)
            for name in ports
        }
        store.update_counters(
            "leaf2", Counters(device="leaf2", collected_at=0, interfaces=interfaces), 0.1
        )


def nic_rxe(store: SnapshotStore) -> None:
    """A VM host: Soft-RoCE rxe0 on virtio_net eth1 (no DCQCN counters, no pause counters)."""
    store.enable_nic()
    store.update_nic(
        NicCounters(
            hw={
                ("rxe0", "1"): {
                    "rcvd_seq_err": 35,
                    "out_of_seq_request": 37,
                    "duplicate_request": 12,
                    "retry_exceeded_err": 2,
                    "sent_pkts": 1843226,
                    "rcvd_pkts": 1840107,
                }
            },
            pause={"eth1": None},
        )
    )


def nic_mlx5(store: SnapshotStore) -> None:
    """A ConnectX host: DCQCN counters, PFC on priority 3 listed by ethtool."""
    store.enable_nic()
    store.update_nic(
        NicCounters(
            hw={
                ("mlx5_0", "1"): {
                    "np_cnp_sent": 18234,
                    "np_ecn_marked_roce_packets": 412877,
                    "rp_cnp_handled": 17958,
                    "rp_cnp_ignored": 0,
                    "out_of_sequence": 41,
                    "packet_seq_err": 44,
                }
            },
            pause={
                "ens1f0np0": PortPause(
                    rx_frames=(0, 0, 0, 1523, 0, 0, 0, 0),
                    rx_duration_us=(0, 0, 0, 48736, 0, 0, 0, 0),
                )
            },
        )
    )


NIC_SERIES = [
    "roce_nic_port_info",
    "roce_nic_np_cnp_sent_total",
    "roce_nic_rp_cnp_handled_total",
    "roce_nic_rcvd_seq_err_total",
    "roce_nic_pause_frames_total",
    "roce_nic_pause_duration_seconds_total",
]
MLX5_ONLY_SERIES = [
    "roce_nic_np_cnp_sent_total",
    "roce_nic_np_ecn_marked_roce_packets_total",
    "roce_nic_rp_cnp_handled_total",
    "roce_nic_rp_cnp_ignored_total",
    "roce_nic_out_of_sequence_total",
    "roce_nic_packet_seq_err_total",
]
RXE_ONLY_SERIES = [
    "roce_nic_rcvd_seq_err_total",
    "roce_nic_out_of_seq_request_total",
    "roce_nic_retry_exceeded_err_total",
    "roce_nic_sent_pkts_total",
    "roce_nic_rcvd_pkts_total",
]


SWITCH_COUNTERS = [
    "roce_pfc_frames_total",
    "roce_queue_transmitted_packets_total",
    "roce_queue_transmitted_bytes_total",
    "roce_queue_dropped_packets_total",
    "roce_queue_ecn_marked_packets_total",
    "roce_queue_watermark_bytes",
    "roce_headroom_dropped_packets_total",
    "roce_pfc_watchdog_storms_detected_total",
    "roce_pfc_watchdog_storms_restored_total",
    "roce_pfc_watchdog_stormed",
]


def _version() -> str:
    from agent import __version__

    return __version__


# (name, what happens to the store, samples that must be present with their value, names
# that must be absent)
CASES: list[tuple[str, Callable[[SnapshotStore], None], dict[str, float], list[str]]] = [
    (
        "before the first poll: roce_device_up 0, the plan and the exporter's own series only",
        lambda store: None,
        {
            key("roce_device_up", device="leaf1"): 0,
            key("roce_device_up", device="leaf2"): 0,
            key(
                "roce_intended_class_info",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
                queue="3",
                pfc="on",
                ecn="on",
            ): 1,
            key("roce_exporter_info", version=_version()): 1,
            key("roce_exporter_shard_info", shard="1/1"): 1,
            key("roce_exporter_devices"): 5,
        },
        [
            *SWITCH_COUNTERS,
            "roce_polls_total",
            "roce_poll_errors_total",
            "roce_poll_duration_seconds",
            "roce_last_successful_poll_timestamp_seconds",
            "roce_drift_items",
            "roce_config_sessions_pending",
            "roce_check_result",
            "roce_probe_packets_sent_total",
            "roce_nic_pause_frames_total",
        ],
    ),
    (
        "failed first polls: still nothing but roce_device_up 0 (no zeros before a reading)",
        lambda store: [store.record_poll_failure("leaf2", r, 1.0) for r in ("timeout", "auth")],
        {key("roce_device_up", device="leaf2"): 0},
        [
            *SWITCH_COUNTERS,
            "roce_polls_total",
            "roce_poll_errors_total",
            "roce_poll_duration_seconds",
        ],
    ),
    (
        "after a poll: device values; lossless priority only; reported interfaces only",
        polled,
        {
            key(
                "roce_pfc_frames_total",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
                direction="tx",
            ): 118,
            key(
                "roce_pfc_frames_total",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
                direction="rx",
            ): 0,
            key(
                "roce_queue_dropped_packets_total", device="leaf1", interface="Ethernet1", queue="3"
            ): 3102,
            key(
                "roce_queue_ecn_marked_packets_total",
                device="leaf1",
                interface="Ethernet1",
                queue="3",
            ): 3488,
            key(
                "roce_queue_transmitted_bytes_total",
                device="leaf1",
                interface="Ethernet1",
                queue="3",
            ): 7530844,
            key(
                "roce_headroom_dropped_packets_total",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
            ): 5,
            key(
                "roce_pfc_watchdog_storms_detected_total",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
            ): 2,
            key(
                "roce_pfc_watchdog_storms_restored_total",
                device="leaf1",
                interface="Ethernet1",
                priority="3",
            ): 1,
            key(
                "roce_pfc_watchdog_stormed", device="leaf1", interface="Ethernet1", priority="3"
            ): 1,
            key(
                "roce_queue_watermark_bytes", device="leaf1", interface="Ethernet9", queue="0"
            ): 4096,
            key("roce_device_up", device="leaf1"): 1,
            key("roce_device_up", device="leaf2"): 0,
            key("roce_polls_total", device="leaf1"): 1,
            key("roce_poll_errors_total", device="leaf1", reason="auth"): 0,
            key("roce_poll_duration_seconds", device="leaf1"): 0.41,
            key("roce_last_successful_poll_timestamp_seconds", device="leaf1"): 1700000000.0,
            key("roce_drift_items", device="leaf1"): 2,
            key("roce_config_sessions_pending", device="leaf1"): 2,
            key("roce_config_session_oldest_age_seconds", device="leaf1"): 95.5,
        },
        [
            # Issue #41: queues the device did not report have no series, not zeros.
            key(
                "roce_queue_dropped_packets_total", device="leaf1", interface="Ethernet1", queue="6"
            ),
            key(
                "roce_queue_transmitted_packets_total",
                device="leaf1",
                interface="Ethernet9",
                queue="7",
            ),
            # lossy priority, counter 0: no series
            key(
                "roce_pfc_frames_total",
                device="leaf1",
                interface="Ethernet1",
                priority="4",
                direction="tx",
            ),
            key("roce_pfc_watchdog_stormed", device="leaf1", interface="Ethernet1", priority="0"),
            # an interface the intent does not know: no lossless priority, all counters 0
            key(
                "roce_pfc_frames_total",
                device="leaf1",
                interface="Ethernet9",
                priority="3",
                direction="rx",
            ),
            # a fabric port the device did not report: nothing invented
            key(
                "roce_queue_transmitted_packets_total",
                device="leaf1",
                interface="Ethernet2",
                queue="3",
            ),
            key("roce_polls_total", device="leaf2"),
            key("roce_drift_items", device="leaf2"),
            key("roce_config_sessions_pending", device="leaf2"),
            key("roce_queue_watermark_bytes", device="leaf1", interface="Ethernet1", queue="3"),
        ],
    ),
    (
        "a lossy priority whose counter moved appears, and stays after the device clears it",
        lossy_pfc_then_cleared,
        {
            key(
                "roce_pfc_frames_total",
                device="leaf2",
                interface="Ethernet1",
                priority="5",
                direction="rx",
            ): 0,
            key(
                "roce_pfc_frames_total",
                device="leaf2",
                interface="Ethernet1",
                priority="5",
                direction="tx",
            ): 0,
            key(
                "roce_headroom_dropped_packets_total",
                device="leaf2",
                interface="Ethernet1",
                priority="5",
            ): 0,
            # Its watchdog output was read and lists no event for the queue: a read 0.
            key(
                "roce_pfc_watchdog_stormed", device="leaf2", interface="Ethernet1", priority="5"
            ): 0,
            key(
                "roce_pfc_frames_total",
                device="leaf2",
                interface="Ethernet1",
                priority="3",
                direction="rx",
            ): 0,
        },
        [
            key(
                "roce_pfc_frames_total",
                device="leaf2",
                interface="Ethernet2",
                priority="5",
                direction="rx",
            ),
            key(
                "roce_pfc_frames_total",
                device="leaf2",
                interface="Ethernet1",
                priority="4",
                direction="rx",
            ),
        ],
    ),
    (
        "a failure after a success keeps the counters and marks the device down",
        failed_after_poll,
        {
            key(
                "roce_queue_dropped_packets_total", device="leaf1", interface="Ethernet1", queue="3"
            ): 3102,
            key("roce_device_up", device="leaf1"): 0,
            key("roce_poll_errors_total", device="leaf1", reason="timeout"): 1,
            key("roce_poll_errors_total", device="leaf1", reason="connect"): 0,
            key("roce_polls_total", device="leaf1"): 2,
            key("roce_poll_duration_seconds", device="leaf1"): 3.0,
            key("roce_last_successful_poll_timestamp_seconds", device="leaf1"): 1700000000.0,
        },
        [],
    ),
    (
        "probe results: scenario rows and a receiver result",
        probe_results,
        {
            key("roce_probe_packets_sent_total", scenario="incast", src="h1", dst="h3"): 100,
            key("roce_probe_packets_lost_total", scenario="incast", src="h1", dst="h3"): 10,
            key("roce_probe_packets_ce_marked_total", scenario="incast", src="h1", dst="h3"): 50,
            key("roce_probe_cnps_received_total", scenario="incast", src="h1", dst="h3"): 7,
            key("roce_probe_packets_sent_total", scenario="incast", src="unknown", dst="h3"): 5,
            key(
                "roce_probe_paused_seconds_total", scenario="incast", host="h1", priority="3"
            ): 0.25,
            # Measured zeros are figures: the sender said it was not paused.
            key(
                "roce_probe_paused_seconds_total", scenario="incast", host="unknown", priority="3"
            ): 0,
            key("roce_probe_runs_total", scenario="incast", result="fail"): 1,
            key("roce_probe_runs_total", scenario="incast", result="pass"): 0,
            key(
                "roce_probe_latency_seconds_bucket",
                scenario="receive",
                src="h1",
                dst="h3",
                le="0.00025",
            ): 0,
            key(
                "roce_probe_latency_seconds_bucket",
                scenario="receive",
                src="h1",
                dst="h3",
                le="0.0005",
            ): 3,
            key(
                "roce_probe_latency_seconds_bucket",
                scenario="receive",
                src="h1",
                dst="h3",
                le="0.001",
            ): 4,
            key(
                "roce_probe_latency_seconds_bucket",
                scenario="receive",
                src="h1",
                dst="h3",
                le="+Inf",
            ): 4,
            key("roce_probe_latency_seconds_count", scenario="receive", src="h1", dst="h3"): 4,
            key("roce_probe_invalid_frames_total", scenario="receive", host="h3"): 2,
            key(
                "roce_probe_paused_seconds_total", scenario="receive", host="h3", priority="3"
            ): 0.5,
        },
        # Issue #41: nothing a result did not carry. A sender's pause on priorities other
        # than its class, what a receiver cannot know (sent, CNPs at the sender), latency of
        # a flow no result gave samples for, pause on priorities the receiver did not report.
        [
            key("roce_probe_paused_seconds_total", scenario="incast", host="h1", priority="0"),
            key("roce_probe_paused_seconds_total", scenario="incast", host="h3", priority="3"),
            key("roce_probe_packets_sent_total", scenario="receive", src="h1", dst="h3"),
            key("roce_probe_cnps_received_total", scenario="receive", src="h1", dst="h3"),
            key("roce_probe_latency_seconds_count", scenario="incast", src="h1", dst="h3"),
            key("roce_probe_paused_seconds_total", scenario="receive", host="h3", priority="0"),
        ],
    ),
    (
        "check results: one series per result word, the current one at 1",
        checks,
        {
            key("roce_check_result", check="RC001", device="leaf1", result="fail"): 1,
            key("roce_check_result", check="RC001", device="leaf1", result="pass"): 0,
            key("roce_check_result", check="RC001", device="leaf1", result="error"): 0,
            key("roce_check_result", check="RC002", device="fabric", result="pass"): 1,
        },
        [],
    ),
    (
        "host NIC on, nothing read yet: its error counters only",
        lambda store: store.enable_nic(),
        {
            key("roce_nic_collect_errors_total", source="sysfs"): 0,
            key("roce_nic_collect_errors_total", source="ethtool"): 0,
        },
        NIC_SERIES,
    ),
    (
        "rxe host: rxe series only, no np_/rp_ series, no pause series for virtio_net",
        nic_rxe,
        {
            key("roce_nic_port_info", rdma_device="rxe0", port="1", dcqcn="no"): 1,
            key("roce_nic_rcvd_seq_err_total", rdma_device="rxe0", port="1"): 35,
            key("roce_nic_out_of_seq_request_total", rdma_device="rxe0", port="1"): 37,
            key("roce_nic_duplicate_request_total", rdma_device="rxe0", port="1"): 12,
            key("roce_nic_retry_exceeded_err_total", rdma_device="rxe0", port="1"): 2,
            key("roce_nic_sent_pkts_total", rdma_device="rxe0", port="1"): 1843226,
            key("roce_nic_collect_errors_total", source="ethtool"): 0,
        },
        [
            *MLX5_ONLY_SERIES,
            "roce_nic_completer_retry_err_total",  # not in this reading: absent, not 0
            "roce_nic_pause_frames_total",
            "roce_nic_pause_duration_seconds_total",
        ],
    ),
    (
        "mlx5 host: DCQCN and sequence counters, all 8 priorities of a port that lists pause",
        nic_mlx5,
        {
            key("roce_nic_port_info", rdma_device="mlx5_0", port="1", dcqcn="yes"): 1,
            key("roce_nic_np_cnp_sent_total", rdma_device="mlx5_0", port="1"): 18234,
            key("roce_nic_rp_cnp_ignored_total", rdma_device="mlx5_0", port="1"): 0,
            key("roce_nic_packet_seq_err_total", rdma_device="mlx5_0", port="1"): 44,
            key(
                "roce_nic_pause_frames_total", interface="ens1f0np0", priority="3", direction="rx"
            ): 1523,
            key(
                "roce_nic_pause_frames_total", interface="ens1f0np0", priority="5", direction="tx"
            ): 0,
            key(
                "roce_nic_pause_duration_seconds_total",
                interface="ens1f0np0",
                priority="3",
                direction="rx",
            ): 0.048736,
        },
        [*RXE_ONLY_SERIES, "roce_nic_duplicate_request_total"],
    ),
]


@pytest.mark.parametrize(
    ("update", "present", "absent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_snapshot_renders_as_expected(
    update: Callable[[SnapshotStore], None], present: dict[str, float], absent: list[str]
) -> None:
    store = make_store()
    update(store)
    text = exposition(store)
    found = samples(text)
    for name, value in present.items():
        assert name in found, f"{name} missing from the exposition"
        assert found[name] == pytest.approx(value), name
    for name in absent:
        if "{" in name:
            assert name not in found
        else:
            assert not any(s.startswith(name + "{") or s == name + "{}" for s in found), name


def test_lean_series_per_port_after_a_poll() -> None:
    """One lossless class on a reported port: 2 PFC + 1 headroom + 3 watchdog series for it,
    4 queue families x 8 queues, 8 intended classes (46, down from 88)."""
    store = make_store()
    polled(store)
    # As EOS reports them: every traffic class of the port.
    counters = store.snapshot().devices["leaf1"].counters
    assert counters is not None
    port = counters.interfaces["Ethernet1"]
    every_queue = {q: port.queues.get(q, QueueCounters()) for q in range(8)}
    ports = {**counters.interfaces, "Ethernet1": port.model_copy(update={"queues": every_queue})}
    store.update_counters("leaf1", counters.model_copy(update={"interfaces": ports}), 0.1)
    found = [k for k in samples(exposition(store)) if 'device="leaf1",' in k]
    ethernet1 = [k for k in found if 'interface="Ethernet1"' in k]
    by_family = {
        name: len([k for k in ethernet1 if k.startswith(name + "{")])
        for name in (*SWITCH_COUNTERS, "roce_intended_class_info")
    }
    assert by_family == {
        "roce_pfc_frames_total": 2,
        "roce_queue_transmitted_packets_total": 8,
        "roce_queue_transmitted_bytes_total": 8,
        "roce_queue_dropped_packets_total": 8,
        "roce_queue_ecn_marked_packets_total": 8,
        "roce_queue_watermark_bytes": 0,
        "roce_headroom_dropped_packets_total": 1,
        "roce_pfc_watchdog_storms_detected_total": 1,
        "roce_pfc_watchdog_storms_restored_total": 1,
        "roce_pfc_watchdog_stormed": 1,
        "roce_intended_class_info": 8,
    }


def full_store() -> SnapshotStore:
    """Every kind of series: polled switch, down switch, probes, checks, host NIC, drift."""
    store = make_store()
    polled(store)
    store.record_poll_failure("leaf2", "connect", 1.0)
    probe_results(store)
    checks(store)
    store.update_drift("h1", 1)
    store.enable_nic()
    store.update_nic(
        NicCounters(
            hw={("mlx5_0", "1"): {"np_cnp_sent": 3}, ("rxe0", "1"): {"rcvd_seq_err": 1}},
            pause={"eth0": PortPause(rx_frames=(0, 0, 0, 9, 0, 0, 0, 0)), "eth1": None},
        )
    )
    return store


@pytest.mark.parametrize("renderer", ["generate_latest", "fast text"])
def test_every_series_carries_the_fabric_label(renderer: str) -> None:
    store = full_store()
    text = (
        exposition(store)
        if renderer == "generate_latest"
        else render_text(store.snapshot()).decode()
    )
    families = list(text_string_to_metric_families(text))
    seen = {f.name for f in families}
    # the store above feeds every group of the table
    assert {spec.group for spec in metrics.SPECS if spec.family_name in seen} == set(
        metrics.GROUP_TITLES
    )
    for family in families:
        for sample in family.samples:
            assert sample.labels.get("fabric") == "lab", sample
    for spec in metrics.SPECS:
        assert spec.labels[0] == "fabric", spec.name


def test_counter_names_end_in_total_and_others_do_not() -> None:
    store = make_store()
    polled(store)
    probe_results(store)
    checks(store)
    text = exposition(store)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert types, text[:200]
    for name, kind in types.items():
        if kind == "counter":
            assert name.endswith("_total"), name
        else:
            assert not name.endswith("_total"), name
        assert name.startswith("roce_"), name
    for spec in metrics.SPECS:
        assert (spec.type == "counter") == spec.name.endswith("_total"), spec.name
        assert spec.name.startswith("roce_")
        assert not re.search(r"_(ms|milliseconds|us|kbytes|bits)(_|$)", spec.name), spec.name


def test_label_values_are_bounded_and_never_addresses() -> None:
    store = make_store()
    polled(store)
    probe_results(store)
    checks(store)
    nic_mlx5(store)
    allowed = {
        "device": {"leaf1", "leaf2", "h1", "h2", "h3", "fabric"},
        "interface": {"Ethernet1", "Ethernet2", "Ethernet9", "ens1f0np0"},
        "rdma_device": {"mlx5_0"},
        "port": {"1"},
        "dcqcn": set(metrics.YES_NO),
        "source": set(metrics.NIC_ERROR_SOURCES),
        "priority": set(metrics.PRIORITY_LABEL_VALUES),
        "queue": set(metrics.PRIORITY_LABEL_VALUES),
        "direction": set(metrics.DIRECTIONS),
        "reason": set(metrics.POLL_ERROR_REASONS),
        "state": set(metrics.DEVICE_STATES),
        "scenario": set(metrics.PROBE_SCENARIOS),
        "src": {"h1", "h2", "h3", "unknown"},
        "dst": {"h1", "h2", "h3", "unknown"},
        "host": {"h1", "h2", "h3", "unknown"},
        "pfc": {"on", "off"},
        "ecn": {"on", "off"},
        "check": {"RC001", "RC002"},
        "version": {_version()},
        "fabric": {"lab"},
        "shard": {"1/1"},
    }
    for family in text_string_to_metric_families(exposition(store)):
        for sample in family.samples:
            for label, value in sample.labels.items():
                assert not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", value), sample
                if label == "le":
                    continue
                if label == "result":
                    assert value in {*metrics.CHECK_RESULTS, *metrics.PROBE_RESULTS}
                    continue
                assert value in allowed[label], (label, value, sample.name)


def test_a_nic_counter_without_a_metric_is_skipped_not_a_failed_scrape() -> None:
    store = make_store()
    store.update_nic(NicCounters(hw={("bnxt_re0", "1"): {"some_new_counter": 5, "send_err": 1}}))
    found = samples(exposition(store))
    assert found[key("roce_nic_send_err_total", rdma_device="bnxt_re0", port="1")] == 1
    assert found[key("roce_nic_port_info", rdma_device="bnxt_re0", port="1", dcqcn="no")] == 1
    assert not [name for name in found if "some_new_counter" in name]


def test_store_refuses_unbounded_inputs() -> None:
    store = make_store()
    with pytest.raises(StoreError, match="no switch"):
        store.update_counters("spine9", Counters(device="spine9", collected_at=0), 0.1)
    with pytest.raises(StoreError, match="no device"):
        store.update_drift("10.0.0.1", 1)
    with pytest.raises(StoreError, match="not one of"):
        store.update_checks([CheckOutcome("RC001", "leaf1", "maybe")])
    with pytest.raises(StoreError, match="short identifier"):
        store.update_checks([CheckOutcome("RC001 with spaces and more", "leaf1", "pass")])
    store.update_drift("h1", 3)  # hosts may carry drift
    assert samples(exposition(store))[key("roce_drift_items", device="h1")] == 3


def test_checks_replace_or_merge() -> None:
    store = make_store()
    checks(store)
    store.update_checks([CheckOutcome("RC003", "leaf2", "error")], replace_all=False)
    assert {c for c, _ in store.snapshot().checks} == {"RC001", "RC002", "RC003"}
    store.update_checks([CheckOutcome("RC003", "leaf2", "pass")])
    assert set(store.snapshot().checks) == {("RC003", "leaf2")}


def test_probe_totals_add_up_over_runs() -> None:
    store = make_store()
    probe_results(store)
    probe_results(store)
    found = samples(exposition(store))
    assert found[key("roce_probe_packets_lost_total", scenario="incast", src="h1", dst="h3")] == 20
    assert found[key("roce_probe_runs_total", scenario="incast", result="fail")] == 2


def test_latency_buckets_match_the_receiver() -> None:
    from agent.observe.probes.analysis import LATENCY_BUCKETS_S as RECEIVER_BUCKETS

    assert LATENCY_BUCKETS_S == RECEIVER_BUCKETS


def test_metrics_md_is_generated_from_the_table() -> None:
    assert (REPO / "exporters" / "METRICS.md").read_text() == metrics.markdown(), (
        "exporters/METRICS.md is stale: python -m exporters.metrics > exporters/METRICS.md"
    )


def test_every_rendered_family_is_documented() -> None:
    store = make_store()
    polled(store)
    probe_results(store)
    checks(store)
    names = {f.name for f in text_string_to_metric_families(exposition(store))}
    documented = {spec.family_name for spec in metrics.SPECS}
    assert names <= documented


def test_registry_can_embed_the_collector_next_to_others() -> None:
    from prometheus_client import Counter

    registry = CollectorRegistry()
    registry.register(RoceCollector(make_store()))
    Counter("daemon_reconciles", "reconcile loops", registry=registry).inc()
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(RoceCollector(make_store()))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_check_metrics_accepts_the_exposition() -> None:
    store = full_store()  # host NIC series of an mlx5 and an rxe port included
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=exposition(store), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("update", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_fast_text_is_byte_for_byte_generate_latest(
    update: Callable[[SnapshotStore], None],
) -> None:
    store = make_store()
    update(store)
    store.update_counters(
        "leaf2",
        Counters(
            device="leaf2",
            collected_at=0,
            interfaces={
                "Ethernet1": InterfaceCounters(
                    queues={3: QueueCounters(tx_bytes=987_654_321_012, tx_packets=999_999)}
                )
            },
        ),
        0.5,
    )  # large values take Go-style exponents in both
    assert render_text(store.snapshot()).decode() == exposition(store)


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        # What Prometheus 2.x sends: OpenMetrics preferred, the text format accepted.
        ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
         "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
         "text/plain; version=0.0.4"),
        ("", "text/plain; version=0.0.4"),
        ("application/openmetrics-text;version=1.0.0", "application/openmetrics-text"),
    ],
)  # fmt: skip
def test_server_sends_the_fast_text_to_clients_that_take_it(accept: str, content_type: str) -> None:
    import urllib.request

    from exporters.server import MetricsServer

    store = make_store()
    polled(store)
    registry = CollectorRegistry()
    registry.register(RoceCollector(store))
    server = MetricsServer(registry, ("127.0.0.1", 0), None, lambda: render_text(store.snapshot()))
    server.start()
    try:
        request = urllib.request.Request(server.url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.headers["Content-Type"].startswith(content_type)
            body = response.read().decode()
    finally:
        server.stop()
    assert (
        'roce_queue_dropped_packets_total{device="leaf1",fabric="lab",interface="Ethernet1",'
        'queue="3"}' in body
    )
