"""``roce-agent exporter --telemetry gnmi`` on the live mixed-NOS lab (issue #45): every switch
whose NOS streams is read over gNMI with the SSH path's metric names, the Nexus (no gNMI in the
agent) reads down with reason ``unsupported``, and a PFC storm shows in /metrics within 2 s at
1 s sampling -- the pause rate, and, once the lab is lossless and traffic is queued behind the
storm, the watchdog's stormed state.

One lab of ``containerlab/roce-leafspine-mixed.clab.yml`` (EOS spine1, NX-OS spine2, SONiC
leaf1, Cumulus leaf2). The exporter runs as a user runs it, a subprocess on a loopback port.
Storms come from the lab's ``storm`` fault (a process in the host's namespace sending PFC XOFF
on the RoCE priority), removed by the fault's id.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.lab.support.labs import (
    REPO,
    Lab,
    LabFactory,
    apply_fabric,
    exporter_serving,
    host_storming,
    requires_lab,
)

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
STREAMING = ("spine1", "leaf1", "leaf2")
DETECTION_BUDGET_S = 2.0
_SERIES = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("gx", MIXED, password="admin")


@contextmanager
def exporter(fabric: str | Path, *options: str) -> Iterator[str]:
    """``roce-agent exporter FABRIC --telemetry gnmi --interval 1s``; its /metrics URL."""
    with exporter_serving(
        fabric, "--telemetry", "gnmi", "--no-drift", *options, interval="1s"
    ) as url:
        yield url


def scrape(url: str) -> dict[str, float]:
    """Every series as ``name{label="v",...}`` (labels sorted, fabric dropped) -> value."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    series = {}
    for line in text.splitlines():
        match = _SERIES.match(line)
        if match:
            labels = ",".join(
                sorted(p for p in match.group(2).split(",") if not p.startswith("fabric="))
            )
            series[f"{match.group(1)}{{{labels}}}"] = float(match.group(3))
    return series


def wait_for(url: str, ready: Callable[[dict[str, float]], bool], timeout_s: float) -> float:
    """Scrape every 0.1 s until ``ready``; the seconds it took (the timeout fails the test)."""
    started = time.monotonic()
    while True:
        if ready(scrape(url)):
            return time.monotonic() - started
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s"
        time.sleep(0.1)


def up(device: str) -> str:
    return f'roce_device_up{{device="{device}"}}'


def pause_rx(device: str, interface: str) -> str:
    return (
        f'roce_pfc_frames_total{{device="{device}",direction="rx",interface="{interface}",'
        'priority="3"}'
    )


def stormed(device: str, interface: str) -> str:
    return f'roce_pfc_watchdog_stormed{{device="{device}",interface="{interface}",priority="3"}}'


def all_streaming(series: dict[str, float]) -> bool:
    return all(series.get(up(name)) == 1 for name in STREAMING)


def test_every_streaming_switch_is_read_over_gnmi(lab: Lab) -> None:
    with exporter(lab.status["fabric_file"], "--no-ssh-complement") as url:
        wait_for(url, all_streaming, 60)
        series = scrape(url)
        wait_for(url, lambda s: s.get('roce_device_state{device="spine2",state="unsupported"}')
                 == 1, 10)  # fmt: skip
    for name in STREAMING:
        assert series[f'roce_device_telemetry_info{{device="{name}",transport="gnmi"}}'] == 1
        for family in ("roce_pfc_frames_total", "roce_queue_transmitted_packets_total",
                       "roce_queue_ecn_marked_packets_total"):  # fmt: skip
            assert any(k.startswith(f'{family}{{device="{name}"') for k in series), (family, name)
    # Published by neither Cumulus nor (per priority) SONiC/EOS over gNMI: absent, not 0.
    assert not any(
        k.startswith('roce_headroom_dropped_packets_total{device="leaf2"') for k in series
    )
    assert not any(k.startswith('roce_pfc_watchdog_stormed{device="leaf2"') for k in series)
    assert not any(k.startswith('roce_pfc_frames_total{device="spine2"') for k in series)


def watchdog_of(device: str) -> Callable[[dict[str, float]], bool]:
    return lambda series: any(k.startswith(f'roce_pfc_watchdog_stormed{{device="{device}"')
                              for k in series)  # fmt: skip


