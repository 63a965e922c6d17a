"""Cisco NX-OS platform: rendered MQC/PFC lines (golden files), text parsing, and the whole
configuration ``configure replace`` is given (the running one with the change in it).

Parsing uses recorded device output in NX-OS's formats (tests/data/platforms/cisco_nxos/, see
its SOURCE.md); the transaction runs against the lab's NX-OS switch in
tests/unit/test_lab_nxos_driver.py.

Regenerate the golden files after a reviewed renderer change with:
    .venv/bin/python -c "import tests.unit.test_platform_nxos as t; t.write_goldens()"
then read the diff of tests/data/platforms/cisco_nxos/*.golden line by line before committing.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.device.platforms._nxos_candidate import candidate_config
from agent.device.platforms.base import PlatformError
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from tests.unit.platform_helpers import PROFILES, ROOT, single_device_plan

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
    # "Ingress MMU Drop Pkts 10", booked on the port's no-drop COS (PG 3): RC101 sees them.
    assert eth1.headroom_drops == (0, 0, 0, 10, 0, 0, 0, 0)
    assert eth1.watchdog[3].model_dump() == {
        "storms_detected": 1,
        "storms_restored": 2,
        "stormed": True,
    }
    eth2 = counters.interfaces["Ethernet1/2"]
    assert eth2.pfc_rx[3] == 5 and eth2.queues[3].tx_bytes == 100000
    assert eth2.watchdog[3].stormed is False
    assert eth2.headroom_drops == (0,) * 8


def test_ingress_drops_of_a_port_without_a_no_drop_cos_are_not_headroom_drops() -> None:
    lossy = read("show_queuing_interface.txt").replace(
        "   3         3         3  Active", "   3         -         -  Inactive"
    )
    counters = CiscoNxos.counters_from_text(
        "sw1", 1.0, {"pfc": "", "queuing": lossy, "watchdog": ""}
    )
    assert counters.interfaces["Ethernet1/1"].headroom_drops == (0,) * 8


# ----------------------------------------------------------------------------- configure replace


@pytest.mark.parametrize(
    ("running", "change", "expected"),
    [
        pytest.param(
            "hostname sw1\npolicy-map type queuing Q\n  class type queuing c-out-8q-q3\n"
            "    bandwidth remaining percent 10\nsystem qos\n"
            "  service-policy type queuing output Q\n",
            ["policy-map type queuing Q", "  class type queuing c-out-8q-q3",
             "    bandwidth remaining percent 50"],
            "hostname sw1\npolicy-map type queuing Q\n  class type queuing c-out-8q-q3\n"
            "    bandwidth remaining percent 50\nsystem qos\n"
            "  service-policy type queuing output Q\n",
            id="a policy-map is replaced whole, in place",
        ),
        pytest.param(
            "hostname sw1\npolicy-map type qos C\n  class A\n    set qos-group 3\n"
            "interface Ethernet1/1\n",
            ["class-map type qos match-any B", "  match dscp 48",
             "policy-map type qos C", "  class B", "    set qos-group 6"],
            "hostname sw1\nclass-map type qos match-any B\n  match dscp 48\n"
            "policy-map type qos C\n  class B\n    set qos-group 6\ninterface Ethernet1/1\n",
            id="a new class-map goes before the policy-maps that name it",
        ),
        pytest.param(
            "interface Ethernet1/1\n  description gpu01\n  priority-flow-control mode on send-tlv\n"
            "  no shutdown\n",
            ["interface Ethernet1/1", "  priority-flow-control mode off",
             "  service-policy type qos input C"],
            "interface Ethernet1/1\n  description gpu01\n  no shutdown\n"
            "  priority-flow-control mode off\n  service-policy type qos input C\n",
            id="an interface is merged setting by setting; other lines stay",
        ),
        pytest.param(
            "priority-flow-control watch-dog-interval on\n"
            "priority-flow-control watch-dog interval 200\n\ninterface Ethernet1/1\n",
            ["no priority-flow-control watch-dog-interval on",
             "priority-flow-control watch-dog shutdown-multiplier 3"],
            "priority-flow-control watch-dog interval 200\n"
            "priority-flow-control watch-dog shutdown-multiplier 3\n\ninterface Ethernet1/1\n",
            id="global lines: no removes, a new one goes before the interfaces",
        ),
        pytest.param(
            "hostname sw1\ninterface Ethernet1/1\n",
            ["system qos", "  service-policy type network-qos N",
             "interface Ethernet1/9", "  priority-flow-control mode on"],
            "hostname sw1\nsystem qos\n  service-policy type network-qos N\n"
            "interface Ethernet1/1\ninterface Ethernet1/9\n  priority-flow-control mode on\n",
            id="system qos before the interfaces, a new interface last",
        ),
    ],
)  # fmt: skip
def test_the_change_is_put_into_the_running_configuration(
    running: str, change: list[str], expected: str
) -> None:
    assert candidate_config(running, change) == expected


# Lines a real running-config holds that the agent does not manage: they must all stay.
UNRELATED_GLOBAL = [
    "feature bgp", "vlan 10", "spanning-tree mode mst", "ip route 0.0.0.0/0 192.0.2.1",
    "logging server 192.0.2.5", "ntp server 192.0.2.6 use-vrf management",
]  # fmt: skip
UNRELATED_PORT = ["  no shutdown", "  mtu 9216", "  switchport mode trunk", "  speed 100000"]


@st.composite
def running_configs(draw: st.DrawFn) -> str:
    """The recorded running-config with unrelated lines put in at random places."""
    lines = read("show_running_config_roce.txt").splitlines()[1:]
    for extra in draw(st.lists(st.sampled_from(UNRELATED_GLOBAL), unique=True, max_size=4)):
        at = draw(st.sampled_from([i for i, x in enumerate(lines) if not x.startswith(" ")]))
        lines.insert(at, extra)
    for extra in draw(st.lists(st.sampled_from(UNRELATED_PORT), unique=True, max_size=3)):
        at = next(i for i, x in enumerate(lines) if x == "interface Ethernet1/2")
        lines.insert(at + 1, extra)
    return "\n".join(lines) + "\n"


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    running_configs(),
    st.sampled_from(PROFILES),
    st.sampled_from(["", "overrides: {pfc: {watchdog: {polling_ms: 200, detection_ms: 800, "
                     "restoration_ms: 1600}}}",
                     "overrides: {roce: {dscp: 24}}"]),
)  # fmt: skip
def test_the_whole_configuration_holds_the_plan_and_everything_else_unchanged(
    running: str, profile: str, override: str
) -> None:
    platform = CiscoNxos()
    desired = platform.desired(device_plan(profile, override))
    lines = platform.render_changes(desired, platform.state_from_running_config(running))
    candidate = candidate_config(running, lines)
    after = platform.state_from_running_config(candidate)
    assert diff("sw1", desired, after, platform.managed) == []
    unrelated = {*UNRELATED_GLOBAL, *UNRELATED_PORT}
    assert [x for x in candidate.splitlines() if x in unrelated] == [
        x for x in running.splitlines() if x in unrelated
    ]
    assert "interface mgmt0\n  vrf member management\n  ip address 192.0.2.10/24" in candidate
