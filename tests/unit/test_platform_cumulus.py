"""Cumulus Linux NVUE platform: rendered ``nv set`` lines (golden files), JSON parsing, transaction.

No Cumulus lab device exists for this project, so parsing and transaction tests use recorded
device output in NVUE's documented formats (tests/data/platforms/cumulus_nvue/*.source name the
sources) and a scripted fake connection that records the commands it is sent.

Regenerate the golden files after a reviewed renderer change with:
    .venv/bin/python -c "import tests.unit.test_platform_cumulus as t; t.write_goldens()"
then read the diff of tests/data/platforms/cumulus_nvue/*.golden line by line before committing.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from agent.device.platforms.base import ConfigRejected, PlatformError
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from tests.unit.platform_helpers import (
    PROFILES,
    ROOT,
    RecordingConnection,
    single_device_plan,
)

DATA = ROOT / "tests" / "data" / "platforms" / "cumulus_nvue"
PORTS = [("swp1", "100G", 5), ("swp2", "400G", 30)]


def device_plan(profile: str, overrides: str = "") -> DevicePlan:
    return single_device_plan(
        "cumulus_nvue", PORTS, profile, username="cumulus", overrides=overrides
    )


def write_goldens() -> None:
    for profile in PROFILES:
        text = "\n".join(CumulusNvue().render(device_plan(profile))) + "\n"
        (DATA / f"{profile}.golden").write_text(text)


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def state(name: str) -> Any:
    return CumulusNvue.state_from_config(CumulusNvue.config_tree(load(name)))


FakeConnection = functools.partial(
    RecordingConnection, "sw1", refusal_text="Error: Invalid Command: unknown keyword\n"
)


@pytest.mark.parametrize("profile", PROFILES)
def test_render_matches_reviewed_golden(profile: str) -> None:
    rendered = "\n".join(CumulusNvue().render(device_plan(profile))) + "\n"
    assert rendered == (DATA / f"{profile}.golden").read_text(encoding="utf-8")


@pytest.mark.parametrize("profile", PROFILES)
def test_render_overrides_roce_defaults_that_would_leak_into_the_lossless_class(
    profile: str,
) -> None:
    lines = CumulusNvue().render(device_plan(profile))
    assert lines[0].startswith("nv set qos roce mode ")
    assert "nv set qos mapping default-global trust l3" in lines
    assert "nv set qos mapping default-global dscp 26 switch-priority 3" in lines
    zero = next(x for x in lines if x.endswith("switch-priority 0") and " dscp " in x)
    assert "24" in zero.split()[6].split(",") and "26" not in zero.split()[6].split(",")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("overrides: {pfc: {watchdog: {action: forward}}}", "action 'forward'"),
        ("overrides: {pfc: {watchdog: {detection_ms: 250}}}", "not a multiple of polling_ms"),
    ],
)
def test_unrenderable_watchdog_is_refused_clearly(override: str, message: str) -> None:
    with pytest.raises(PlatformError, match=message):
        CumulusNvue().render(device_plan("nvidia-default", override))


def test_correct_config_diffs_to_nothing() -> None:
    platform = CumulusNvue()
    desired = platform.desired(device_plan("nvidia-default"))
    assert diff("sw1", desired, state("nv_config_show_roce.json"), platform.managed) == []


def test_one_wrong_threshold_diffs_to_exactly_that_setting_on_each_port() -> None:
    platform = CumulusNvue()
    desired = platform.desired(device_plan("nvidia-default"))
    found = diff(
        "sw1", desired, state("nv_config_show_roce_wrong_threshold.json"), platform.managed
    )
    # NVUE's ECN profile is switch-wide: the one wrong value shows on every port it applies to.
    assert [(d.interface, d.setting, d.actual) for d in found] == [
        ("swp1", "queue[3].ecn", "15000-1500000@100%"),
        ("swp2", "queue[3].ecn", "15000-1500000@100%"),
    ]


def test_roce_defaults_alone_leave_dscp_24_in_the_lossless_priority() -> None:
    platform = CumulusNvue()
    desired = platform.desired(device_plan("nvidia-default"))
    found = {
        d.setting: d for d in diff("sw1", desired, state("nv_config_show_roce_defaults_only.json"))
    }
    assert found["trust"].actual == "both"
    assert found["dscp_to_priority[24]"].actual == 3
    assert "dscp_to_priority[26]" not in found  # 26 >> 3 == 3 by default


def test_changes_against_defaults_only_touch_what_differs() -> None:
    platform = CumulusNvue()
    desired = platform.desired(device_plan("nvidia-default"))
    lines = platform.render_changes(desired, state("nv_config_show_roce_defaults_only.json"))
    assert "nv set qos mapping default-global trust l3" in lines
    assert not any("switch-priority 3" in x and " dscp " in x for x in lines)  # 26 already 3
    assert platform.render_changes(desired, state("nv_config_show_roce.json")) == []


def test_counters_are_normalized_exactly() -> None:
    names = ("swp1", "swp2")
    counters = CumulusNvue.counters_from_json(
        "sw1",
        1.0,
        state("nv_config_show_roce.json"),
        {n: load(f"nv_show_interface_{n}_counters_qos.json") for n in names},
        {n: load(f"nv_show_interface_{n}_qos_pfc_watchdog.json") for n in names},
    )
    swp1 = counters.interfaces["swp1"]
    assert swp1.pfc_rx == (0, 100, 200, 300, 400, 500, 600, 700)
    assert swp1.pfc_tx == (0, 10, 20, 30, 40, 50, 60, 70)
    assert (swp1.queues[3].tx_packets, swp1.queues[3].tx_bytes) == (1003, 1003000)
    assert swp1.queues[3].dropped_packets == 3
    # port-level ECN marks go to the only ECN-enabled queue
    assert swp1.queues[3].ecn_marked_packets == 4242 and swp1.queues[0].ecn_marked_packets == 0
    assert swp1.headroom_drops == (0, 0, 0, 7, 0, 0, 0, 0)
    assert swp1.watchdog[3].model_dump() == {
        "storms_detected": 2,
        "storms_restored": 1,
        "stormed": True,
    }
    assert counters.interfaces["swp2"].watchdog[3].stormed is False


def test_read_counters_reads_config_then_each_port() -> None:
    replies = {"nv config show -o json": (DATA / "nv_config_show_roce.json").read_text()}
    for name in ("swp1", "swp2"):
        replies[f"nv show interface {name} counters qos -o json"] = (
            DATA / f"nv_show_interface_{name}_counters_qos.json"
        ).read_text()
        replies[f"nv show interface {name} qos pfc-watchdog -o json"] = (
            DATA / f"nv_show_interface_{name}_qos_pfc_watchdog.json"
        ).read_text()
    conn = FakeConnection(replies)
    counters = CumulusNvue().read_counters(conn)
    assert conn.sent[0] == "nv config show -o json"
    assert set(counters.interfaces) == {"swp1", "swp2"}


def test_transaction_happy_path_stages_applies_with_confirm_and_confirms() -> None:
    conn = FakeConnection()
    lines = ["nv set qos roce mode lossless", "nv set qos pfc default-global switch-priority 3"]
    platform = CumulusNvue()
    with platform.transaction(conn, lines, confirm_timeout_s=90) as txn:
        platform.confirm(conn, txn)
    assert conn.sent == [
        *lines,
        "nv config apply --confirm 90s -y",
        "nv config apply --confirm-yes",
        "nv config save",
    ]
    assert txn.confirmed and not txn.rolled_back


def test_refused_line_discards_the_pending_revision() -> None:
    conn = FakeConnection(refuse="nv set qos bogus")
    lines = ["nv set qos roce mode lossless", "nv set qos bogus 1", "nv set qos pfc x"]
    with (
        pytest.raises(ConfigRejected, match="bogus"),
        CumulusNvue().transaction(conn, lines, 60),
    ):
        pytest.fail("the block must not run after a refused line")
    assert conn.sent == ["nv set qos roce mode lossless", "nv set qos bogus 1", "nv config detach"]


def test_leaving_without_confirm_rolls_back() -> None:
    conn = FakeConnection()
    with CumulusNvue().transaction(conn, ["nv set qos roce"], 60) as txn:
        pass
    assert conn.sent[-1] == "nv config apply --confirm-no"
    assert txn.rolled_back and "nv config save" not in conn.sent
