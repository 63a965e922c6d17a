"""``roce-agent lab fault`` on a running leaf-spine lab: each kind shows the symptom a real
fabric would show, and ``remove`` brings normal behaviour back.

Symptoms are observed from outside, as an operator would: datagrams sent by plain sockets in
the hosts' namespaces (delivered, lost, altered, delayed), and the switches' counters and
configuration through their SSH management plane (netmiko ``arista_eos``, as the agent
connects). One lab for the module (h1, h2 on leaf1; h3, h4 on leaf2; two spines).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.faults import LabFaults
from tests.lab.support import dataplane, eos
from tests.lab.support.labs import Lab, LabFactory, ns_run, requires_lab
from tests.lab.support.polling import wait_until

pytestmark = [pytest.mark.lab, requires_lab]

ROCE_DSCP = 26  # nvidia-default: RoCE on DSCP 26 -> traffic class / priority 3
ROCE_PORT = 4791
SO_NO_CHECK = 11  # asm-generic/socket.h: send UDP with checksum 0, as RoCEv2 NICs do

# Datagram tool run inside a host namespace:
#   recv BIND PORT COUNT TIMEOUT           "ready", then one hex payload per line
#   send SRC DST PORT COUNT TOS NOCHECK HEX  COUNT datagrams, 5 ms apart
#   echo BIND PORT DURATION                 send every datagram back ("ready" first)
#   rtt SRC DST PORT COUNT                  JSON list of round-trip times in ms
TOOL = r"""
import json, socket, sys, time
mode, args = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if mode in ("recv", "echo"):
    s.bind((args[0], int(args[1])))
    print("ready", flush=True)
if mode == "recv":
    count, deadline = int(args[2]), time.monotonic() + float(args[3])
    for _ in range(count):
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            print(s.recv(65535).hex(), flush=True)
        except socket.timeout:
            break
elif mode == "echo":
    deadline = time.monotonic() + float(args[2])
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data, peer = s.recvfrom(65535)
        except socket.timeout:
            break
        s.sendto(data, peer)
