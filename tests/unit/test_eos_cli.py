"""lab.mgmt CLI: grammar, configuration lines (good, bad, ``no`` forms), rendering round-trip,
translation to the data plane's ``set_qos`` payload, unit conversions. No root needed."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest

from lab.mgmt import cli_units, names
from lab.mgmt.cli_grammar import CliError, Command, match_command, tokenize
from lab.mgmt.dataplane_qos import TranslationError, to_vswitch_qos
from lab.mgmt.eos.cli import CliSession
from lab.mgmt.eos.commands import GlobalMode, apply_line, load_config_text
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.eos.render import config_tree, render_config, render_text
from lab.mgmt.model import SwitchConfig
from lab.mgmt.switch import PortInfo, SwitchManager
from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config
from lab.vswitch.config import parse_config, with_qos

PORTS = ["Ethernet1", "Ethernet2", "Ethernet3", "Ethernet4"]


def empty() -> SwitchConfig:
    return SwitchConfig.empty("leaf1", PORTS)


def configure(*lines: str) -> SwitchConfig:
    """Apply lines (as typed after ``configure terminal``) to a factory config."""
    return load_config_text(empty(), "\n".join(lines))


def rendered(config: SwitchConfig) -> list[str]:
    return [line for line in render_config(config) if line.strip() not in ("!", "end")]


# ----------------------------------------------------------------------------- grammar


def test_keywords_accept_unique_prefixes_and_report_eos_errors() -> None:
    commands = [
        Command("show version", "version"),
        Command("show running-config", "running"),
        Command("configure terminal", "conf-t"),
        Command("copy running-config startup-config", "copy"),
        Command("qos map dscp <dscps:ints:0-63> to traffic-class <tc:int:0-7>", "map"),
    ]
    assert match_command(commands, tokenize("sh ver")).command.handler == "version"
    assert match_command(commands, tokenize("conf t")).command.handler == "conf-t"
    match = match_command(commands, tokenize("qos map dscp 8 9 10 to traffic-class 1"))
    assert match.args == {"dscps": [8, 9, 10], "tc": 1}
    with pytest.raises(CliError, match=r"^% Ambiguous command$"):
        match_command(commands, tokenize("co"))
    with pytest.raises(CliError, match=r"^% Incomplete command$"):
        match_command(commands, tokenize("qos map dscp 8 to"))
    with pytest.raises(CliError, match=r"^% Invalid input \(at token 3: '64'\)$"):
        match_command(commands, tokenize("qos map dscp 64 to traffic-class 1"))
    with pytest.raises(CliError, match=r"^% Invalid input \(at token 1: 'versions'\)$"):
        match_command(commands, tokenize("show versions"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ethernet1", ["Ethernet1"]),
        ("Et1-3", ["Ethernet1", "Ethernet2", "Ethernet3"]),
        ("ethernet1,3", ["Ethernet1", "Ethernet3"]),
        ("Eth2-3,1", ["Ethernet1", "Ethernet2", "Ethernet3"]),
    ],
)
def test_interface_ranges(text: str, expected: list[str]) -> None:
    assert names.parse_interface_range(text) == expected
    assert names.range_label(expected) == "Et" + names.compact_ranges(
        names.interface_number(n) for n in expected
    )


@pytest.mark.parametrize("bad", ["Ethernet", "Gig1", "Et3-1", "Ethernet1-"])
def test_bad_interface_ranges(bad: str) -> None:
    with pytest.raises(names.InterfaceNameError):
        names.parse_interface_range(bad)


def test_eos_and_dataplane_names() -> None:
    assert names.eos_name("eth12") == "Ethernet12"
    assert names.dataplane_name("Ethernet12") == "eth12"
    assert names.short_name("Ethernet12") == "Et12"


# ----------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (15, "kbytes", 15 * 1024),
        (1, "mbytes", 1024 * 1024),
        (100, "segments", 20800),
        (7, "bytes", 7),
    ],
)
def test_threshold_units(value: int, unit: cli_units.ThresholdUnit, expected: int) -> None:
    assert cli_units.threshold_bytes(value, unit) == expected


@pytest.mark.parametrize(
    ("seconds", "ms", "text"),
    [("0.2", 200, "0.2"), ("0.05", 50, "0.05"), ("0.001", 1, "0.001"), ("60", 60000, "60")],
)
def test_seconds(seconds: str, ms: int, text: str) -> None:
    assert cli_units.seconds_to_ms(Decimal(seconds)) == ms
    assert cli_units.format_seconds(Decimal(seconds)) == text


# ----------------------------------------------------------------------------- good lines


UDP_CLASSIFICATION = [
    "ip access-list ROCE",
    "permit udp any any eq 4791",
    "deny udp any any eq 54791",
    "class-map type qos match-any ROCE",
    "match ip access-group ROCE",
    "policy-map type quality-of-service ROCE-IN",
    "class ROCE",
    "set traffic-class 3",
    "interface Ethernet2",
    "service-policy type qos input ROCE-IN",
]

GOOD_LINES: list[tuple[list[str], list[str]]] = [
    (["hostname spine-1"], ["hostname spine-1"]),
    (
        ["qos map dscp 26 to traffic-class 3", "qos map dscp 48 46 to traffic-class 6"],
        ["qos map dscp 26 to traffic-class 3", "qos map dscp 46 48 to traffic-class 6"],
    ),
    (["qos map traffic-class 3 5 to dscp 26"], ["qos map traffic-class 3 5 to dscp 26"]),
    (["qos trust dscp"], ["qos trust dscp"]),
    (["no qos trust"], ["no qos trust"]),
    (
        ["interface Ethernet1", "qos trust dscp", "priority-flow-control on"],
        ["interface Ethernet1", "   qos trust dscp", "   priority-flow-control on"],
    ),
    (
        ["int et2", "priority-flow-control mode on", "priority-flow-control priority 3 no-drop"],
        [
            "interface Ethernet2",
            "   priority-flow-control on",
            "   priority-flow-control priority 3 no-drop",
        ],
    ),
    (
        ["interface Ethernet1", "uc-tx-queue 3", "bandwidth percent 50", "priority strict"],
        [
            "interface Ethernet1",
            "   uc-tx-queue 3",
            "      priority strict",
            "      bandwidth percent 50",
        ],
    ),
    (
        [
            "interface Ethernet1",
            "tx-queue 3",
            "random-detect ecn minimum-threshold 15 kbytes maximum-threshold 45 kbytes "
            "max-mark-probability 80 weight 0",
            "random-detect ecn count",
        ],
        [
            "interface Ethernet1",
            "   uc-tx-queue 3",
            "      random-detect ecn count",
            "      random-detect ecn minimum-threshold 15 kbytes maximum-threshold 45 kbytes "
            "max-mark-probability 80 weight 0",
        ],
    ),
    (
        [
            "interface Ethernet3",
            "priority-flow-control pause watchdog",
            "priority-flow-control pause watchdog port action notify-only",
            "priority-flow-control pause watchdog port timer timeout 0.3 polling-interval auto "
            "recovery-time 1.5 forced",
        ],
        [
            "interface Ethernet3",
            "   priority-flow-control pause watchdog",
            "   priority-flow-control pause watchdog port action notify-only",
            "   priority-flow-control pause watchdog port timer timeout 0.3 polling-interval auto "
            "recovery-time 1.5 forced",
        ],
    ),
    (
        [
            "priority-flow-control pause watchdog default timeout 0.2",
            "priority-flow-control pause watchdog default recovery-time 0.4",
            "priority-flow-control pause watchdog default polling-interval 0.005",
            "priority-flow-control pause watchdog action no-drop",
            "priority-flow-control all off",
        ],
        [
            "priority-flow-control all off",
            "priority-flow-control pause watchdog action no-drop",
            "priority-flow-control pause watchdog default timeout 0.2",
            "priority-flow-control pause watchdog default polling-interval 0.005",
            "priority-flow-control pause watchdog default recovery-time 0.4",
        ],
    ),
    (
        [
            "qos profile ROCE",
            "priority-flow-control on",
            "interface Ethernet1-2",
            "service-profile ROCE",
        ],
        [
            "qos profile ROCE",
            "   priority-flow-control on",
            "interface Ethernet1",
            "   service-profile ROCE",
            "interface Ethernet2",
            "   service-profile ROCE",
        ],
    ),
    (
        ["interface Ethernet4", "description to h4 | rail 0"],
        ["interface Ethernet4", "   description to h4 | rail 0"],
    ),
    (  # QoS classification by UDP port [AVD-ACL] [AVD-CMAP] [AVD-PMAP]
        UDP_CLASSIFICATION,
        [
            "ip access-list ROCE",
            "   10 permit udp any any eq 4791",
            "   20 deny udp any any eq 54791",
            "class-map type qos match-any ROCE",
            "   match ip access-group ROCE",
            "policy-map type quality-of-service ROCE-IN",
            "   class ROCE",
            "      set traffic-class 3",
            "interface Ethernet2",
            "   service-policy type qos input ROCE-IN",
        ],
    ),
]


@pytest.mark.parametrize(("lines", "expected"), GOOD_LINES)
def test_good_lines_render_as_eos(lines: list[str], expected: list[str]) -> None:
    config = configure(*lines)
    out = rendered(config)
    for line in expected:
        assert line in out, (line, out)
    assert load_config_text(empty(), render_text(config)) == config


def test_sub_mode_lines_fall_back_to_the_parent_mode() -> None:
    stack: list[Any] = [GlobalMode()]
    config = empty()
    for line in ("qos profile P", "uc-tx-queue 3", "bandwidth percent 40"):
        stack = apply_line(config, stack, line)
    assert [m.label() for m in stack] == ["", "qos-profile-P", "qos-profile-P-uc-txq-3"]
    stack = apply_line(config, stack, "priority-flow-control on")  # profile-level line
    assert stack[-1].label() == "qos-profile-P"
    stack = apply_line(config, stack, "interface Ethernet2")  # global line
    assert stack[-1].label() == "if-Et2"
    assert config.profiles["P"].pfc_enabled is True
    assert config.profiles["P"].tx_queues[3].bandwidth_percent == 40


# ----------------------------------------------------------------------------- bad lines


BAD_LINES: list[tuple[list[str], str, str]] = [
    ([], "qos map dscp 64 to traffic-class 3", r"% Invalid input \(at token 3: '64'\)"),
    ([], "qos map dscp 26 to traffic-class 8", r"% Invalid input \(at token 6: '8'\)"),
    ([], "qos map dscp 26 to", "% Incomplete command"),
    ([], "interface Ethernet9", r"% Invalid input \(at token 1: 'Ethernet9'\)"),
    ([], "interface Ethernet1-9", r"% Invalid input \(at token 1: 'Ethernet1-9'\)"),
    ([], "frobnicate", r"% Invalid input \(at token 0: 'frobnicate'\)"),
    ([], "hostname -bad", r"% Invalid input \(at token 1: '-bad'\)"),
    (["interface Ethernet1"], "priority-flow-control priority 9 no-drop", r"token 2: '9'"),
    (["interface Ethernet1"], "priority-flow-control priority 3 lossless", r"token 3: 'lossless'"),
    (["interface Ethernet1", "uc-tx-queue 3"], "bandwidth percent 0", r"token 2: '0'"),
    (["interface Ethernet1", "uc-tx-queue 3"], "bandwidth percent 101", r"token 2: '101'"),
    (
        ["interface Ethernet1", "uc-tx-queue 3"],
        "random-detect ecn minimum-threshold 3 milliseconds maximum-threshold 9 milliseconds",
        r"token 4: 'milliseconds'",
    ),
    (
        ["interface Ethernet1", "uc-tx-queue 3"],
        "random-detect ecn minimum-threshold 10 kbytes maximum-threshold 20 kbytes "
        "max-mark-probability 0",
        r"token 9: '0'",
    ),
    ([], "priority-flow-control pause watchdog default timeout 0.001", r"token 5: '0.001'"),
    ([], "priority-flow-control pause watchdog action errdisable", r"token 4: 'errdisable'"),
    (["interface Ethernet1"], "uc-tx-queue 8", r"token 1: '8'"),
]


@pytest.mark.parametrize(("setup", "line", "error"), BAD_LINES)
def test_bad_lines_are_refused_and_change_nothing(setup: list[str], line: str, error: str) -> None:
    stack: list[Any] = [GlobalMode()]
    config = empty()
    for good in setup:
        stack = apply_line(config, stack, good)
    before = config.clone()
    with pytest.raises(CliError, match=error):
        apply_line(config, stack, line)
    assert config == before


def test_load_config_text_names_the_bad_line() -> None:
    with pytest.raises(CliError, match=r"line 2: 'qos map dscp 99 to traffic-class 1'"):
        load_config_text(empty(), "hostname x\nqos map dscp 99 to traffic-class 1\n")


# ----------------------------------------------------------------------------- no forms


NO_FORMS: list[tuple[list[str], list[str]]] = [
    (["qos map dscp 26 48 to traffic-class 3"], ["no qos map dscp 26 to traffic-class 3"]),
    (["qos map traffic-class 3 to dscp 26"], ["no qos map traffic-class 3"]),
    (
        ["interface Ethernet1", "priority-flow-control priority 3 no-drop"],
        ["no priority-flow-control priority 3"],
    ),
    (["interface Ethernet1", "priority-flow-control on"], ["default priority-flow-control"]),
    (["interface Ethernet1", "qos trust dscp"], ["default qos trust"]),
    (["interface Ethernet1", "description x"], ["no description"]),
    (["interface Ethernet1", "service-profile P"], ["no service-profile"]),
    (["interface Ethernet1", "uc-tx-queue 3", "bandwidth percent 30"], ["no bandwidth percent"]),
    (["interface Ethernet1", "uc-tx-queue 3", "priority strict"], ["no priority"]),
    (
        [
            "interface Ethernet1",
            "uc-tx-queue 3",
            "random-detect ecn minimum-threshold 1 kbytes maximum-threshold 2 kbytes",
        ],
        ["no random-detect ecn"],
    ),
    (
        ["interface Ethernet1", "uc-tx-queue 3", "random-detect ecn count"],
        ["no random-detect ecn count"],
    ),
    (["interface Ethernet1", "uc-tx-queue 3", "bandwidth percent 5"], ["exit", "no uc-tx-queue 3"]),
    (
        ["interface Ethernet1", "priority-flow-control pause watchdog port action drop"],
        ["no priority-flow-control pause watchdog port action"],
    ),
    (
        [
            "interface Ethernet1",
            "priority-flow-control pause watchdog port timer timeout 1 polling-interval 0.5 "
            "recovery-time 2",
        ],
        ["no priority-flow-control pause watchdog port timer"],
    ),
    (["qos profile P"], ["no qos profile P"]),
    (["priority-flow-control all off"], ["no priority-flow-control all off"]),
    (
        ["priority-flow-control pause watchdog default timeout 0.2"],
        ["no priority-flow-control pause watchdog default timeout"],
    ),
    (
        ["priority-flow-control pause watchdog default recovery-time 0.2"],
        ["no priority-flow-control pause watchdog default recovery-time 0.2"],
    ),
    (
        ["priority-flow-control pause watchdog default polling-interval 0.2"],
        ["no priority-flow-control pause watchdog default polling-interval"],
    ),
    (
        ["priority-flow-control pause watchdog action drop"],
        ["no priority-flow-control pause watchdog action"],
    ),
    (["qos trust cos"], ["default qos trust"]),
]


@pytest.mark.parametrize(("setup", "undo"), NO_FORMS)
def test_no_forms_restore_the_default(setup: list[str], undo: list[str]) -> None:
    text = "\n".join(setup + undo)
    config = load_config_text(empty(), text)
    if setup[0].startswith("qos map dscp 26 48"):
        assert config.dscp_to_tc == {48: 3}
        return
    assert render_config(config) == render_config(empty()), render_text(config)


def test_no_priority_flow_control_is_explicit_off() -> None:
    config = configure(
        "qos profile P",
        "priority-flow-control on",
        "interface Ethernet1",
        "service-profile P",
        "no priority-flow-control",
    )
    assert "   no priority-flow-control" in render_config(config)
    qos = to_vswitch_qos(config)
    assert "eth1" not in qos["ports"]


# ----------------------------------------------------------------------------- rendering


LOSSLESS = """
hostname leaf1
qos map dscp 26 to traffic-class 3
qos map dscp 48 to traffic-class 6
qos profile ROCE
   qos trust dscp
   priority-flow-control on
   priority-flow-control priority 3 no-drop
   priority-flow-control pause watchdog
   !
   uc-tx-queue 3
      bandwidth percent 50
      random-detect ecn minimum-threshold 15 kbytes maximum-threshold 45 kbytes weight 0
   !
   uc-tx-queue 6
      priority strict
   uc-tx-queue 0
      bandwidth percent 50
