"""A switch that classifies RoCE by UDP port, in the leaf-spine lab, over SSH: ``validate``
names the ports (check RC010), and the data plane shows why it matters.

The switches get the agent's lossless profile, then leaf1, by hand, a QoS policy on its host
ports that puts UDP 4791 in traffic class 1 (lossy): the mistake of a fabric that classifies
RoCE by port. An incast h1, h2 -> h3 on UDP 4791 then rides a lossy class out of leaf1 and
loses packets (PFC never asked), while the same incast on the probes' alternate port (what
they use on RDMA hosts) is classified by DSCP, held by PFC and loses nothing: probes on
another port would measure a class RoCE does not use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.observe.probes import scenarios
from tests.lab.support.eos import configure
from tests.lab.support.labs import Lab, LabFactory, probing_on, requires_lab
from tests.lab.support.labs import run_agent as agent

pytestmark = [pytest.mark.lab, requires_lab]

UDP_POLICY = [
    "ip access-list ROCE-BY-PORT",
    "10 permit udp any any eq 4791",
    "class-map type qos match-any ROCE-BY-PORT",
    "match ip access-group ROCE-BY-PORT",
    "policy-map type quality-of-service HOSTS",
    "class ROCE-BY-PORT",
    "set traffic-class 1",
    "interface Ethernet3-4",
    "service-policy type qos input HOSTS",
]


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("udp")


def incast_on(lab: Lab, udp_port: int) -> dict[str, Any]:
    intent = probing_on(lab.intent(), udp_port)
    return scenarios.incast(intent, "h3", ["h1", "h2"], duration_s=2.0, dcqcn=False)


def test_a_switch_classifying_roce_by_udp_port_is_named_and_misleads_probes(lab: Lab) -> None:
    fabric = lab.status["fabric_file"]
    applied = agent("apply", fabric, "--yes", "--state-dir", lab.state_dir / "agent")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    configure(lab, "leaf1", UDP_POLICY)

    # Only what RC010 needs (the switches' state, then the check): the full validate's
    # probes would take longer and say nothing about classification.
    playbook = lab.state_dir.parent / "rc010.yml"
    playbook.write_text(
        "name: rc010\nsteps:\n  - collect: {counters: false}\n  - checks: {ids: [RC010]}\n"
    )
    checked = agent("validate", fabric, "--playbook", playbook, "--output", "json")
    report = json.loads(checked.stdout)
    rc010 = [r for r in report["checks"] if r["check"] == "RC010"]
    failed = {r["device"]: r for r in rc010 if r["status"] == "failure"}
    assert checked.returncode == 1
    assert sorted(failed) == ["leaf1"], rc010
    messages = failed["leaf1"]["messages"]
    for port in ("Ethernet3", "Ethernet4"):
        assert (
            f"{port} classification: Expected: by DSCP only Actual: policy-map HOSTS class "
            "ROCE-BY-PORT (set traffic-class 1): ip access-list ROCE-BY-PORT "
            "'10 permit udp any any eq 4791'"
        ) in messages
    assert all(r["status"] == "success" for r in rc010 if r["device"] != "leaf1")

    by_port = incast_on(lab, 4791)  # RoCE's own port: traffic class 1 at leaf1, lossy
    assert by_port["totals"]["lost"] > 0 and not by_port["passed"]
    assert by_port["totals"]["pfc_frames_received"] == 0  # nothing held it
    by_dscp = incast_on(lab, 54791)  # another port: DSCP 26 -> class 3, lossless
    assert by_dscp["transport"]["udp_port"] == 54791
    assert by_dscp["totals"]["lost"] == 0, by_dscp["failures"]
    assert by_dscp["totals"]["pfc_frames_received"] > 0  # PFC held the incast
