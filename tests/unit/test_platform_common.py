"""The readers every NOS module shares (agent/device/platforms/_common.py), each with one
behaviour on bad input: a PlatformError saying what was read, never an empty stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from agent.device.platforms import PLATFORMS, platform_for
from agent.device.platforms._common import SwitchWide, expand_ranges, parse_json, show_json
from agent.device.platforms.base import PlatformError
from agent.errors import AgentError
from tests.unit.platform_helpers import RecordingConnection


@pytest.mark.parametrize(
    ("output", "shape", "expected"),
    [
        ('{"a": 1}', dict, {"a": 1}),
        ("[1, 2]", list, [1, 2]),
        ('[{"set": {}}]', object, [{"set": {}}]),
        ('{"a": 1}', object, {"a": 1}),
        ("  {}\n", dict, {}),
    ],
)
def test_json_replies_of_the_expected_shape(output: str, shape: type[Any], expected: Any) -> None:
    assert parse_json("leaf1", "show x | json", output, shape) == expected


@pytest.mark.parametrize(
    ("output", "shape", "message"),
    [
        ("% Invalid input", dict, "leaf1: 'show x | json' did not return JSON: % Invalid input"),
        ("", dict, "leaf1: 'show x | json' did not return JSON: "),
        ("[]", dict, "leaf1: 'show x | json' returned list; Expected: a JSON object"),
        ("null", dict, "leaf1: 'show x | json' returned NoneType; Expected: a JSON object"),
        ('"text"', dict, "leaf1: 'show x | json' returned str; Expected: a JSON object"),
        ("{}", list, "leaf1: 'show x | json' returned dict; Expected: a JSON array"),
        ("{", object, "leaf1: 'show x | json' did not return JSON: {"),
    ],
)
def test_bad_json_replies_name_device_and_command(
    output: str, shape: type[Any], message: str
) -> None:
    with pytest.raises(PlatformError) as raised:
        parse_json("leaf1", "show x | json", output, shape)
    assert str(raised.value) == message


def test_show_json_reads_an_object_by_default() -> None:
    conn = RecordingConnection("leaf1", {"show a": '{"ok": true}', "show b": "[1]"})
    assert show_json(conn, "show a") == {"ok": True}
    assert show_json(conn, "show b", list) == [1]
    with pytest.raises(PlatformError, match="leaf1: 'show b' returned list"):
        show_json(conn, "show b")
    assert conn.sent == ["show a", "show b", "show b"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3", [3]),
        ("3,4", [3, 4]),
        ("3-4", [3, 4]),
        ("0-2,5", [0, 1, 2, 5]),
        ("24, 26", [24, 26]),
        ("3,", [3]),
        ("", []),
        ("5-5", [5]),
    ],
)
def test_ranges_expand(text: str, expected: list[int]) -> None:
    assert expand_ranges(text, "QUEUE key") == expected


@pytest.mark.parametrize("text", ["x", "3-", "-3", "4-3", "3;4", "1.5", "3-4-5", "af41"])
def test_bad_ranges_are_an_error_naming_what_was_read(text: str) -> None:
    with pytest.raises(PlatformError) as raised:
        expand_ranges(text, "PORT_QOS_MAP pfc_enable")
    assert str(raised.value) == (
        f"PORT_QOS_MAP pfc_enable: Expected: numbers or ranges such as 3,4 or 0-2 Actual: {text!r}"
    )


POLICIES = SwitchWide("cisco_nxos", "switch-wide MQC policies")


@pytest.mark.parametrize(
    ("values", "empty", "expected"),
    [
        ([(3,), (3,), (3,)], (), (3,)),
        ([(3, 4)], (), (3, 4)),
        ([], (), ()),
        ([], {}, {}),
    ],
)
def test_a_switch_wide_value_is_the_one_every_port_has(
    values: list[Any], empty: Any, expected: Any
) -> None:
    assert POLICIES.uniform(values, "PFC priorities", empty) == expected


def test_ports_that_differ_on_a_switch_wide_value_are_refused() -> None:
    with pytest.raises(PlatformError) as raised:
        POLICIES.uniform([(3,), (3, 4)], "PFC priorities", ())
    assert str(raised.value) == (
        "cisco_nxos: ports need different PFC priorities; this renderer configures switch-wide "
        "MQC policies (set explicit thresholds in the profile)"
    )


def test_the_platform_registry_builds_each_platform_by_its_name() -> None:
    for name in PLATFORMS:
        assert platform_for(name).name == name


def test_an_unknown_platform_names_the_supported_ones() -> None:
    with pytest.raises(AgentError) as raised:
        platform_for("junos")
    assert str(raised.value) == (
        "unsupported platform 'junos' "
        "(supported: arista_eos, sonic, cumulus_nvue, cisco_nxos, linux_host)"
    )