interface Ethernet1-3
   service-profile ROCE
interface Ethernet4
   description uplink
   priority-flow-control pause watchdog port timer timeout 0.4 polling-interval 0.1 recovery-time 1
priority-flow-control pause watchdog default timeout 0.2
priority-flow-control pause watchdog default recovery-time 0.4
priority-flow-control pause watchdog default polling-interval 0.1
priority-flow-control pause watchdog action drop
"""


def test_render_parse_round_trip() -> None:
    config = load_config_text(empty(), LOSSLESS)
    text = render_text(config)
    assert text.startswith("! Command: show running-config\n")
    assert text.endswith("!\nend\n")
    again = load_config_text(empty(), text)
    assert again == config
    assert render_text(again) == text


def test_running_config_json_tree() -> None:
    tree = config_tree(load_config_text(empty(), LOSSLESS))
    profile = tree["cmds"]["qos profile ROCE"]
    assert profile["cmds"]["priority-flow-control on"] is None
    assert profile["cmds"]["uc-tx-queue 6"]["cmds"] == {"priority strict": None}
    assert tree["cmds"]["hostname leaf1"] is None
    assert tree["cmds"]["interface Ethernet1"]["cmds"] == {"service-profile ROCE": None}


# ----------------------------------------------------------------------------- translation


def _validated(qos: dict[str, Any]) -> Any:
    """The data plane's own validation (lab.vswitch.config) accepts the payload."""
    base = parse_config(fake_switch_config("leaf1", ["eth1", "eth2", "eth3", "eth4"]))
    return with_qos(base, qos).qos


