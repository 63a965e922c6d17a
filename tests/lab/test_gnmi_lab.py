"""gNMI on a live mixed-NOS lab (issue #45, item 1): an outside collector -- plain grpc and
pygnmi's gNMI protobufs, not the agent -- subscribes to each switch with its NOS's documented
paths and sees the PFC counters move when pause frames arrive.

One lab of ``containerlab/roce-leafspine-mixed.clab.yml`` (EOS spine1, NX-OS spine2, SONiC
leaf1, Cumulus leaf2). The collector finds each endpoint as a user would, in ``lab status -o
json`` (``gnmi``, ``gnmi_ca``, ``gnmi_server_name``) with the lab's credentials, and verifies
the switch's certificate against the lab's CA. Pause frames come from a storming NIC: the
lab's ``storm`` fault on h1 (into leaf1's Ethernet8) and h3 (into leaf2's swp3), and the same
storm program run on leaf1's side of its link to spine1 (a stuck neighbour, into spine1's
Ethernet1), each stopped by its PID.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
import yaml
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from tests.lab.support.labs import REPO, Lab, LabFactory, host_storming, requires_lab

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
MORE = 20  # PFC frames: a storm sends one every 10 ms
SAMPLE_NS = 500_000_000


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("gn", MIXED, password="admin")


def _elems(xpath: str) -> list[gnmi_pb2.PathElem]:
    elems = []
    for part in xpath.strip("/").split("/"):
        name, _, rest = part.partition("[")
        keys = dict(k.split("=", 1) for k in rest.rstrip("]").split("][") if k) if rest else {}
        elems.append(gnmi_pb2.PathElem(name=name, key=keys))
    return elems


def _request(xpath: str, target: str, encoding: int) -> gnmi_pb2.SubscribeRequest:
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            prefix=gnmi_pb2.Path(target=target),
            mode=gnmi_pb2.SubscriptionList.STREAM,
            encoding=encoding,
            subscription=[
                gnmi_pb2.Subscription(
                    path=gnmi_pb2.Path(elem=_elems(xpath)),
                    mode=gnmi_pb2.SubscriptionMode.SAMPLE,
                    sample_interval=SAMPLE_NS,
                )
            ],
        )
    )


def _follow(
    lab: Lab,
    switch: str,
    request: gnmi_pb2.SubscribeRequest,
    value: Callable[[gnmi_pb2.Notification], int],
    timeout: float = 45.0,
) -> list[int]:
    """Subscribe to ``switch`` as a collector would; the values sampled after the first
    complete set until they grew by :data:`MORE` (the stream's deadline fails the test)."""
    node = lab.current_status()["nodes"][switch]
    credentials = lab.status["credentials"]
    with open(node["gnmi_ca"], "rb") as ca:
        tls = grpc.ssl_channel_credentials(root_certificates=ca.read())
    override = [("grpc.ssl_target_name_override", node["gnmi_server_name"])]
    done = threading.Event()

    def requests() -> Iterator[gnmi_pb2.SubscribeRequest]:
        yield request
        done.wait(timeout)

    metadata = (("username", credentials["username"]), ("password", credentials["password"]))
    values: list[int] = []
    with grpc.secure_channel(node["gnmi"], tls, options=override) as channel:
        stream = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(
            requests(), metadata=metadata, timeout=timeout
        )
        try:
            for response in stream:
                if response.HasField("update"):
                    values.append(value(response.update))
                if values and values[-1] - values[0] >= MORE:
                    break
        finally:
            done.set()
            stream.cancel()
    return values


@contextmanager
def _neighbour_storm(lab: Lab, node: str, ifname: str) -> Iterator[subprocess.Popen[bytes]]:
    """The storm program on ``node``'s side of a link: PFC XOFF priority 3 into its peer."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", lab.netns(node), sys.executable, "-m", "lab.faults_storm",
         "--ifname", ifname, "--priority", "3"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_status_and_fabric_file_name_each_gnmi_endpoint(lab: Lab) -> None:
    nodes = lab.current_status()["nodes"]
    for switch in ("spine1", "leaf1", "leaf2"):
        host, _, port = nodes[switch]["gnmi"].rpartition(":")
        assert host == "127.0.0.1" and int(port) != nodes[switch]["mgmt_port"]
        assert nodes[switch]["gnmi_server_name"] == switch
        assert nodes[switch]["gnmi_ca"].startswith(str(lab.state_dir))
    assert "gnmi" not in nodes["spine2"]  # NX-OS: no gNMI server in the lab
    fabric = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    devices = {d["name"]: d for d in fabric["devices"]}
    assert devices["leaf1"]["gnmi"] == {
        "port": int(nodes["leaf1"]["gnmi"].rpartition(":")[2]),
        "tls": {"ca": nodes["leaf1"]["gnmi_ca"], "server_name": "leaf1"},
    }


def test_sonic_counters_db_shows_the_pause_frames_h1_sends(lab: Lab) -> None:
    request = _request("COUNTERS/Ethernet8", "COUNTERS_DB", gnmi_pb2.Encoding.JSON_IETF)

    def received(notification: gnmi_pb2.Notification) -> int:
        fields = json.loads(notification.update[0].val.json_ietf_val)
        return int(fields["SAI_PORT_STAT_PFC_3_RX_PKTS"])

    with host_storming(lab, "h1"):
        values = _follow(lab, "leaf1", request, received)
    assert values[-1] - values[0] >= MORE, values


def test_cumulus_qos_tree_shows_the_pause_frames_h3_sends(lab: Lab) -> None:
    xpath = ("/qos/interfaces/interface[interface-id=swp3]/switch-priority[priority=3]/state"
             "/counters/in-pause-pkts")  # fmt: skip
    request = _request(xpath, "", gnmi_pb2.Encoding.PROTO)

    def received(notification: gnmi_pb2.Notification) -> int:
        return int(notification.update[0].val.uint_val)

    with host_storming(lab, "h3"):
        values = _follow(lab, "leaf2", request, received)
    assert values[-1] - values[0] >= MORE, values


def test_eos_pfc_augment_shows_the_pause_frames_of_a_stuck_neighbour(lab: Lab) -> None:
    xpath = "/interfaces/interface[name=Ethernet1]/ethernet/pfc/priorities/priority[index=3]/state"
    request = _request(xpath, "", gnmi_pb2.Encoding.PROTO)

    def received(notification: gnmi_pb2.Notification) -> int:
        leaves = {u.path.elem[-1].name: u.val.uint_val for u in notification.update}
        return int(leaves["in-frames"])

    with _neighbour_storm(lab, "leaf1", "eth1") as storm:
        assert storm.stdout is not None and storm.stdout.readline() == b"storming\n"
        values = _follow(lab, "spine1", request, received)
    assert values[-1] - values[0] >= MORE, values
