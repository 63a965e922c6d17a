"""Every switch of a running lab answers netmiko's arista_eos driver on its recorded port."""

from __future__ import annotations

import json

import pytest

from tests.lab.support import eos
from tests.lab.support.labs import Lab

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel]
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")


@pytest.mark.parametrize("switch", SWITCHES)
def test_switch_management_plane_over_ssh(leafspine_lab: Lab, switch: str) -> None:
    node = leafspine_lab.status["nodes"][switch]
    assert node["mgmt_state"] == "running"
    with eos.connect(leafspine_lab, switch) as connection:
        assert f"Hostname: {switch}" in connection.send_command("show hostname")
        counters = json.loads(connection.send_command("show priority-flow-control counters | json"))
        ports = sorted(counters["interfaceCounters"])
        expected = len(node["interfaces"])
        assert ports == [f"Ethernet{i}" for i in range(1, expected + 1)]