def test_lossless_profile_translates_to_the_vswitch_contract() -> None:
    qos = to_vswitch_qos(load_config_text(empty(), LOSSLESS))
    assert qos["trust"] == "dscp"
    assert qos["dscp_to_tc"] == {"26": 3, "48": 6}
    assert qos["watchdog"] == {
        "enabled": True,
        "detection_ms": 200,
        "restoration_ms": 400,
        "polling_ms": 100,
        "action": "drop",
    }
    eth1 = qos["ports"]["eth1"]
    assert eth1["pfc_enabled"] is True and eth1["pfc_priorities"] == [3]
    assert eth1["queues"]["3"] == {
        "ecn": {"min_bytes": 15360, "max_bytes": 46080, "max_probability": 100},
        "bandwidth_percent": 50,
    }
    assert eth1["queues"]["6"] == {"strict": True}
    assert eth1["watchdog"]["enabled"] is True
    eth4 = qos["ports"]["eth4"]
    assert eth4["pfc_enabled"] is False
    assert eth4["watchdog"] == {
        "enabled": True,
        "detection_ms": 400,
        "restoration_ms": 1000,
        "polling_ms": 100,
        "action": "drop",
    }
    model = _validated(qos)
    assert model.tc_for_dscp(26) == 3 and model.tc_for_dscp(10) == 1
    assert model.port("eth2").queues[3].ecn.max_bytes == 46080


