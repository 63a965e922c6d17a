"""Arista EOS platform: golden renders per profile, parsing of recorded outputs, diffs.

Regenerate a golden file after a reviewed change:
    python -c "from tests.unit.test_platform_arista import regenerate; regenerate()"
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent.device.platforms.arista_eos import AristaEos, eos_default_priority
from agent.device.platforms.base import Connection, PlatformError
from agent.device.state import desired_state, diff
from agent.intent.loader import load_fabric
from agent.intent.plan import DevicePlan, build_plan

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "platforms" / "arista_eos"
PROFILES = ("nvidia-default", "dcqcn-paper", "sonic-default", "pfc-only")
EOS = AristaEos()


def switch_plan(profile: str, tmp: Path) -> DevicePlan:
    """One leaf with a 100G/5 m and a 400G/30 m port under ``profile``."""
    fabric = tmp / f"{profile}.yml"
    fabric.write_text(
        f"""name: golden
profile: {profile}
defaults: {{username: admin, credentials: {{password_env: UNUSED}}}}
devices:
  - name: leaf1
    platform: arista_eos
    role: leaf
    host: leaf1.example
    ports:
      - {{name: Ethernet1, speed: 100G, cable_m: 5, mtu: 9214, peer: "h1:eth0"}}
      - {{name: Ethernet2, speed: 400G, cable_m: 30, mtu: 9214, peer: "h2:eth0"}}
  - {{name: h1, platform: linux_host, role: host, netns: x1,
      ports: [{{name: eth0, speed: 100G, cable_m: 5, mtu: 9214, peer: "leaf1:Ethernet1"}}]}}
  - {{name: h2, platform: linux_host, role: host, netns: x2,
      ports: [{{name: eth0, speed: 400G, cable_m: 30, mtu: 9214, peer: "leaf1:Ethernet2"}}]}}
