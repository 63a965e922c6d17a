"""Every check, table-driven: success, failure (with its Expected/Actual message), skipped."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.device.state import (
    Counters,
    EcnState,
    InterfaceCounters,
    PendingSession,
    QueueCounters,
    QueueState,
    WatchdogCounters,
    WatchdogState,
    desired_state,
)
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.observe.checks import CATALOG, HOST_CHECK_IDS, Collected, DeviceData

ROOT = Path(__file__).resolve().parents[2]
FABRIC = ROOT / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"


def healthy() -> Collected:
    """Every switch exactly as planned, quiet counters, one passing probe."""
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    intent = load_fabric(FABRIC).intent
    plan = build_plan(intent)
    collected = Collected(intent, plan)
    for device in intent.devices:
        device_plan = plan.device(device.name)
        assert device_plan is not None
        data = DeviceData(device, device_plan)
        if device.role != "host":
            data.state = desired_state(device_plan)
            data.sessions = []
            interfaces = {
                port.name: InterfaceCounters(
                    queues={q: QueueCounters(tx_packets=100) for q in range(8)},
                    watchdog={3: WatchdogCounters()},
                )
                for port in device_plan.ports
            }
            data.previous = Counters(device=device.name, collected_at=100.0, interfaces=interfaces)
            data.counters = Counters(device=device.name, collected_at=110.0, interfaces=interfaces)
        collected.devices[device.name] = data
    collected.probes.append(
        {"scenario": "incast", "passed": True, "failures": [], "totals": {"lost": 0}}
    )
    return collected


def with_state(name: str, change: Callable[[Any], Any]) -> Callable[[Collected], None]:
    def mutate(collected: Collected) -> None:
        data = collected.devices[name]
        assert data.state is not None
        data.state = change(data.state)

    return mutate


def interface_change(name: str, port: str, **fields: Any) -> Callable[[Collected], None]:
    def change(state: Any) -> Any:
        interfaces = dict(state.interfaces)
        interfaces[port] = interfaces[port].model_copy(update=fields)
        return state.model_copy(update={"interfaces": interfaces})

    return with_state(name, change)


def queue_change(name: str, port: str, queue: int, **fields: Any) -> Callable[[Collected], None]:
    def change(state: Any) -> Any:
        interfaces = dict(state.interfaces)
        queues = dict(interfaces[port].queues)
        queues[queue] = queues.get(queue, QueueState()).model_copy(update=fields)
        interfaces[port] = interfaces[port].model_copy(update={"queues": queues})
        return state.model_copy(update={"interfaces": interfaces})

    return with_state(name, change)


def dscp_change(name: str, dscp: int, priority: int) -> Callable[[Collected], None]:
    def change(state: Any) -> Any:
        return state.model_copy(
            update={"dscp_to_priority": {**state.dscp_to_priority, dscp: priority}}
        )

    return with_state(name, change)


def counters_change(name: str, port: str, **fields: Any) -> Callable[[Collected], None]:
    def mutate(collected: Collected) -> None:
        data = collected.devices[name]
        assert data.counters is not None
        interfaces = dict(data.counters.interfaces)
        interfaces[port] = interfaces[port].model_copy(update=fields)
        data.counters = data.counters.model_copy(update={"interfaces": interfaces})

    return mutate


def no_state(name: str) -> Callable[[Collected], None]:
    def mutate(collected: Collected) -> None:
        collected.devices[name].state = None
        collected.devices[name].counters = None
        collected.devices[name].sessions = None
        collected.devices[name].error = f"{name}: cannot connect"

    return mutate


def pending_session(name: str, **fields: Any) -> Callable[[Collected], None]:
    def mutate(collected: Collected) -> None:
        collected.devices[name].sessions = [
            PendingSession(
                device=name, name="roce-agent-20260101-000000-001", kind="EOS session", **fields
            )
        ]

    return mutate


def every_switch(
    change: Callable[[str], Callable[[Collected], None]],
) -> Callable[[Collected], None]:
    def mutate(collected: Collected) -> None:
        for name in ("spine1", "spine2", "leaf1", "leaf2"):
            change(name)(collected)

    return mutate


def drops(collected: Collected) -> None:
    counters_change(
        "leaf1",
        "Ethernet1",
        queues={q: QueueCounters(dropped_packets=5 if q == 3 else 0) for q in range(8)},
    )(collected)


def storm(collected: Collected) -> None:
    counters_change(
        "leaf2", "Ethernet3", watchdog={3: WatchdogCounters(storms_detected=1, stormed=True)}
    )(collected)


def pauses(collected: Collected) -> None:
    counters_change("spine1", "Ethernet1", pfc_rx=(0, 0, 0, 50_000, 0, 0, 0, 0))(collected)


def storm_restored(collected: Collected) -> None:
    counters_change(
        "leaf2", "Ethernet3", watchdog={3: WatchdogCounters(storms_detected=1, storms_restored=1)}
    )(collected)


def failed_probe(collected: Collected) -> None:
    collected.probes = [
        {
            "scenario": "incast",
            "passed": False,
            "failures": ["12 packets lost on the lossless class"],
        }
    ]


def no_probes(collected: Collected) -> None:
    collected.probes = []


def no_previous(collected: Collected) -> None:
    for data in collected.devices.values():
        data.previous = None


def thin_headroom(collected: Collected) -> None:
    plan = collected.devices["leaf1"].plan
    port = plan.ports[0]
    shrunk = {p: h.model_copy(update={"xoff": 512}) for p, h in port.headroom.items()}
    ports = [port.model_copy(update={"headroom": shrunk}), *plan.ports[1:]]
    collected.devices["leaf1"].plan = plan.model_copy(update={"ports": ports})


# check id → (failure mutation, words of the failure message, skipped mutation or None)
CASES: dict[str, tuple[Callable[[Collected], None], str, Callable[[Collected], None] | None]] = {
    "RC001": (
        every_switch(lambda n: interface_change(n, "Ethernet1", pfc_priorities=())),
        "spine1 RoCE mode: Expected: lossless Actual: lossy",
        every_switch(no_state),
    ),
    "RC002": (
        dscp_change("leaf2", 26, 1),
        "RoCE DSCP 26 → priority: Expected: 3 Actual: 1",
        no_state("leaf2"),
    ),
    "RC003": (
        interface_change("leaf1", "Ethernet3", pfc_priorities=(3, 4)),
        "Ethernet3 PFC priorities: Expected: [3] Actual: [3, 4]",
        no_state("leaf1"),
    ),
    "RC004": (
        queue_change(
            "leaf2",
            "Ethernet3",
            3,
            ecn=EcnState(min_bytes=6000, max_bytes=40000, max_probability=100),
        ),
        "Ethernet3 queue 3 ECN max below pause threshold: Expected: < 30KB Actual: 40KB",
        no_state("leaf2"),
    ),
    "RC005": (
        queue_change("spine2", "Ethernet2", 6, strict=False),
        "Ethernet2 CNP queue 6: Expected: strict Actual: not strict",
        no_state("spine2"),
    ),
    "RC006": (
        with_state("leaf1", lambda s: s.model_copy(update={"watchdog": WatchdogState()})),
        "PFC watchdog: Expected: enabled Actual: disabled",
        no_state("leaf1"),
    ),
    "RC007": (thin_headroom, "priority 3 headroom xoff: Expected: >= ", None),
    "RC008": (
        queue_change("leaf2", "Ethernet3", 3, bandwidth_percent=30),
        "Ethernet3 queue[3].bandwidth_percent: Expected: 50 Actual: 30",
        no_state("leaf2"),
    ),
    "RC009": (
        pending_session(
            "leaf1",
            state="pendingCommitTimer",
            user="admin",
            age_s=42.0,
            rollback_in_s=258.0,
            live=True,
        ),
        "pending change: Expected: none Actual: EOS session 'roce-agent-20260101-000000-001' "
        "(pendingCommitTimer, user admin, age 42s, rolls back in 258s)",
        no_state("leaf1"),
    ),
    "RC010": (
        interface_change(
            "leaf1",
            "Ethernet2",
            udp_port_classifiers=(
                "policy-map ROCE class ROCE (set traffic-class 3): "
                "ip access-list ROCE '10 permit udp any any eq 4791'",
            ),
        ),
        "Ethernet2 classification: Expected: by DSCP only Actual: policy-map ROCE class ROCE "
        "(set traffic-class 3): ip access-list ROCE '10 permit udp any any eq 4791'",
        no_state("leaf1"),
    ),
    "RC101": (drops, "Ethernet1 priority 3 drops: Expected: <= 0 Actual: 5", no_state("leaf1")),
    "RC102": (
        pauses,
        "Ethernet1 priority 3 PFC rx: Expected: <= 1000/s Actual: 5000.0/s",
        no_previous,
    ),
    "RC103": (
        storm,
        "Ethernet3 queue 3 watchdog: Expected: operational Actual: stormed",
        no_state("leaf2"),
    ),
    "RC104": (storm, "storms restored: Expected: 1 Actual: 0", no_previous),
    "RC301": (failed_probe, "incast: 12 packets lost on the lossless class", no_probes),
}


def test_every_check_has_a_case_and_a_docstring() -> None:
    assert set(CASES) | {"RC201", *HOST_CHECK_IDS} == set(CATALOG)  # hosts: test_host_checks
    for cls in CATALOG.values():
        assert cls.description(), cls


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_success(check_id: str) -> None:
    collected = healthy()
    if check_id == "RC104":  # a drill passes only when a storm happened and was restored
        storm_restored(collected)
    results = CATALOG[check_id]().run(collected)
    assert results and {r.status for r in results} == {"success"}, [r.messages for r in results]


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_failure(check_id: str) -> None:
    collected = healthy()
    mutate, words, _ = CASES[check_id]
    mutate(collected)
    results = CATALOG[check_id]().run(collected)
    failed = [r for r in results if r.status == "failure"]
    assert failed, [(r.device, r.status) for r in results]
    messages = [m for r in failed for m in r.messages]
    assert any(words in m for m in messages), messages
    assert all("Expected" in m or ":" in m for m in messages)


# RC301 judges the probe results, and the checks that do not read devices judge the plan.
SWITCH_READING = sorted(k for k in set(CASES) - {"RC301"} if CATALOG[k].reads_devices)


@pytest.mark.parametrize("check_id", SWITCH_READING)
def test_a_switch_not_read_is_unverified_with_its_cause(check_id: str) -> None:
    """Issue #41: a check about a switch that could not be read is neither a pass nor
    "does not apply": unverified, naming why the switch was not read."""
    collected = healthy()
    no_state("leaf1")(collected)
    results = CATALOG[check_id]().run(collected)
    unverified = [r for r in results if r.status == "unverified"]
    assert unverified and "failure" not in {r.status for r in results}
    assert all(any("cannot connect" in m for m in r.messages) for r in unverified), unverified


@pytest.mark.parametrize("check_id", sorted(k for k, v in CASES.items() if v[2] is not None))
def test_data_this_run_did_not_collect_is_skipped(check_id: str) -> None:
    """Nothing failed, the run only did not collect what the check needs: skipped."""
    collected = healthy()
    for data in collected.switches():
        data.state = data.counters = data.previous = data.sessions = None
    collected.probes = []
    results = CATALOG[check_id]().run(collected)
    assert {r.status for r in results} == {"skipped"}, [(r.device, r.status) for r in results]


def test_host_nic_check_skips_lab_hosts_without_a_nic() -> None:
    results = CATALOG["RC201"]().run(healthy())
    assert {r.status for r in results} == {"skipped"} and len(results) == 4


def test_check_inputs_are_validated() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        CATALOG["RC006"]({"min_detection_ms": 0})
    with pytest.raises(ValidationError):
        CATALOG["RC006"]({"unknown": 1})


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"state": "pending", "user": "ops"}, "(pending, user ops)"),
        ({"state": "pending", "age_s": 90000.0}, "(pending, age 90000s)"),
        (
            {"state": "pendingCommitTimer", "live": True, "rollback_in_s": 5.0},
            "(pendingCommitTimer, rolls back in 5s)",
        ),
        (
            {"state": "checkpoint", "live": True, "rolls_back": False},
            "(checkpoint, never rolls back by itself)",
        ),
        ({"state": "pendingCommitTimer", "live": True}, "rolls back by itself, time unknown"),
    ],
)
def test_pending_sessions_each_kind_is_named(fields: dict[str, Any], words: str) -> None:
    collected = healthy()
    pending_session("spine1", **fields)(collected)
    results = {r.device: r for r in CATALOG["RC009"]().run(collected)}
    assert results["spine1"].status == "failure"
    assert words in results["spine1"].messages[0]
    assert {results[n].status for n in ("spine2", "leaf1", "leaf2")} == {"success"}