elif mode == "send":
    s.bind((args[0], 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(args[4]))
    if args[5] == "1":
        s.setsockopt(socket.SOL_SOCKET, 11, 1)
    for n in range(int(args[3])):
        s.sendto(bytes.fromhex(args[6]) + n.to_bytes(4, "big"), (args[1], int(args[2])))
        time.sleep(0.005)
elif mode == "rtt":
    s.bind((args[0], 0))
    s.settimeout(3.0)
    rtts = []
    for n in range(int(args[3])):
        start = time.monotonic()
        s.sendto(n.to_bytes(4, "big"), (args[1], int(args[2])))
        try:
            while s.recv(64) != n.to_bytes(4, "big"):
                pass
            rtts.append((time.monotonic() - start) * 1000)
        except socket.timeout:
            pass
        time.sleep(0.02)
    print(json.dumps(rtts))
"""


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Iterator[Lab]:
    started = module_labs.start("flt")
    yield started
    # Last: a storm left running is ended by `lab down` (by the PID faults.json records).
    pid = LabFaults(started.state_dir).add("storm", "h2").pids()[0]
    assert Path(f"/proc/{pid}").exists()
    module_labs.stop(started)
    assert pid and (not Path(f"/proc/{pid}").exists() or _zombie(pid))
    assert not started.state_dir.exists()  # faults.json and the storm's log went with the lab


@pytest.fixture
def faults(lab: Lab) -> Iterator[LabFaults]:
    registry = LabFaults(lab.state_dir)
    try:
        yield registry
    finally:
        registry.clear()  # each test leaves the lab as it found it
        assert registry.list() == []


def _ip(lab: Lab, host: str) -> str:
    return str(lab.status["nodes"][host]["interfaces"][0]["ipv4"]).split("/")[0]


def _tool(lab: Lab, host: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", lab.netns(host), sys.executable, "-c", TOOL, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return out


def exchange(
    lab: Lab,
    src: str,
    dst: str,
    count: int,
    *,
    port: int = 5000,
    tos: int = 0,
    no_check: bool = False,
    payload: bytes = b"\x00" * 12,
    timeout: float = 3.0,
) -> list[bytes]:
    """``count`` datagrams from ``src`` to ``dst``; the payloads ``dst`` received."""
    receiver = _tool(lab, dst, "recv", _ip(lab, dst), port, count, timeout)
    assert receiver.stdout is not None
    assert receiver.stdout.readline().strip() == "ready"
    args = ("send", _ip(lab, src), _ip(lab, dst), port, count, tos, int(no_check), payload.hex())
    ns_run(lab.netns(src), sys.executable, "-c", TOOL, *map(str, args))
    out = _finish(receiver, timeout + 10)
    return [bytes.fromhex(line) for line in out.split()]


def round_trips(lab: Lab, src: str, dst: str, count: int = 5) -> list[float]:
    echo = _tool(lab, dst, "echo", _ip(lab, dst), 7000, 15)
    try:
        assert echo.stdout is not None
        assert echo.stdout.readline().strip() == "ready"
        out = ns_run(lab.netns(src), sys.executable, "-c", TOOL, "rtt", _ip(lab, src),
                     _ip(lab, dst), "7000", str(count))  # fmt: skip
    finally:
        echo.kill()
        echo.wait()
    rtts: list[float] = json.loads(out)
    return rtts


def cli(lab: Lab, switch: str, commands: list[str] | None = None, show: str = "") -> Any:
    """Over SSH, as the agent connects: config lines, then one show (``| json`` parsed)."""
    if commands:
        eos.configure(lab, switch, commands)
    if not show:
        return None
    text = eos.show(lab, switch, show)
    return json.loads(text) if show.endswith("| json") else text


def dataplane_qos(lab: Lab, switch: str) -> dict[str, Any]:
    """The QoS the vswitch runs with (what the CLI pushed reached the data plane)."""
    with dataplane.control(lab, switch) as client:
        qos: dict[str, Any] = client.get_config()["qos"]
    return qos


def get_faults(lab: Lab, switch: str) -> list[dict[str, Any]]:
    """The fault set the vswitch runs with (lab-only: its control socket)."""
    with dataplane.control(lab, switch) as client:
        return client.get_faults()


# --------------------------------------------------------------------------- the tests


def test_loss_on_one_direction_through_the_cli(lab: Lab, faults: LabFaults) -> None:
    added = lab.cli("fault", "add", "loss", "leaf1:eth3>h1", "--percent", "50", "--seed", "3")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("f1: loss leaf1:eth3>h1 — leaf1 vswitch drop on eth3")
    table = lab.cli("fault", "list")
    assert table.returncode == 0 and "f1" in table.stdout and "drop on eth3" in table.stdout
    listed = json.loads(lab.cli("fault", "list", "-o", "json").stdout)
    assert [(f["id"], f["kind"], f["target"]) for f in listed] == [("f1", "loss", "leaf1:eth3>h1")]
    assert listed[0]["params"] == {"percent": 50.0, "seed": 3}

    errors = cli(lab, "leaf1", show="show interfaces counters errors | json")
    lossy = exchange(lab, "h3", "h1", 40, timeout=1.5)
    assert 8 <= len(lossy) <= 32, len(lossy)  # 50 %: a binomial(40, .5) far from its tails
    assert len(exchange(lab, "h1", "h3", 20)) == 20  # the other direction is clean
    # A gray failure: no error counter a switch shows has moved.
    assert cli(lab, "leaf1", show="show interfaces counters errors | json") == errors

    # Bad input on the running lab: exit 2, one line, and the switches keep their fault sets.
    bad = lab.cli("fault", "add", "loss", "leaf1:eth9>spine1", "--percent", "5")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.startswith("error: target 'leaf1:eth9>spine1': leaf1 has no port 'eth9'")
    assert [f["kind"] for f in get_faults(lab, "leaf1")] == ["drop"]
    assert get_faults(lab, "spine1") == []

    removed = lab.cli("fault", "remove", "f1")
    assert (removed.returncode, removed.stdout) == (0, "f1: removed (loss leaf1:eth3>h1)\n")
    assert len(exchange(lab, "h3", "h1", 40)) == 40
    assert json.loads(lab.cli("fault", "list", "-o", "json").stdout) == []
    assert get_faults(lab, "leaf1") == []


def test_corruption_into_a_switch_is_counted_as_fcs_errors(lab: Lab, faults: LabFaults) -> None:
    def fcs() -> int:
        errors = cli(lab, "leaf1", show="show interfaces counters errors | json")
        return int(errors["interfaceErrorCounters"]["Ethernet3"]["fcsErrors"])

    before = fcs()
    fault = faults.add("corrupt", "h1>leaf1", percent=100)
    assert exchange(lab, "h1", "h3", 10, timeout=1.0) == []
    assert fcs() - before == 10
    faults.remove(fault.id)
    assert len(exchange(lab, "h1", "h3", 10)) == 10
    assert fcs() - before == 10


def test_corruption_towards_a_host_breaks_only_roce_payloads(lab: Lab, faults: LabFaults) -> None:
    bth = bytes.fromhex("0a000000000000120000002a")  # opcode SEND, dest QP 0x12, PSN 42
    faults.add("corrupt", "leaf1:eth3>h1", percent=100)
    roce = exchange(lab, "h3", "h1", 5, port=ROCE_PORT, no_check=True, payload=bth)
    # Delivered (the IP header is intact and the UDP checksum is 0), but never as sent: only
    # the receiving NIC's ICRC check would tell.
    assert len(roce) == 5
    assert all(got != bth + n.to_bytes(4, "big") for n, got in enumerate(roce))
    other = exchange(lab, "h3", "h1", 5, port=5000, payload=bth)
    assert other == [bth + n.to_bytes(4, "big") for n in range(5)]
    assert dataplane.counters(lab, "leaf1")["ports"]["eth3"]["fault_corrupted"] >= 5
    faults.clear()
    clean = exchange(lab, "h3", "h1", 5, port=ROCE_PORT, no_check=True, payload=bth)
    assert clean == [bth + n.to_bytes(4, "big") for n in range(5)]


def test_a_link_down_shows_on_both_ends_and_ecmp_routes_around_it(
    lab: Lab, faults: LabFaults
) -> None:
    def status(switch: str) -> tuple[str, str]:
        entry = cli(lab, switch, show="show interfaces status | json")["interfaceStatuses"]
        port = entry["Ethernet1"]
        return port["linkStatus"], port["lineProtocolStatus"]

    fault = faults.add("down", "leaf1:eth1")
    assert wait_until(lambda: status("leaf1") == ("notconnect", "down"), timeout=3)
    assert status("spine1") == ("notconnect", "down")  # the far end lost carrier
    assert dataplane.counters(lab, "leaf1")["ports"]["eth1"]["oper_up"] is False
    # leaf1 skips the dead uplink: every flow h1 -> h3 leaves over spine2.
    for sport_offset in range(4):
        assert len(exchange(lab, "h1", "h3", 4, port=5100 + sport_offset)) == 4
    faults.remove(fault.id)
    assert wait_until(lambda: status("leaf1") == ("connected", "up"), timeout=3)
    assert status("spine1") == ("connected", "up")


def test_misclassify_is_visible_in_the_running_config(lab: Lab, faults: LabFaults) -> None:
    def interface_block() -> str:
        text = str(cli(lab, "leaf1", show="show running-config"))
        start = text.index("interface Ethernet3")
        return text[start : text.index("!", start)] if "!" in text[start:] else text[start:]

    before = interface_block()
    fault = faults.add("misclassify", "leaf1:eth3")
    assert "qos trust cos" in interface_block()
    assert dataplane_qos(lab, "leaf1")["ports"]["eth3"]["trust"] == "cos"
    faults.remove(fault.id)
    assert interface_block() == before


def test_asic_misclassify_moves_roce_to_a_lossy_queue_with_a_clean_config(
    lab: Lab, faults: LabFaults
) -> None:
    def queues() -> dict[str, int]:
        data = cli(lab, "leaf1", show="show interfaces counters queue | json")
        classes = data["egressQueueCounters"]["interfaces"]["Ethernet4"]["ucastQueues"]
        tcs = classes["trafficClasses"]
        return {tc: int(tcs[tc]["dropPrecedences"]["DP0"]["enqueuedPackets"]) for tc in tcs}

    config_before = cli(lab, "leaf1", show="show running-config")
    start = queues()
    fault = faults.add("asic-misclassify", "leaf1:eth3")  # RoCE's DSCP 26 -> TC 0
    assert fault.params == {"dscp": ROCE_DSCP, "tc": 0}
    assert len(exchange(lab, "h1", "h2", 10, tos=ROCE_DSCP << 2)) == 10
    middle = queues()
    assert (middle["TC0"] - start["TC0"], middle["TC3"] - start["TC3"]) == (10, 0)
    assert cli(lab, "leaf1", show="show running-config") == config_before
    faults.remove(fault.id)
    assert len(exchange(lab, "h1", "h2", 10, tos=ROCE_DSCP << 2)) == 10
    end = queues()
    assert (end["TC0"] - middle["TC0"], end["TC3"] - middle["TC3"]) == (0, 10)


def test_latency_on_one_direction_adds_to_the_round_trip(lab: Lab, faults: LabFaults) -> None:
    base = round_trips(lab, "h3", "h1")
    assert len(base) == 5 and max(base) < 80, base
    fault = faults.add("latency", "leaf1:eth3>h1", ms=150)
    slow = round_trips(lab, "h3", "h1")
    assert len(slow) == 5 and min(slow) >= 150, slow
    faults.remove(fault.id)
    after = round_trips(lab, "h3", "h1")
    assert len(after) == 5 and max(after) < 80, after


def test_a_storming_host_pauses_its_switch_port_unless_pfc_is_ignored(
    lab: Lab, faults: LabFaults
) -> None:
    pfc_lines = ["interface Ethernet3", "priority-flow-control on"]
    cli(lab, "leaf1", [*pfc_lines, "priority-flow-control priority 3 no-drop"])

    def rx_pfc() -> int:
        data = cli(lab, "leaf1", show="show priority-flow-control counters | json")
        return int(data["interfaceCounters"]["Ethernet3"]["rxFrames"])

    try:
        before = rx_pfc()
        storm = faults.add("storm", "h1")
        pid = storm.pids()[0]
        assert storm.params == {"priority": 3}
        assert Path(f"/proc/{pid}").exists()
        assert wait_until(lambda: rx_pfc() - before >= 20, timeout=3)
        # RoCE's class towards h1 is paused; the other classes still flow.
        assert exchange(lab, "h3", "h1", 5, tos=ROCE_DSCP << 2, timeout=1.0) == []
        assert len(exchange(lab, "h3", "h1", 5, port=5001)) == 5

        faults.add("ignore-pfc", "leaf1:eth3")
        # The pause already running ends (≤ 65535 quanta = 3.4 s at 10 Mb/s); none follows.
        time.sleep(3.5)
        assert len(exchange(lab, "h3", "h1", 5, port=5002, tos=ROCE_DSCP << 2)) == 5
        counting = rx_pfc()
        assert wait_until(lambda: rx_pfc() > counting, timeout=2)  # still counted

        faults.remove(storm.id)
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
    finally:
        cli(lab, "leaf1", ["interface Ethernet3", "no priority-flow-control"])


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True
