"""Cisco NX-OS platform: rendered MQC/PFC lines (golden files), text parsing, transaction.

No NX-OS lab device exists for this project, so parsing and transaction tests use recorded
device output in NX-OS's formats (each fixture's first line names its source) and a scripted
fake connection that records the commands it is sent.

Regenerate the golden files after a reviewed renderer change with:
    .venv/bin/python -c "import tests.unit.test_platform_nxos as t; t.write_goldens()"
then read the diff of tests/data/platforms/cisco_nxos/*.golden line by line before committing.
"""

from __future__ import annotations

import functools

import pytest

from agent.device.platforms.base import ConfigRejected, PlatformError
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from tests.unit.platform_helpers import (
    PROFILES,
    ROOT,
    RecordingConnection,
    single_device_plan,
)

DATA = ROOT / "tests" / "data" / "platforms" / "cisco_nxos"
PORTS = [("Ethernet1/1", "100G", 5), ("Ethernet1/2", "400G", 30)]


def device_plan(profile: str, overrides: str = "") -> DevicePlan:
    return single_device_plan("cisco_nxos", PORTS, profile, username="admin", overrides=overrides)


def write_goldens() -> None:
    for profile in PROFILES:
        text = "\n".join(CiscoNxos().render(device_plan(profile))) + "\n"
        (DATA / f"{profile}.golden").write_text(text)


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


FakeConnection = functools.partial(
    RecordingConnection, "sw1", refusal_text="% Invalid command at '^' marker."
)


@pytest.mark.parametrize("profile", PROFILES)
def test_render_matches_reviewed_golden(profile: str) -> None:
    rendered = "\n".join(CiscoNxos().render(device_plan(profile))) + "\n"
    assert rendered == read(f"{profile}.golden")


@pytest.mark.parametrize("profile", PROFILES)
def test_render_classifies_roce_dscp_into_its_pfc_class(profile: str) -> None:
    lines = CiscoNxos().render(device_plan(profile))
    assert lines[lines.index("class-map type qos match-any ROCE_PRIO3") + 1] == "  match dscp 26"
    nq3 = lines.index("  class type network-qos c-8q-nq3")
    assert lines[nq3 + 1] == "    pause pfc-cos 3"
    assert "  priority-flow-control mode on" in lines


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("overrides: {pfc: {watchdog: {action: alert}}}", "action 'alert'"),
        ("overrides: {pfc: {watchdog: {polling_ms: 50, detection_ms: 200}}}", "100-1000 ms"),
    ],
)
def test_unrenderable_watchdog_is_refused_clearly(override: str, message: str) -> None:
    with pytest.raises(PlatformError, match=message):
        CiscoNxos().render(device_plan("nvidia-default", override))


def test_correct_running_config_diffs_to_nothing() -> None:
    platform = CiscoNxos()
    actual = platform.state_from_running_config(read("show_running_config_roce.txt"))
    desired = platform.desired(device_plan("nvidia-default"))
    assert diff("sw1", desired, actual, platform.managed) == []
    assert platform.render_changes(desired, actual) == []


def test_one_wrong_threshold_diffs_to_exactly_that_setting_on_each_port() -> None:
    platform = CiscoNxos()
    actual = platform.state_from_running_config(
        read("show_running_config_roce_wrong_threshold.txt")
    )
    found = diff("sw1", platform.desired(device_plan("nvidia-default")), actual, platform.managed)
    # The queuing policy is system-wide: the one wrong value shows on every port.
    assert [(d.interface, d.setting, d.actual) for d in found] == [
        ("Ethernet1/1", "queue[3].ecn", "15000-1500000@100%"),
        ("Ethernet1/2", "queue[3].ecn", "15000-1500000@100%"),
    ]


def test_changes_for_a_wrong_threshold_replace_only_the_queuing_policy() -> None:
    platform = CiscoNxos()
    actual = platform.state_from_running_config(
        read("show_running_config_roce_wrong_threshold.txt")
    )
    lines = platform.render_changes(platform.desired(device_plan("nvidia-default")), actual)
    assert lines[0] == "policy-map type queuing ROCE_QUEUING_OUT"
    assert not any(x.startswith(("class-map", "interface", "priority-flow-control")) for x in lines)


def test_counters_are_normalized_exactly() -> None:
    counters = CiscoNxos.counters_from_text(
        "sw1",
        1.0,
        {
            "pfc": read("show_interface_priority_flow_control.txt"),
            "queuing": read("show_queuing_interface.txt"),
            "watchdog": read("show_queuing_pfc_queue_detail.txt"),
        },
    )
    eth1 = counters.interfaces["Ethernet1/1"]
    assert eth1.pfc_tx == (0, 0, 0, 7, 0, 0, 0, 0) and eth1.pfc_rx == (0, 0, 0, 8, 0, 0, 0, 0)
    q0 = eth1.queues[0]
    assert (q0.tx_packets, q0.tx_bytes, q0.dropped_packets) == (68, 6800, 3)
    assert (eth1.queues[3].tx_packets, eth1.queues[3].dropped_packets) == (50, 6)
    assert eth1.watchdog[3].model_dump() == {
        "storms_detected": 1,
        "storms_restored": 2,
        "stormed": True,
    }
    eth2 = counters.interfaces["Ethernet1/2"]
    assert eth2.pfc_rx[3] == 5 and eth2.queues[3].tx_bytes == 100000
    assert eth2.watchdog[3].stormed is False


def test_transaction_happy_path_checkpoints_configures_and_saves() -> None:
    conn = FakeConnection()
    platform = CiscoNxos()
    lines = ["system qos", "  service-policy type network-qos ROCE_NETWORK_QOS"]
    with platform.transaction(conn, lines, confirm_timeout_s=60) as txn:
        platform.confirm(conn, txn)
    assert conn.sent == [
        f"checkpoint {txn.name}",
        "configure terminal",
        *lines,
        "end",
        "copy running-config startup-config",
        "configure terminal",
        f"no checkpoint {txn.name}",
        "end",
    ]
    assert txn.confirmed and not txn.rolled_back


def test_refused_line_rolls_back_to_the_checkpoint() -> None:
    conn = FakeConnection(refuse="bogus")
    with (
        pytest.raises(ConfigRejected, match="bogus"),
        CiscoNxos().transaction(conn, ["system qos", "  bogus"], 60),
    ):
        pytest.fail("the block must not run after a refused line")
    name = conn.sent[0].split()[1]
    assert conn.sent[1:] == [
        "configure terminal",
        "system qos",
        "  bogus",
        "end",
        f"rollback running-config checkpoint {name}",
        "configure terminal",
        f"no checkpoint {name}",
        "end",
    ]


def test_leaving_without_confirm_rolls_back() -> None:
    conn = FakeConnection({"rollback": "Rollback completed successfully.\n"})
    with CiscoNxos().transaction(conn, ["system qos"], 60) as txn:
        pass
    assert f"rollback running-config checkpoint {txn.name}" in conn.sent
    assert txn.rolled_back and "copy running-config startup-config" not in conn.sent