def test_interface_lines_override_the_profile() -> None:
    config = configure(
        "qos profile P",
        "priority-flow-control on",
        "priority-flow-control priority 3 no-drop",
        "uc-tx-queue 3",
        "bandwidth percent 40",
        "interface Ethernet1",
        "service-profile P",
        "priority-flow-control priority 4 no-drop",
        "uc-tx-queue 3",
        "random-detect ecn minimum-threshold 100 segments maximum-threshold 200 segments",
    )
    port = to_vswitch_qos(config)["ports"]["eth1"]
    assert port["pfc_priorities"] == [3, 4]
    assert port["queues"]["3"] == {
        "ecn": {"min_bytes": 20800, "max_bytes": 41600, "max_probability": 100},
        "bandwidth_percent": 40,
    }
    _validated(to_vswitch_qos(config))


def test_watchdog_port_notify_only_is_alert_and_auto_polling_is_half_the_timeout() -> None:
    config = configure(
        "interface Ethernet2",
        "priority-flow-control pause watchdog port action notify-only",
        "priority-flow-control pause watchdog port timer timeout 0.3 polling-interval auto "
        "recovery-time 1",
    )
    wd = to_vswitch_qos(config)["ports"]["eth2"]["watchdog"]
    assert wd == {
        "enabled": False,
        "detection_ms": 300,
        "restoration_ms": 1000,
        "polling_ms": 150,
        "action": "alert",
    }
    _validated(to_vswitch_qos(config))


