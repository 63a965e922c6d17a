"""The lab's NX-OS personality (lab/mgmt/nxos/) on a fake data plane and a fake clock.

1. CLI: modes and prompts, NX-OS' errors (caret, ``%`` lines) that change nothing, ``;``.
2. The configuration: rendering then reading back gives the same configuration, on seeded
   random configurations; what it means for the data plane (the payload the fake validates
   with the real switch's contract); what the lab cannot do is refused.
3. Checkpoints, ``rollback``, ``configure replace`` with its commit timer on the switch's clock.
4. The startup-config survives a restart; ``show running-config diff`` says what would not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.mgmt.nxos.commands import load_config_text
from lab.mgmt.nxos.config import (
    NETWORK_QOS_CLASSES,
    QUEUING_CLASSES,
    ClassMap,
    NxosConfig,
    PolicyClass,
    PolicyMap,
    Watchdog,
    Wred,
)
from lab.mgmt.nxos.render import render_lines
from tests.unit.lab_nxos_support import NxosSwitch, run

ROCE = [
    "configure terminal",
    "class-map type qos match-any ROCE",
    "match dscp 26",
    "class-map type qos match-any CNP",
    "match dscp 48",
    "policy-map type qos CLASSIFY",
    "class ROCE",
    "set qos-group 3",
    "class CNP",
    "set qos-group 6",
    "policy-map type network-qos NQ",
    "class type network-qos c-8q-nq3",
    "mtu 9216",
    "pause pfc-cos 3",
    "policy-map type queuing OUT",
    "class type queuing c-out-8q-q3",
    "bandwidth remaining percent 50",
    "random-detect minimum-threshold 6000 bytes maximum-threshold 18000 bytes "
    "drop-probability 100 weight 0 ecn",
    "class type queuing c-out-8q-q6",
    "priority level 1",
    "class type queuing c-out-8q-q-default",
    "bandwidth remaining percent 50",
    "system qos",
    "service-policy type network-qos NQ",
    "service-policy type queuing output OUT",
    "priority-flow-control watch-dog-interval on",
    "priority-flow-control watch-dog interval 100",
    "priority-flow-control watch-dog shutdown-multiplier 3",
    "priority-flow-control auto-restore multiplier 6",
    "interface ethernet 1/1-2",
    "priority-flow-control mode on",
    "service-policy type qos input CLASSIFY",
    "end",
]


def switch_with(*lines: str, state_dir: Path | None = None) -> NxosSwitch:
    switch = NxosSwitch(state_dir)
    asyncio.run(_start_and_type(switch, lines))
    return switch


async def _start_and_type(switch: NxosSwitch, lines: tuple[str, ...]) -> None:
    await switch.personality.start()
    outputs = await run(switch.terminal(), *lines)
    assert not [o for o in outputs if o.startswith("%") or "marker" in o], outputs


# ----------------------------------------------------------------------------- CLI


def test_prompts_follow_the_modes() -> None:
    switch = NxosSwitch()

    async def prompts() -> list[str]:
        await switch.personality.start()
        terminal = switch.terminal()
        seen = []
        for line in ["configure terminal", "policy-map type queuing Q",
                     "class type queuing c-out-8q-q3", "policy-map type network-qos N",
                     "class type network-qos c-8q-nq3", "policy-map type qos C",
                     "class class-default", "class-map type qos X", "system qos",
                     "interface ethernet 1/1", "interface Eth1/1-2", "exit", "end"]:  # fmt: skip
            await terminal.execute(line)
            seen.append(terminal.prompt())
        return seen

    assert asyncio.run(prompts()) == [
        "leaf1(config)#", "leaf1(config-pmap-que)#", "leaf1(config-pmap-c-que)#",
        "leaf1(config-pmap-nqos)#", "leaf1(config-pmap-nqos-c)#", "leaf1(config-pmap-qos)#",
        "leaf1(config-pmap-c-qos)#", "leaf1(config-cmap-qos)#", "leaf1(config-sys-qos)#",
        "leaf1(config-if)#", "leaf1(config-if-range)#", "leaf1(config)#", "leaf1#",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # NX-OS' errors: a caret under the token, the % line under it
        ("policy-map type quality Q", "% Invalid command at '^' marker."),
        ("interface", "% Incomplete command at '^' marker."),
        ("priority-flow-control watch-dog interval 50", "% Invalid command at '^' marker."),
        ("service-policy type qos input NOPE", "% Invalid command at '^' marker."),
        # a reference to nothing, an object in use
        ("no class-map type qos NOPE", "% class-map NOPE does not exist"),
        ("no policy-map type queuing OUT", "% policy-map OUT is in use (system qos)"),
        ("no class-map type qos ROCE", "% class-map ROCE is used by policy-map CLASSIFY"),
        ("interface ethernet 1/9", "% Invalid interface Ethernet1/9: no such port on this switch"),
    ],
)
def test_refused_lines_say_why_and_change_nothing(line: str, expected: str) -> None:
    switch = switch_with(*ROCE)
    before = switch.personality.running.clone()
    payload = switch.qos()

    async def refused() -> str:
        return (await run(switch.terminal(), "configure terminal", line))[1]

    output = asyncio.run(refused())
    assert output.splitlines()[-1] == expected
    if "marker" in expected:  # the caret stands under the blamed token
        caret = output.splitlines()[0]
        assert caret.strip() == "^" and len(caret) > len("leaf1(config)#")
    assert switch.personality.running == before and switch.qos() == payload


def test_a_sub_mode_line_it_does_not_know_goes_to_the_enclosing_mode() -> None:
    switch = switch_with(*ROCE)

    async def lines() -> tuple[str, str]:
        terminal = switch.terminal()
        await run(terminal, "configure terminal", "policy-map type queuing OUT",
                  "class type queuing c-out-8q-q3", "interface ethernet 1/3")  # fmt: skip
        prompt = terminal.prompt()
        await run(terminal, "priority-flow-control mode on", "end")
        return prompt, str(switch.personality.running.interfaces["Ethernet1/3"].pfc_mode)

    assert asyncio.run(lines()) == ("leaf1(config-if)#", "on")


def test_commands_on_one_line_run_in_turn_and_stop_at_the_first_error() -> None:
    switch = switch_with(*ROCE)

    async def chained() -> str:
        return await switch.terminal().execute("checkpoint a ; bogus ; checkpoint b")

    output = asyncio.run(chained())
    assert output.startswith("Done\n") and output.endswith("% Invalid command at '^' marker.")
    assert list(switch.personality.rollbacks.checkpoints) == ["a"]


def test_exec_commands_work_in_configuration_mode() -> None:
    switch = switch_with(*ROCE)

    async def shown() -> str:
        return (await run(switch.terminal(), "configure terminal", "show hostname"))[1]

    assert asyncio.run(shown()) == "leaf1"


# ----------------------------------------------------------------------------- the configuration


@st.composite
def configs(draw: st.DrawFn) -> NxosConfig:
    """Random NX-OS configurations the CLI accepts (every reference defined)."""
    config = NxosConfig.empty("leaf1", [f"Ethernet1/{i}" for i in range(1, 4)])
    names = draw(st.lists(st.sampled_from(["A", "B", "C", "D"]), unique=True, max_size=3))
    values = st.lists(st.integers(0, 63), min_size=1, max_size=4, unique=True).map(sorted)
    for name in names:
        config.class_maps[name] = ClassMap(draw(st.booleans()), draw(values))
    groups = st.none() | st.integers(0, 7)
    qos = PolicyMap({c: PolicyClass(qos_group=draw(groups)) for c in [*names, "class-default"]})
    config.policies[("qos", "CLS")] = qos
    config.policies[("network-qos", "NQ")] = PolicyMap(
        {
            c: PolicyClass(
                mtu=draw(st.none() | st.integers(1500, 9216)),
                pause_cos=draw(st.lists(st.integers(0, 7), unique=True, max_size=2).map(sorted)),
            )
            for c in draw(st.lists(st.sampled_from(sorted(NETWORK_QOS_CLASSES)), unique=True))
        }
    )
    config.policies[("queuing", "OUT")] = PolicyMap(
        {
            c: draw(_queuing_class())
            for c in draw(st.lists(st.sampled_from(sorted(QUEUING_CLASSES)), unique=True))
        }
    )
    for direction, name in (("network-qos", "NQ"), ("queuing output", "OUT"), ("qos input", "CLS")):
        if draw(st.booleans()):
            config.system[direction] = name
    config.watchdog = Watchdog(
        draw(st.none() | st.booleans()),
        draw(st.none() | st.integers(100, 1000)),
        draw(st.none() | st.integers(1, 10)),
        draw(st.none() | st.integers(0, 100)),
    )
    for port in config.interfaces.values():
        port.description = draw(st.none() | st.sampled_from(["to gpu01", "uplink"]))
        port.pfc_mode = draw(st.none() | st.sampled_from(["on", "off", "auto"]))
        port.pfc_send_tlv = port.pfc_mode is not None and draw(st.booleans())
        port.watchdog = draw(st.none() | st.booleans())
        port.qos_input = draw(st.none() | st.just("CLS"))
        port.queuing_output = draw(st.none() | st.just("OUT"))
    return config


@st.composite
def _queuing_class(draw: st.DrawFn) -> PolicyClass:
    entry = PolicyClass()
    if draw(st.booleans()):
        entry.priority_level = draw(st.integers(1, 7))
    else:
        entry.bandwidth_remaining = draw(st.none() | st.integers(0, 100))
    if draw(st.booleans()):
        low = draw(st.integers(1, 100_000))
        entry.wred = Wred(
            low, "bytes", low + draw(st.integers(0, 100_000)), "bytes",
            draw(st.none() | st.integers(0, 100)), draw(st.none() | st.integers(0, 15)),
            draw(st.booleans()),
        )  # fmt: skip
    return entry


@settings(max_examples=150, deadline=None, derandomize=True)
@given(configs())
def test_rendering_then_reading_back_gives_the_same_configuration(config: NxosConfig) -> None:
    factory = NxosConfig.empty("leaf1", list(config.interfaces))
    assert load_config_text(factory, "\n".join(render_lines(config))) == config


def test_the_roce_configuration_runs_in_the_data_plane() -> None:
    qos = switch_with(*ROCE).qos()
    assert qos["dscp_to_tc"]["26"] == 3 and qos["dscp_to_tc"]["48"] == 6
    assert qos["dscp_to_tc"]["0"] == 0 and qos["dscp_to_tc"]["24"] == 0  # class-default
    assert qos["watchdog"] == {
        "enabled": True, "detection_ms": 300, "restoration_ms": 600, "polling_ms": 100,
        "action": "drop",
    }  # fmt: skip
    eth1 = qos["ports"]["eth1"]
    assert eth1["pfc_enabled"] is True and eth1["pfc_priorities"] == [3]
    ecn = {"min_bytes": 6000, "max_bytes": 18000, "max_probability": 100}
    assert eth1["queues"] == {
        "0": {"ecn": None, "strict": False, "bandwidth_percent": 50},
        "3": {"ecn": ecn, "strict": False, "bandwidth_percent": 50},
        "6": {"ecn": None, "strict": True, "bandwidth_percent": None},
    }
    # a port without the classification policy: everything in qos-group 0, PFC auto (no DCBX)
    eth3 = qos["ports"]["eth3"]
    assert eth3["trust"] == "none" and eth3["pfc_enabled"] is False


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (["policy-map type queuing OUT", "class type queuing c-out-8q-q3",
          "random-detect minimum-threshold 6000 bytes maximum-threshold 18000 bytes"],
         "random-detect without ecn"),
        (["class-map type qos match-any OTHER", "match dscp 26", "policy-map type qos CLS2",
          "class OTHER", "set qos-group 5", "interface ethernet 1/3",
          "service-policy type qos input CLS2"], "one DSCP map"),
        (["class-map type qos match-any COS", "match cos 3", "policy-map type qos CLASSIFY",
          "class COS", "set qos-group 3"], "DSCP only"),
    ],
)  # fmt: skip
def test_what_the_lab_cannot_do_is_refused(lines: list[str], why: str) -> None:
    switch = switch_with(*ROCE)
    payload = switch.qos()

    async def typed() -> list[str]:
        return await run(switch.terminal(), "configure terminal", *lines)

    outputs = asyncio.run(typed())
    assert why in outputs[-1] and outputs[-1].startswith("% ")
    assert switch.qos() == payload


# ----------------------------------------------------------------------------- rollback


def test_rollback_to_a_checkpoint_brings_the_whole_configuration_back() -> None:
    switch = switch_with(*ROCE)
    payload = switch.qos()

    async def scenario() -> list[str]:
        return await run(
            switch.terminal(), "checkpoint before", "configure terminal",
            "interface ethernet 1/1", "no priority-flow-control mode on", "end",
            "rollback running-config checkpoint before",
        )  # fmt: skip

    outputs = asyncio.run(scenario())
    assert outputs[-1].endswith("Rollback completed successfully.")
    assert switch.qos() == payload
    assert switch.personality.running.interfaces["Ethernet1/1"].pfc_mode == "on"


def _file(switch: NxosSwitch, name: str, text: str) -> None:
    directory = switch.personality.bootflash.directory
    assert directory is not None
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text)


def test_configure_replace_without_commit_is_undone_by_its_timer(tmp_path: Path) -> None:
    switch = switch_with(*ROCE, state_dir=tmp_path)
    before = switch.qos()
    changed = switch.personality.running.clone()
    changed.interfaces["Ethernet1/3"].pfc_mode = "on"
    _file(switch, "new.cfg", "\n".join(render_lines(changed)))

    async def scenario() -> tuple[str, dict[str, Any], dict[str, Any]]:
        out = await switch.terminal().execute(
            "configure replace bootflash:new.cfg commit-timeout 30"
        )
        during = switch.qos()
        await switch.expire(29)
        assert switch.qos() == during  # not yet
        await switch.expire(2)
        return out, during, switch.qos()

    output, during, after = asyncio.run(scenario())
    assert "Configure replace completed successfully." in output
    assert during["ports"]["eth3"]["pfc_enabled"] is True
    assert after == before and switch.personality.rollbacks.pending is None


def test_configure_replace_commit_keeps_it(tmp_path: Path) -> None:
    switch = switch_with(*ROCE, state_dir=tmp_path)
    changed = switch.personality.running.clone()
    changed.interfaces["Ethernet1/3"].pfc_mode = "on"
    _file(switch, "new.cfg", "\n".join(render_lines(changed)))

    async def scenario() -> list[str]:
        terminal = switch.terminal()
        outputs = await run(
            terminal, "configure replace bootflash:new.cfg commit-timeout 30",
            "configure replace bootflash:new.cfg commit-timeout 30",  # refused: one at a time
            "configure replace commit", "configure replace commit",
        )  # fmt: skip
        await switch.expire(60)
        return outputs

    outputs = asyncio.run(scenario())
    assert outputs[1].startswith("% A configure replace is waiting")
    assert outputs[2] == "" and outputs[3] == "% No configure replace is waiting for commit"
    assert switch.qos()["ports"]["eth3"]["pfc_enabled"] is True


def test_a_rollback_then_commit_stops_the_timer_on_what_the_rollback_left(tmp_path: Path) -> None:
    switch = switch_with(*ROCE, state_dir=tmp_path)
    before = switch.qos()
    changed = switch.personality.running.clone()
    changed.interfaces["Ethernet1/3"].pfc_mode = "on"
    _file(switch, "new.cfg", "\n".join(render_lines(changed)))

    async def scenario() -> None:
        await run(
            switch.terminal(), "checkpoint cp",
            "configure replace bootflash:new.cfg commit-timeout 30",
            "rollback running-config checkpoint cp", "configure replace commit",
        )  # fmt: skip
        await switch.expire(60)

    asyncio.run(scenario())
    assert switch.qos() == before and switch.personality.rollbacks.pending is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "% No such file or directory: bootflash:new.cfg"),
        ("hostname leaf1\ninterface ethernet 1/1\n  priority-flow-control mode maybe\n",
         "line 3: 'priority-flow-control mode maybe'"),
    ],
)  # fmt: skip
def test_a_configure_replace_that_cannot_be_read_changes_nothing(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    switch = switch_with(*ROCE, state_dir=tmp_path)
    before = switch.qos()
    if content is not None:
        _file(switch, "new.cfg", content)

    async def replaced() -> str:
        return await switch.terminal().execute(
            "configure replace bootflash:new.cfg commit-timeout 30"
        )

    output = asyncio.run(replaced())
    assert expected in output and output.endswith("The running configuration is unchanged.")
    assert switch.qos() == before and switch.personality.rollbacks.pending is None


# ----------------------------------------------------------------------------- startup-config


def test_the_saved_configuration_survives_a_restart(tmp_path: Path) -> None:
    switch = switch_with(*ROCE, "copy running-config startup-config", state_dir=tmp_path)
    saved = switch.personality.running

    async def diff_after_change() -> tuple[str, str]:
        terminal = switch.terminal()
        clean = await terminal.execute("show running-config diff")
        await run(terminal, "configure terminal", "interface ethernet 1/3", "description x", "end")
        return clean, await terminal.execute("show running-config diff")

    clean, dirty = asyncio.run(diff_after_change())
    assert clean == "" and "+   description x" in dirty
    again = NxosSwitch(tmp_path)
    asyncio.run(again.personality.start())
    assert again.personality.running == saved


def test_typing_the_running_config_on_the_cli_builds_the_same_configuration() -> None:
    """What ``show running-config`` prints is what an operator can paste back."""
    switch = switch_with(*ROCE)
    lines = [line for line in render_lines(switch.personality.running) if line]
    typed = NxosSwitch()

    async def retype() -> list[str]:
        await typed.personality.start()
        return await run(typed.terminal(), "configure terminal", *lines, "end")

    outputs = asyncio.run(retype())
    assert not [o for o in outputs if o.startswith("%")], outputs
    assert typed.personality.running == switch.personality.running
    assert typed.qos() == switch.qos()
