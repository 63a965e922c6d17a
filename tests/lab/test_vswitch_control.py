"""lab.vswitch control socket and process lifecycle: refused/accepted QoS changes, counters
shape, SIGTERM."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.lab.support import frames
from tests.lab.support import vswitch as fx

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]

QUEUE_KEYS = {
    "tx_packets",
    "tx_bytes",
    "tail_drops",
    "ecn_marked",
    "depth_bytes",
    "watermark_bytes",
    "watchdog",
    "trimmed",
    "trim_sent",
    "trim_dropped",
}


@pytest.fixture(scope="module")
def topo() -> Iterator[fx.Topology]:
    with fx.Topology.create("ctl", n_hosts=3) as topology:
        yield topology


def _raw_request(path: str, line: bytes) -> dict[str, Any]:
    import json

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            assert chunk, "switch closed the connection"
            data += chunk
    response: dict[str, Any] = json.loads(data)
    return response


def test_counters_have_the_documented_shape(topo: fx.Topology) -> None:
    with fx.Rig(topo) as rig, rig.switch(topo.base_config()).client() as client:
        counters = client.counters()
        assert counters["name"] == "vsw-ctl" and counters["uptime_s"] >= 0
        assert set(counters["ports"]) == {"eth1", "eth2", "eth3"}
        port = counters["ports"]["eth1"]
        assert set(port) == {
            "rx_packets", "rx_bytes", "rx_overruns", "tx_packets", "tx_bytes", "drops", "pfc",
            "paused", "ingress", "queues", "rx_fcs_errors", "rx_errors", "oper_up",
            "icmp_time_exceeded", "icmp_rate_limited", "fault_drops", "fault_corrupted", "trim",
        }  # fmt: skip
        assert port["oper_up"] is True
        assert set(port["drops"]) == {"ttl", "no_route", "arp_unresolved"}
        for key in ("rx_xoff", "rx_xon", "tx_xoff", "tx_xon"):
            assert port["pfc"][key] == [0] * 8
        assert port["paused"] == [False] * 8
        assert set(port["ingress"]) == {"buffered_bytes", "watermark_bytes", "headroom_drops"}
        assert set(port["queues"]) == {str(i) for i in range(8)}
        queue = port["queues"]["3"]
        assert set(queue) == QUEUE_KEYS
        assert queue["watchdog"] == {
            "state": "operational",
            "storms_detected": 0,
            "storms_restored": 0,
            "dropped_packets": 0,
        }
        assert client.request({"cmd": "clear_counters"}) == {"ok": True}
        assert client.request({"cmd": "clear_watermarks"}) == {"ok": True}


def test_invalid_qos_is_refused_and_nothing_changes(topo: fx.Topology) -> None:
    with fx.Rig(topo) as rig:
        switch = rig.switch(topo.base_config())
        with switch.client() as client:
            before = client.get_config()
            bad_qos = dict(before["qos"])
            bad_qos["ports"] = {
                "eth3": {
                    "pfc_enabled": True,
                    "pfc_priorities": [3],
                    "queues": {
                        "3": {
                            "ecn": {"min_bytes": 50000, "max_bytes": 40000, "max_probability": 10}
                        }
                    },
                }
            }
            response = client.request({"cmd": "set_qos", "qos": bad_qos})
            assert response["ok"] is False
            assert "qos.ports.eth3.queues.3.ecn" in response["error"]
            assert "min_bytes" in response["error"]

            for qos_change, field in (
                ({"ports": {"eth1": {"pfc_priorities": [9]}}}, "qos.ports.eth1.pfc_priorities.0"),
                ({"ports": {"eth9": {}}}, "qos.ports.eth9"),
                ({"trust": "cos"}, "qos.trust"),
                ({"ports": {"eth1": {"trust": "vlan"}}}, "qos.ports.eth1.trust"),
                ({"dscp_to_tc": {"64": 1}}, "qos.dscp_to_tc.64"),
                ({"watchdog": {"enabled": True, "action": "shutdown"}}, "qos.watchdog.action"),
            ):
                response = client.request({"cmd": "set_qos", "qos": qos_change})
                assert response["ok"] is False and field in response["error"], response

            response = client.request(
                {"cmd": "set_buffer", "buffer": {**before["buffer"], "xon_bytes": 99999}}
            )
            assert response["ok"] is False and "xon_bytes" in response["error"]
            assert client.request({"cmd": "nope"})["ok"] is False
            assert client.get_config() == before
        garbage = _raw_request(switch.control_path, b"this is not json\n")
        assert garbage["ok"] is False and "JSON" in garbage["error"]
        assert _raw_request(switch.control_path, b'{"cmd": "ping"}\n')["ok"] is True


def _arrives_within(capture: fx.Capture, seq: int, seconds: float) -> bool:
    return fx.wait_for(lambda: any(u.seq == seq for u in capture.udp(4791)), seconds)


def test_enabling_pfc_at_run_time_changes_the_next_packets(topo: fx.Topology) -> None:
    """PFC off on eth3: a received XOFF is only counted.  set_qos turns it on: now honoured."""
    h1, h3 = topo.host(1), topo.host(3)

    def data(seq: int) -> bytes:
        return frames.build_udp(
            h1.mac, h1.switch_mac, h1.ip, h3.ip, 9, 4791, seq.to_bytes(4, "big"), dscp=26
        )

    with fx.Rig(topo) as rig:
        switch = rig.switch(topo.base_config())
        rig.sink(h3, 4791)
        capture = rig.capture(h3)
        tx, inject = rig.raw(h1), rig.raw(h3)
        with switch.client() as client:
            inject.send(frames.build_pfc(h3.mac, {3: 0xFFFF}))
            time.sleep(0.02)
            tx.send(data(1))
            assert _arrives_within(capture, 1, 0.3)
            eth3 = client.counters()["ports"]["eth3"]
            assert eth3["pfc"]["rx_xoff"][3] == 1 and eth3["paused"][3] is False

            qos = client.get_config()["qos"]
            qos["ports"] = {"eth3": {"pfc_enabled": True, "pfc_priorities": [3]}}
            assert client.set_qos(qos) == {"ok": True}
            assert client.get_config()["qos"]["ports"]["eth3"]["pfc_enabled"] is True

            inject.send(frames.build_pfc(h3.mac, {3: 0xFFFF}))
            time.sleep(0.02)
            tx.send(data(2))
            assert not _arrives_within(capture, 2, 0.4)
            assert client.counters()["ports"]["eth3"]["paused"][3] is True
            inject.send(frames.build_pfc(h3.mac, {3: 0}))
            assert _arrives_within(capture, 2, 0.3)


def test_sigterm_exits_within_2s_and_removes_the_socket(topo: fx.Topology) -> None:
    switch = topo.start_switch(topo.base_config())
    assert os.path.exists(switch.control_path)
    rc, waited = switch.terminate(timeout=5)
    assert rc == 0, switch.log_tail()
    assert waited < 2.0
    assert not os.path.exists(switch.control_path)
    assert "stopped" in switch.log_tail()