def test_global_all_off_and_trust() -> None:
    config = configure(
        "priority-flow-control all off",
        "interface Ethernet1",
        "priority-flow-control on",
        "no qos trust",
    )
    qos = to_vswitch_qos(config)
    assert qos["trust"] == "dscp" and qos["ports"]["eth1"]["trust"] == "none"
    assert qos["ports"]["eth1"]["pfc_enabled"] is False
    _validated(qos)
    config = configure(
        "no qos trust",
        "priority-flow-control all off",
        "interface Ethernet1",
        "priority-flow-control on",
    )
    qos = to_vswitch_qos(config)
    assert qos["trust"] == "none" and "eth1" not in qos["ports"]


TRUST_CASES: list[tuple[list[str], str, dict[str, str]]] = [
    # (config lines, switch-wide data-plane trust, per-port trust where it differs)
    ([], "dscp", {}),
    (["interface Ethernet1", "qos trust cos"], "dscp", {"eth1": "cos"}),
    (["interface Ethernet2", "qos trust dscp"], "dscp", {}),
    (["qos trust cos"], "dscp", {f"eth{i}": "cos" for i in range(1, 5)}),
    (
        ["qos trust cos", "interface Ethernet2", "qos trust dscp"],
        "dscp",
        {"eth1": "cos", "eth3": "cos", "eth4": "cos"},
    ),
    (["no qos trust", "interface Ethernet1", "qos trust cos"], "none", {"eth1": "cos"}),
    (["no qos trust", "interface Ethernet2", "qos trust dscp"], "none", {"eth2": "dscp"}),
]