def headroom_of(device: str) -> Callable[[dict[str, float]], bool]:
    prefix = f'roce_headroom_dropped_packets_total{{device="{device}"'
    return lambda series: any(k.startswith(prefix) for k in series)


def test_what_a_stream_lacks_is_read_over_ssh(lab: Lab) -> None:
    """By default the families a NOS does not stream (Cumulus: the watchdog; every NOS:
    headroom drops) are read over SSH at the configuration read's pace (15 s at most)."""
    with exporter(lab.status["fabric_file"]) as url:
        wait_for(url, all_streaming, 60)
        wait_for(url, watchdog_of("leaf2"), 40)
        for name in STREAMING:
            wait_for(url, headroom_of(name), 40)
        series = scrape(url)
    for name in STREAMING:  # the counters themselves still stream
        assert series[f'roce_device_telemetry_info{{device="{name}",transport="gnmi"}}'] == 1


@pytest.mark.parametrize(("host", "switch", "interface"),
                         [("h1", "leaf1", "Ethernet8"), ("h3", "leaf2", "swp3")])  # fmt: skip
def test_a_storm_shows_within_two_seconds(lab: Lab, host: str, switch: str, interface: str) -> None:
    with exporter(lab.status["fabric_file"]) as url:
        wait_for(url, all_streaming, 60)
        before = scrape(url).get(pause_rx(switch, interface), 0.0)
        with host_storming(lab, host):
            took = wait_for(url, lambda s: s.get(pause_rx(switch, interface), 0.0) > before, 10)
    assert took <= DETECTION_BUDGET_S, (
        f"{switch} {interface}: pause frames shown after {took:.2f} s"
    )


def _roce_to(lab: Lab, src: str, dst: str, seconds: float) -> subprocess.Popen[bytes]:
    """RoCEv2-marked UDP (DSCP 26, ECT(0), port 4791) from ``src`` to ``dst`` for a while, so
    frames queue behind the storm (the watchdog needs traffic queued to call it a storm)."""
    fabric = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    address = {d["name"]: d["ports"][0]["ipv4"].split("/")[0] for d in fabric["devices"]
               if d["role"] == "host"}  # fmt: skip
    code = (
        "import socket,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        f"s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,{26 << 2 | 2})\n"
        f"end=time.monotonic()+{seconds}\n"
        "while time.monotonic()<end:\n"
        f" s.sendto(b'x'*1000,('{address[dst]}',4791)); time.sleep(0.005)\n"
    )
    return subprocess.Popen(["ip", "netns", "exec", lab.netns(src), sys.executable, "-c", code])


def seconds_until_stormed(lab: Lab, switch: str, interface: str, hosts: tuple[str, str],
                          timeout_s: float) -> float:  # fmt: skip
    """Traffic from ``hosts[0]`` queued towards ``hosts[1]``, which storms: the seconds until
    /metrics shows the watchdog holding ``switch`` ``interface`` priority 3."""
    apply_fabric(lab)  # lossless: PFC and the watchdog on the RoCE priority
    sender, stormer = hosts
    with exporter(lab.status["fabric_file"]) as url:
        wait_for(url, lambda s: all_streaming(s) and s.get(stormed(switch, interface)) == 0, 60)
        traffic = _roce_to(lab, sender, stormer, timeout_s + 5)
        try:
            with host_storming(lab, stormer):
                return wait_for(url, lambda s: s.get(stormed(switch, interface)) == 1, timeout_s)
        finally:
            traffic.terminate()
            traffic.wait(timeout=10)


def test_the_watchdog_state_shows_within_two_seconds_of_the_storm(lab: Lab) -> None:
    detection_s = 0.2  # the profile's watchdog.detection_ms (nvidia-default)
    took = seconds_until_stormed(lab, "leaf1", "Ethernet8", ("h2", "h1"), 12)
    assert took <= detection_s + DETECTION_BUDGET_S, f"stormed shown after {took:.2f} s"


# Cumulus streams no watchdog: its state comes from the SSH read at the configuration read's
# pace (15 s at most between two reads), plus that read's own time.
SSH_WATCHDOG_BUDGET_S = 15.0 + 10.0


def test_a_cumulus_storm_shows_in_the_watchdog_read_over_ssh(lab: Lab) -> None:
    took = seconds_until_stormed(lab, "leaf2", "swp3", ("h4", "h3"), 35)
    assert took <= SSH_WATCHDOG_BUDGET_S, f"stormed shown after {took:.2f} s"
