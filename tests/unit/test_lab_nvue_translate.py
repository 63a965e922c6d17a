"""NVUE tree -> data plane: what each applied configuration makes the (fake) data plane run.

The expected values are NVIDIA's documented defaults (Cumulus Linux 5.14 user guide, RoCE
page "Default RoCE Configuration" and QoS page) and the explicit settings on top of them; see
lab/mgmt/nvue/translate.py for the sources.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.unit.lab_nvue_support import NvueSwitch, run

ROCE_QUEUES: dict[str, dict[str, Any]] = {
    "0": {"ecn": {"min_bytes": 150000, "max_bytes": 1500000, "max_probability": 100},
          "strict": False, "bandwidth_percent": 50},
    "3": {"ecn": {"min_bytes": 150000, "max_bytes": 1500000, "max_probability": 100},
          "strict": False, "bandwidth_percent": 50},
    "6": {"ecn": None, "strict": True, "bandwidth_percent": None},
}  # fmt: skip


def applied(*lines: str) -> tuple[dict[str, Any], str]:
    """The data plane's QoS after ``lines`` and ``nv config apply -y``, and apply's output."""

    async def test() -> tuple[dict[str, Any], str]:
        switch = NvueSwitch()
        await switch.personality.start()
        outputs = await run(switch.terminal(), *lines, "nv config apply -y")
        for line, output in zip(lines, outputs, strict=False):
            assert output == "", f"{line!r}: {output}"
        return switch.qos(), outputs[-1]

    return asyncio.run(test())


def classes(qos: dict[str, Any]) -> dict[int, int]:
    """DSCP -> traffic class for the DSCPs RoCE cares about."""
    return {d: qos["dscp_to_tc"][str(d)] for d in (0, 24, 26, 32, 46, 48)}


@pytest.mark.parametrize(
    ("lines", "dscp", "no_drop", "trust"),
    [
        # factory: trust l2 (PCP); DSCP map dscp >> 3 through SP -> TC identity
        ((), {0: 0, 24: 3, 26: 3, 32: 4, 46: 5, 48: 6}, [], "cos"),
        # RoCE lossless: every priority but 3 and 6 to TC 0, PFC on priority 3
        (("nv set qos roce",), {0: 0, 24: 3, 26: 3, 32: 0, 46: 0, 48: 6}, [3], None),
        (("nv set qos roce mode lossy",), {0: 0, 24: 3, 26: 3, 32: 0, 46: 0, 48: 6}, [], None),
        (("nv set qos roce mode lossless-single-ipool",), {0: 0, 24: 3, 26: 3, 32: 0, 46: 0,
                                                           48: 6}, [3], None),
        # the guide's "change the RoCE lossless switch priority from 3 to 2"
        (("nv set qos roce",
          "nv set qos pfc default-global switch-priority 2",
          "nv set qos egress-queue-mapping default-global switch-priority 2 traffic-class 3",
          "nv set qos egress-queue-mapping default-global switch-priority 3 traffic-class 0",
          "nv set qos mapping default-global trust both",
          "nv set qos mapping default-global dscp 26 switch-priority 2"),
         {0: 0, 24: 0, 26: 3, 32: 0, 46: 0, 48: 6}, [3], None),
        # PFC needs both directions in the lab's data plane
        (("nv set qos roce", "nv set qos pfc default-global rx disable"),
         {0: 0, 24: 3, 26: 3, 32: 0, 46: 0, 48: 6}, [], None),
        (("nv set qos roce", "nv set qos mapping default-global trust port"),
         {0: 0, 24: 3, 26: 3, 32: 0, 46: 0, 48: 6}, [3], None),
    ],
)  # fmt: skip
def test_classification_and_lossless_classes(
    lines: tuple[str, ...], dscp: dict[int, int], no_drop: list[int], trust: str | None
) -> None:
    qos, _ = applied(*lines)
    assert classes(qos) == dscp
    assert qos["ports"]["eth1"]["pfc_priorities"] == no_drop
    assert qos["ports"]["eth1"]["pfc_enabled"] is bool(no_drop)
    assert qos["ports"]["eth1"].get("trust") == trust
    assert qos["trust"] == ("none" if "trust port" in " ".join(lines) else "dscp")


def test_roce_defaults_schedule_and_mark_as_documented() -> None:
    qos, output = applied("nv set qos roce")
    assert output == "applied [rev_id: 2]"
    assert qos["ports"]["eth2"]["queues"] == ROCE_QUEUES


def test_factory_scheduling_is_twelve_and_thirteen_percent_with_ecn_on_queue_zero() -> None:
    qos, _ = applied()
    queues = qos["ports"]["eth1"]["queues"]
    assert [queues[str(tc)]["bandwidth_percent"] for tc in range(8)] == [12, 13] * 4
    assert [tc for tc in range(8) if queues[str(tc)]["ecn"]] == [0]


@pytest.mark.parametrize(
    ("lines", "queue", "expected"),
    [
        (("nv set qos congestion-control default-global traffic-class 3 min-threshold 40000",
          "nv set qos congestion-control default-global traffic-class 3 max-threshold 200000",
          "nv set qos congestion-control default-global traffic-class 3 probability 10"),
         "3", {"ecn": {"min_bytes": 40000, "max_bytes": 200000, "max_probability": 10},
               "strict": False, "bandwidth_percent": 50}),
        (("nv set qos congestion-control default-global traffic-class 0 ecn disable",),
         "0", {"ecn": None, "strict": False, "bandwidth_percent": 50}),
        (("nv set qos egress-scheduler default-global traffic-class 3 mode strict",),
         "3", {"ecn": ROCE_QUEUES["3"]["ecn"], "strict": True, "bandwidth_percent": None}),
        (("nv set qos egress-scheduler default-global traffic-class 0 bw-percent 30",),
         "0", {**ROCE_QUEUES["0"], "bandwidth_percent": 30}),
    ],
)  # fmt: skip
def test_explicit_settings_override_the_roce_defaults(
    lines: tuple[str, ...], queue: str, expected: dict[str, Any]
) -> None:
    qos, _ = applied("nv set qos roce", *lines)
    assert qos["ports"]["eth1"]["queues"][queue] == expected


def test_the_watchdog_runs_on_the_ports_that_enable_it() -> None:
    qos, _ = applied(
        "nv set qos roce",
        "nv set qos pfc-watchdog polling-interval 200",
        "nv set qos pfc-watchdog robustness 5",
        "nv set interface swp1 qos pfc-watchdog",
    )
    assert qos["ports"]["eth1"]["watchdog"] == {
        "enabled": True,
        "detection_ms": 1000,  # polling interval x robustness
        "restoration_ms": 200,  # restores after a polling interval without pause frames
        "polling_ms": 200,
        "action": "drop",
    }
    assert qos["ports"]["eth2"]["watchdog"]["enabled"] is False


def test_a_watchdog_state_disable_turns_it_off() -> None:
    qos, _ = applied(
        "nv set qos roce",
        "nv set interface swp1-2 qos pfc-watchdog",
        "nv set interface swp1 qos pfc-watchdog state disable",
    )
    assert (
        qos["ports"]["eth1"]["watchdog"] is None or not qos["ports"]["eth1"]["watchdog"]["enabled"]
    )
    assert qos["ports"]["eth2"]["watchdog"]["enabled"] is True


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (("nv set qos egress-scheduler default-global traffic-class 1,2 bw-percent 30",),
         "Error: Invalid config: qos egress-scheduler default-global: the bw-percent of the "
         "dwrr traffic classes adds up to 160, more than 100"),
        (("nv set qos congestion-control default-global traffic-class 3 min-threshold 900000",
          "nv set qos congestion-control default-global traffic-class 3 max-threshold 1000"),
         "Error: Invalid config: qos congestion-control default-global traffic-class 3: "
         "min-threshold 900000 is above max-threshold 1000"),
    ],
)  # fmt: skip
def test_nvue_refuses_what_its_guide_forbids_and_nothing_changes(
    lines: tuple[str, ...], message: str
) -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply -y")
        before = switch.qos()
        outputs = await run(terminal, *lines, "nv config apply -y")
        assert outputs[-1] == message
        assert switch.qos() == before

    asyncio.run(test())


def test_a_data_plane_refusal_is_reported_and_the_revision_stays_pending() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        switch.dataplane.fail_next_set_qos = "queue memory exhausted"
        outputs = await run(terminal, "nv set qos roce", "nv config apply -y")
        assert outputs[-1] == (
            "Error: Invalid config: Data plane refused the change: queue memory exhausted"
        )
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == []
        assert json.loads(await terminal.execute("nv config diff -o json")) == [
            {"set": {"qos": {"roce": {"enable": "on"}}}}
        ]
        assert await terminal.execute("nv config apply -y") == "applied [rev_id: 2]"

    asyncio.run(test())


def test_qos_counters_are_the_data_planes() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        queue = {"tx_packets": 5, "tx_bytes": 500, "tail_drops": 2, "ecn_marked": 3,
                 "watchdog": {"dropped_packets": 1, "state": "operational"}}  # fmt: skip
        switch.dataplane.counters_snapshot = {
            "ports": {
                "eth2": {
                    "pfc": {"rx_xoff": [1] * 8, "rx_xon": [2] * 8,
                            "tx_xoff": [0, 0, 0, 9, 0, 0, 0, 0], "tx_xon": [0, 0, 0, 1] + [0] * 4},
                    "ingress": {"headroom_drops": [0, 0, 0, 6, 0, 0, 0, 0]},
                    "queues": {str(tc): queue for tc in range(8)},
                }
            }
        }  # fmt: skip
        terminal = switch.terminal()
        data = json.loads(await terminal.execute("nv show interface swp2 counters qos -o json"))
        assert data["pfc-stats"]["3"]["rx-pause-frames"] == 3
        assert data["pfc-stats"]["3"]["tx-pause-frames"] == 10
        assert data["egress-queue-stats"]["3"]["tx-uc-buffer-discards"] == 3
        assert data["ingress-buffer-stats"]["3"]["rx-buffer-discards"] == 6
        assert data["port-stats"]["tx-stats"]["ecn-marked-packets"] == 24
        missing = await terminal.execute("nv show interface swp7 counters qos -o json")
        assert missing == "Error: The requested item does not exist: interface swp7"

    asyncio.run(test())