@pytest.mark.parametrize(("lines", "switch_trust", "ports"), TRUST_CASES)
def test_per_interface_trust_reaches_the_data_plane(
    lines: list[str], switch_trust: str, ports: dict[str, str]
) -> None:
    qos = to_vswitch_qos(configure(*lines))
    assert qos["trust"] == switch_trust
    assert {name: p["trust"] for name, p in qos["ports"].items() if "trust" in p} == ports
    _validated(qos)


def test_ecn_min_above_max_is_refused_with_where() -> None:
    config = configure(
        "interface Ethernet1",
        "uc-tx-queue 3",
        "random-detect ecn minimum-threshold 2 mbytes maximum-threshold 100 kbytes",
    )
    with pytest.raises(TranslationError, match=r"Ethernet1 uc-tx-queue 3: .*2097152 bytes.*102400"):
        to_vswitch_qos(config)


def test_strict_queue_drops_its_bandwidth_for_the_data_plane() -> None:
    config = configure(
        "interface Ethernet1", "uc-tx-queue 6", "bandwidth percent 10", "priority strict"
    )
    assert to_vswitch_qos(config)["ports"]["eth1"]["queues"] == {"6": {"strict": True}}
    _validated(to_vswitch_qos(config))


# ----------------------------------------------------------------- the data plane decides


def _manager(dataplane: FakeDataplane) -> SwitchManager:
    ports = [PortInfo(name, 10_000_000) for name in PORTS]
    return SwitchManager("leaf1", ports, dataplane, FakeClock())


