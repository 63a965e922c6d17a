"""``roce-agent discover`` against the leaf-spine lab: the switches are read over SSH (LLDP
neighbours, speeds, MTUs from the EOS personality) and the skeleton's links, speeds and MTUs
must be the lab's own fabric file's (which ``lab up`` wrote from the same topology)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.intent.units import parse_speed
from tests.lab.support.labs import PASSWORD_ENV, Lab, run_agent

Links = dict[frozenset[str], tuple[int, int]]


def _lab_links(fabric: dict[str, Any]) -> Links:
    """Every link of the lab's fabric file seen from its switch ends (hosts' ends repeat them)."""
    links: Links = {}
    for device in fabric["devices"]:
        if device["platform"] == "linux_host":
            continue
        for port in device["ports"]:
            ends = frozenset({f"{device['name']}:{port['name']}", port["peer"]})
            links[ends] = (parse_speed(port["speed"]), int(port["mtu"]))
    return links


def _skeleton_links(skeleton: dict[str, Any]) -> Links:
    """Each declared port with ``defaults.ports`` filled in (what the loader resolves)."""
    defaults = skeleton.get("defaults", {}).get("ports", {})
    links: Links = {}
    for device in skeleton["devices"]:
        for port in device.get("ports", []):
            ends = frozenset({f"{device['name']}:{port['name']}", port["peer"]})
            speed = port.get("speed", defaults.get("speed"))
            mtu = port.get("mtu", defaults.get("mtu"))
            assert ends not in links, f"link declared twice: {sorted(ends)}"
            links[ends] = (parse_speed(speed), int(mtu))
    return links


def test_discover_reads_the_lab_back_into_its_fabric(leafspine_lab: Lab, tmp_path: Path) -> None:
    fabric_file = Path(leafspine_lab.status["fabric_file"])
    fabric = yaml.safe_load(fabric_file.read_text())

    result = run_agent("discover", fabric_file, "-o", "json", timeout=120)

    assert result.returncode == 0, result.stderr
    skeleton = json.loads(result.stdout)
    assert _skeleton_links(skeleton) == _lab_links(fabric)
    roles = {d["name"]: d["role"] for d in skeleton["devices"]}
    assert roles == {d["name"]: d["role"] for d in fabric["devices"]}
    platforms = {d["name"]: d["platform"] for d in skeleton["devices"]}
    assert platforms == {d["name"]: d["platform"] for d in fabric["devices"]}
    assert "cable_m" not in result.stdout  # never guessed
    assert "warning" not in result.stderr  # every LLDP table agrees with its neighbour's

    # --write: a YAML file with the note about cable_m, refused the second time.
    target = tmp_path / "discovered.yml"
    written = run_agent("discover", fabric_file, "--write", target, "--cable-m", "2")
    assert written.returncode == 0, written.stderr
    assert yaml.safe_load(target.read_text())["defaults"]["ports"]["cable_m"] == 2
    again = run_agent("discover", fabric_file, "--write", target)
    assert again.returncode == 2
    assert "--write" in again.stderr


def test_discovered_skeleton_loads_to_the_labs_ports(leafspine_lab: Lab, tmp_path: Path) -> None:
    """Loaded, the skeleton (links once, defaults.ports, hosts without ports) has every port
    of the lab's fabric on both ends with the same peer, speed and MTU; without a cable
    length it does not load at all. Needs the compact fabric format's loader (#29)."""
    fabric_file = Path(leafspine_lab.status["fabric_file"])
    skeleton = tmp_path / "discovered.yml"
    assert run_agent("discover", fabric_file, "--write", skeleton, "--cable-m", "2").returncode == 0
    os.environ.setdefault(PASSWORD_ENV, "admin")

    def ports(path: Path) -> set[tuple[str, str, str | None, int, int]]:
        intent = load_fabric(path).intent
        return {(d.name, p.name, p.peer, p.speed, p.mtu) for d in intent.devices for p in d.ports}

    assert ports(skeleton) == ports(fabric_file)

    no_cable = tmp_path / "no-cable.yml"
    assert run_agent("discover", fabric_file, "--write", no_cable).returncode == 0
    with pytest.raises(IntentError, match=r"cable_m: required: PFC headroom"):
        load_fabric(no_cable)