"""
    )
    device = build_plan(load_fabric(fabric).intent).device("leaf1")
    assert device is not None
    return device


def regenerate() -> None:  # pragma: no cover - a maintenance helper
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for profile in PROFILES:
            lines = EOS.render(switch_plan(profile, Path(tmp)))
            (DATA / f"{profile}.golden").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("profile", PROFILES)
def test_render_matches_reviewed_golden(profile: str, tmp_path: Path) -> None:
    expected = (DATA / f"{profile}.golden").read_text().splitlines()
    assert EOS.render(switch_plan(profile, tmp_path)) == expected


class Recorded:
    """Answers ``show`` commands from recorded files (unit tests only; the lab tests talk to
    real lab switches over SSH)."""

    FILES: ClassVar[dict[str, str]] = {
        "show running-config | json": "leaf2-running-config.json",
        "show priority-flow-control counters | json": "leaf2-pfc-counters.json",
        "show qos interfaces ecn counters queue | json": "leaf2-ecn-counters.json",
        "show interfaces counters queue | json": "leaf2-queue-counters.json",
        "show interfaces counters queue drops | json": "leaf2-queue-drops.json",
        "show priority-flow-control counters watchdog | json": "leaf2-watchdog-counters.json",
    }

    def __init__(self, overrides: dict[str, str] | None = None) -> None:
        self.overrides = overrides or {}

    def send_command(self, command: str, **_: Any) -> str:
        if command in self.overrides:
            return self.overrides[command]
        return (DATA / self.FILES[command]).read_text()


def lab_leaf2() -> DevicePlan:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    device = build_plan(load_fabric(DATA / "lab-leafspine-fabric.yml").intent).device("leaf2")
    assert device is not None
    return device


def test_read_state_of_an_applied_switch_has_no_drift() -> None:
    actual = EOS.read_state(Connection(Recorded(), "leaf2"))
    assert diff("leaf2", desired_state(lab_leaf2()), actual, EOS.managed) == []
    assert actual.dscp_to_priority[26] == 3 and actual.dscp_to_priority[24] == 0
    assert actual.interfaces["Ethernet3"].pfc_priorities == (3,)
    assert actual.watchdog.detection_ms == 300 and actual.watchdog.action == "drop"


def test_one_wrong_threshold_is_exactly_one_difference() -> None:
    text = (DATA / "leaf2-running-config.json").read_text()
    tree = json.loads(text)
    queue = tree["cmds"]["interface Ethernet3"]["cmds"]["uc-tx-queue 3"]["cmds"]
    old = next(line for line in queue if line.startswith("random-detect ecn"))
    queue[old.replace("maximum-threshold 18000 bytes", "maximum-threshold 64 kbytes")] = queue.pop(
        old
    )
    recorded = Recorded({"show running-config | json": json.dumps(tree)})
    found = diff("leaf2", desired_state(lab_leaf2()), EOS.read_state(Connection(recorded, "leaf2")))
    assert [(d.interface, d.setting, d.expected, d.actual) for d in found] == [
        ("Ethernet3", "queue[3].ecn", "6000-18000@100%", "6000-65536@100%")
    ]


def test_one_port_trusting_cos_is_named_not_just_mixed() -> None:
    tree = json.loads((DATA / "leaf2-running-config.json").read_text())
    tree["cmds"]["interface Ethernet3"]["cmds"]["qos trust cos"] = None
    recorded = Recorded({"show running-config | json": json.dumps(tree)})
    actual = EOS.read_state(Connection(recorded, "leaf2"))
    assert actual.trust == "mixed"
    found = diff("leaf2", desired_state(lab_leaf2()), actual)
    assert [(d.interface, d.setting, d.expected, d.actual) for d in found] == [
        ("Ethernet3", "trust", "dscp", "pcp")  # CoS trust, in the state's words
    ]
    # and the change that fixes it sets that interface's trust back
    lines = EOS.render_changes(desired_state(lab_leaf2()), actual)
    assert lines[lines.index("interface Ethernet3") + 1] == "   qos trust dscp"


def test_factory_config_differs_in_every_lossless_setting() -> None:
    factory = {
        "cmds": {"hostname leaf2": None, **{f"interface Ethernet{i}": None for i in range(1, 5)}}
    }
    recorded = Recorded({"show running-config | json": json.dumps(factory)})
    actual = EOS.read_state(Connection(recorded, "leaf2"))
    assert actual.dscp_to_priority == {d: eos_default_priority(d) for d in range(64)}
    settings = {d.setting for d in diff("leaf2", desired_state(lab_leaf2()), actual)}
    assert {"pfc_enabled", "pfc_priorities", "queue[3].ecn", "queue[6].strict",
            "watchdog.enabled", "dscp_to_priority[24]"} <= settings  # fmt: skip


def test_render_changes_is_minimal() -> None:
    desired = desired_state(lab_leaf2())
    assert EOS.render_changes(desired, desired) == []
    actual = EOS.read_state(Connection(Recorded(), "leaf2"))
    assert EOS.render_changes(desired, actual) == []


def test_counters_are_normalized_from_recorded_json() -> None:
    counters = EOS.read_counters(Connection(Recorded(), "leaf2"))
    ethernet3 = counters.interfaces["Ethernet3"]
    pfc = json.loads((DATA / "leaf2-pfc-counters.json").read_text())["interfaceCounters"]
    assert ethernet3.pfc_rx[3] == pfc["Ethernet3"]["rxFrames"] == 200
    assert sum(ethernet3.pfc_rx) == 200  # attributed to the lossless priority only
    queues = json.loads((DATA / "leaf2-queue-counters.json").read_text())
    tc3 = queues["egressQueueCounters"]["interfaces"]["Ethernet3"]["ucastQueues"][
        "trafficClasses"]["TC3"]["dropPrecedences"]["DP0"]  # fmt: skip
    assert ethernet3.queues[3].tx_packets == tc3["enqueuedPackets"] > 0
    marked = json.loads((DATA / "leaf2-ecn-counters.json").read_text())
    assert ethernet3.queues[3].ecn_marked_packets == int(
        marked["intfQueueCounters"]["Ethernet3"]["queueCounters"]["3"]
    )
    assert ethernet3.watchdog[3].storms_detected == 1
    assert ethernet3.watchdog[3].storms_restored == 1 and not ethernet3.watchdog[3].stormed
    assert set(counters.interfaces) == {"Ethernet1", "Ethernet2", "Ethernet3", "Ethernet4"}


class Scripted:
    """A netmiko stand-in that records what the platform sends and answers from a table."""

    base_prompt = "leaf2"

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.sent: list[str] = []
        self.answers = answers or {}

    def send_command(self, command: str, **_: Any) -> str:
        self.sent.append(command)
        return self.answers.get(command, "")

    def send_config_set(self, lines: list[str], **_: Any) -> str:
        self.sent.extend(lines)
        return ""


def test_a_confirmed_change_is_saved_so_a_reload_keeps_it() -> None:
    netmiko = Scripted()
    conn = Connection(netmiko, "leaf2")
    with EOS.transaction(conn, ["qos trust dscp"], 300, name="roce-agent-1") as txn:
        EOS.confirm(conn, txn)
    assert netmiko.sent == [
        "configure session roce-agent-1",
        "qos trust dscp",
        "commit timer 00:05:00",
        "configure session roce-agent-1 commit",
        "copy running-config startup-config",
    ]
    assert txn.confirmed and not txn.rolled_back


def test_a_refused_save_is_an_error_naming_the_device() -> None:
    refused = {"copy running-config startup-config": "% Error copying: no space left on device"}
    conn = Connection(Scripted(refused), "leaf2")
    with pytest.raises(PlatformError, match="leaf2: saving the configuration failed: % Error"):
        EOS.save(conn)


# ``show running-config diffs`` prints a unified diff from the startup to the running config,
# the layout EOS uses for ``show session-config diffs`` (``--- system:/running-config`` /
# ``+++ session:/…`` / ``@@`` hunks; ngworx.ag/en/blog/arista-eos-config-sessions). The
# header names are this lab's; the parser keys on the +/- lines only.
@pytest.mark.parametrize(
    ("output", "unsaved"),
    [
        ("", []),
        (
            "--- flash:/startup-config\n+++ system:/running-config\n@@ -3,4 +3,5 @@\n"
            " hostname leaf2\n-qos map dscp 26 to traffic-class 1\n"
            "+qos map dscp 26 to traffic-class 3\n+qos trust dscp\n !\n",
            [
                "-qos map dscp 26 to traffic-class 1",
                "+qos map dscp 26 to traffic-class 3",
                "+qos trust dscp",
            ],
        ),
        ("--- flash:/startup-config\n+++ system:/running-config\n", []),
    ],
    ids=["saved", "unsaved-change", "headers-only"],
)
def test_unsaved_lines_from_running_config_diffs(output: str, unsaved: list[str]) -> None:
    assert EOS.unsaved(Connection(Scripted({"show running-config diffs": output}), "x")) == unsaved


# ``show interfaces counters errors | json``: the shape of ANTA's VerifyInterfaceErrors test
# data (anta tests/units/anta_tests/test_interfaces.py, INPUT_INTERFACE_ERRORS); ``show
# interfaces status | json``: ANTA's create_status_data (``linkStatus``).
_ERRORS_ZERO = {"inErrors": 0, "frameTooLongs": 0, "outErrors": 0, "frameTooShorts": 0,
                "fcsErrors": 0, "alignmentErrors": 0, "symbolErrors": 0}  # fmt: skip


@pytest.mark.parametrize(
    ("link", "errors", "expected"),
    [
        ("connected", _ERRORS_ZERO, {"up": True, "fcs_errors": 0, "in_errors": 0}),
        ("notconnect", _ERRORS_ZERO, {"up": False, "fcs_errors": 0, "in_errors": 0}),
        ("errdisabled", _ERRORS_ZERO, {"up": False, "fcs_errors": 0, "in_errors": 0}),
        ("connected", {**_ERRORS_ZERO, "fcsErrors": 42, "inErrors": 42},
         {"up": True, "fcs_errors": 42, "in_errors": 42}),
        (None, {**_ERRORS_ZERO, "fcsErrors": 7}, {"up": None, "fcs_errors": 7, "in_errors": 0}),
    ],
    ids=["up-clean", "down", "errdisabled", "fcs-errors", "no-status-row"],
)  # fmt: skip
def test_link_health_from_recorded_json(
    link: str | None, errors: dict[str, int], expected: dict[str, Any]
) -> None:
    status = {"interfaceStatuses": {} if link is None else {"Ethernet6": {"linkStatus": link}}}
    health = EOS.link_health_from_json(status, {"interfaceErrorCounters": {"Ethernet6": errors}})
    assert health["Ethernet6"].model_dump(include=set(expected)) == expected


def test_qos_policies_matching_udp_ports_are_read_per_interface() -> None:
    """AVD's syntax (ip-access-lists.j2, class-maps.j2, policy-maps-qos.j2): an ACL on UDP
    4791 in a class that sets traffic-class 3, on Ethernet1 directly and on Ethernet2 through
    its qos profile; an ACL on addresses only and a class with no ACL classify by no port."""
    tree = json.loads((DATA / "leaf2-running-config.json").read_text())
    cmds = tree["cmds"]
    cmds["ip access-list ROCE"] = {
        "cmds": {
            "10 permit udp any any eq 4791": None,
            "20 permit udp any range 4791 4792 any": None,
        }
    }
    cmds["ip access-list HOSTS"] = {"cmds": {"10 permit ip 198.18.0.0/16 any": None}}
    cmds["class-map type qos match-any ROCE"] = {"cmds": {"match ip access-group ROCE": None}}
    cmds["class-map type qos match-any MGMT"] = {"cmds": {"match ip access-group HOSTS": None}}
    cmds["policy-map type quality-of-service ROCE-IN"] = {"cmds": {
        "class ROCE": {"cmds": {"set traffic-class 3": None}},
        "class MGMT": {"cmds": {"set traffic-class 1": None}},
    }}  # fmt: skip
    cmds["interface Ethernet1"]["cmds"]["service-policy type qos input ROCE-IN"] = None
    cmds["qos profile UDP"] = {"cmds": {"service-policy type qos input ROCE-IN": None}}
    cmds["interface Ethernet2"]["cmds"]["service-profile UDP"] = None
    recorded = Recorded({"show running-config | json": json.dumps(tree)})
    actual = EOS.read_state(Connection(recorded, "leaf2"))
    expected = (
        "policy-map ROCE-IN class ROCE (set traffic-class 3): "
        "ip access-list ROCE '10 permit udp any any eq 4791'",
        "policy-map ROCE-IN class ROCE (set traffic-class 3): "
        "ip access-list ROCE '20 permit udp any range 4791 4792 any'",
    )
    assert actual.interfaces["Ethernet1"].udp_port_classifiers == expected
    assert actual.interfaces["Ethernet2"].udp_port_classifiers == expected
    assert actual.interfaces["Ethernet3"].udp_port_classifiers == ()
    # Not a QoS setting the agent manages: no drift, the check RC010 reports it.
    assert diff("leaf2", desired_state(lab_leaf2()), actual, EOS.managed) == []