def test_refused_set_qos_leaves_running_config_unchanged() -> None:
    async def scenario() -> None:
        dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2", "eth3", "eth4"]))
        manager = _manager(dataplane)
        eos = EosPersonality(manager)
        await eos.start()
        cli = CliSession(eos, "admin", "vty1")
        assert await cli.execute("configure terminal") == ""
        await cli.execute("interface Ethernet1")
        for queue, percent in ((1, 60), (2, 30)):
            await cli.execute(f"uc-tx-queue {queue}")
            assert await cli.execute(f"bandwidth percent {percent}") == ""
        before = render_text(manager.running)
        calls = len(dataplane.set_qos_calls)
        await cli.execute("uc-tx-queue 3")
        error = await cli.execute("bandwidth percent 20")  # 60 + 30 + 20 > 100
        assert error.startswith("% Data plane refused the change: invalid qos: qos.ports.eth1")
        assert render_text(manager.running) == before
        assert len(dataplane.set_qos_calls) == calls
        dataplane.fail_next_set_qos = "switch busy"
        assert (
            await cli.execute("priority strict") == "% Data plane refused the change: switch busy"
        )
        assert render_text(manager.running) == before
        assert await cli.execute("description no qos change") == ""  # no set_qos needed
        assert len(dataplane.set_qos_calls) == calls

    asyncio.run(scenario())


def test_exec_commands_and_pipes() -> None:
    async def scenario() -> None:
        dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2", "eth3", "eth4"]))
        eos = EosPersonality(_manager(dataplane))
        await eos.start()
        cli = CliSession(eos, "admin", "vty1", privileged=False)
        assert cli.prompt() == "leaf1>"
        assert (
            await cli.execute("configure terminal") == "% Invalid input (privileged mode required)"
        )
        assert await cli.execute("enable") == ""
        assert cli.prompt() == "leaf1#"
        assert await cli.execute("terminal length 0") == "Pagination disabled."
        assert await cli.execute("terminal width 511") == "Width set to 511 columns."
        assert '"hostname": "leaf1"' in await cli.execute("show hostname | json")
        assert await cli.execute("show priority-flow-control counters | jsn") == (
            "% Invalid input (at token 4: 'jsn')"
        )
        assert await cli.execute("show session-config") == "% Not in a configuration session"
        assert await cli.execute("write memory") == "% No startup-config storage configured"
        out = await cli.execute("show running-config | include hostname")
        assert out == "hostname leaf1"
        await cli.execute("conf t")
        assert cli.prompt() == "leaf1(config)#"
        await cli.execute("hostname spine1")
        assert cli.prompt() == "spine1(config)#"
        assert "hostname spine1" in await cli.execute("show running-config")  # show in config mode
        await cli.execute("end")
        assert cli.prompt() == "spine1#"
        await cli.execute("exit")
        assert cli.closed

    asyncio.run(scenario())


def test_udp_port_classification_reaches_the_data_plane_and_the_agent_reads_it() -> None:
    """The first permit of a port wins, a deny takes its port out; the agent's EOS parser
    reads the lab's JSON running-config as it reads a real switch's (check RC010)."""
    from agent.device.platforms.arista_eos import udp_port_classifiers

    config = configure(*UDP_CLASSIFICATION, "ip access-list ROCE", "30 permit udp any any eq 4792")
    qos = _validated(to_vswitch_qos(config))
    assert qos.port("eth2").udp_dst_port_tc == {4791: 3, 4792: 3}
    assert qos.port("eth1").udp_dst_port_tc == {}
    assert udp_port_classifiers(config_tree(config)["cmds"]) == {
        "ROCE-IN": (
            "policy-map ROCE-IN class ROCE (set traffic-class 3): "
            "ip access-list ROCE '10 permit udp any any eq 4791'",
            "policy-map ROCE-IN class ROCE (set traffic-class 3): "
            "ip access-list ROCE '30 permit udp any any eq 4792'",
        )
    }
    removed = configure(*UDP_CLASSIFICATION, "interface Ethernet2",
                        "no service-policy type qos input")  # fmt: skip
    assert _validated(to_vswitch_qos(removed)).port("eth2").udp_dst_port_tc == {}
