"""Packet trimming in the lab (issue #47, "Done when": the lossy-trim class trims under a 2:1
incast and the probes count it).

The one-leaf incast lab with its leaf speaking SONiC, then NVUE; the agent applies the lab's
fabric with the RoCE class in ``mode: lossy-trim`` (SONiC: SWITCH_TRIMMING|GLOBAL and the
trimming buffer profile on the RoCE queue, through GCU; NVUE: ``qos roce mode lossy-multi-tc``
and ``system forwarding packet-trim``), then h1 and h2 send at line rate to h3. The leaf's
eth3 queue overflows: its frames are trimmed and sent on in the trim queue, the leaf's trim
counters (read over SSH with the NOS's own show commands: ``show interfaces counters trim -j``
and ``show queue counters --trim -j``; ``nv show system forwarding packet-trim counters -o
json`` and ``nv show interface swp3 counters packet-trim -o json``) say so, the receiver's
probe counts the trimmed frames, nobody sends a PFC frame, and what the probe counts as lost
is what the switch dropped after trimming. A PFC storm from h3 then pauses nothing: the class
has no PFC.

Not ``lab_parallel``: the counts measure the data plane, which needs the CPU.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.intent.loader import load_fabric
from agent.observe.probes import scenarios
from tests.lab.support import prometheus as prom
from tests.lab.support.dashboards import TRIM_SERIES, substitute, targets
from tests.lab.support.dataplane import control
from tests.lab.support.labs import (
    INCAST,
    Lab,
    LabFactory,
    exporter_serving,
    requires_lab,
    run_agent_in,
)

pytestmark = [pytest.mark.lab, requires_lab]
SWITCH = "leaf1"
DATAPLANE_PORT = "eth3"  # h3's port
NOS_PORT = {"sonic": "Ethernet8", "nvue": "swp3"}


@pytest.fixture(scope="module", params=["sonic", "nvue"])
def lab(request: pytest.FixtureRequest, module_labs: LabFactory) -> Lab:
    nos: str = request.param
    return module_labs.start(f"t{nos[:2]}", INCAST, nos=nos)


def _nos(lab: Lab) -> str:
    return "sonic" if lab.name.startswith("tso") else "nvue"


def _trim_fabric(lab: Lab, directory: Path) -> Path:
    """The lab's fabric file with the RoCE class lossy with trimming."""
    source = Path(lab.status["fabric_file"])
    data: dict[str, Any] = yaml.safe_load(source.read_text())
    overrides = data.setdefault("overrides", {}) or {}
    overrides["mode"] = "lossy-trim"
    data["overrides"] = overrides
    target = directory / "trim-fabric.yml"
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


@pytest.fixture(scope="module")
def trimming(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab's leaf with the lossy-trim fabric applied by the agent."""
    state = tmp_path_factory.mktemp("agent")
    fabric = _trim_fabric(lab, state)
    applied = run_agent_in(state, "apply", str(fabric), "--yes", "--output", "json")
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-2000:]
    return fabric


def _number(text: Any) -> int:
    return int(str(text).replace(",", ""))


def _switch_trim(lab: Lab) -> tuple[int, int, int]:
    """The receiver port's (trimmed, trimmed sent, dropped at the trim queue) as the NOS shows
    them over SSH (``lab exec``); NVUE 5.15 shows no per-port total: trimmed = sent + dropped
    (the switch-wide drop count: one port trims here)."""
    port = NOS_PORT[_nos(lab)]
    if _nos(lab) == "sonic":
        ports = json.loads(lab.exec(SWITCH, f"show interfaces counters trim {port} -j"))[port]
        queues = json.loads(lab.exec(SWITCH, f"show queue counters {port} --trim -j"))[port]
        trimmed = _number(ports["TRIM_PKTS"])
        assert _number(queues["UC3"]["trimpacket"]) == trimmed
        return trimmed, _number(ports["TRIM_TX_PKTS"]), _number(ports["TRIM_DRP_PKTS"])
    found = json.loads(lab.exec(SWITCH, "nv show system forwarding packet-trim counters -o json"))
    text = lab.exec(SWITCH, "nv show system forwarding packet-trim counters")
    assert text.startswith("Global") and "trimmed-drop-packets" in text, text
    per_class = json.loads(
        lab.exec(SWITCH, f"nv show interface {port} counters packet-trim -o json")
    )
    sent = _number(found["port-level"][port]["trimmed-packets"])
    dropped = _number(found["global"]["trimmed-drop-packets"])
    # Per class: the packets the class trimmed (the NVUE reference), sent or dropped.
    assert _number(per_class["3"]["trimmed-packets-tx"]) == sent + dropped
    return sent + dropped, sent, dropped


def _counters(lab: Lab) -> dict[str, Any]:
    with control(lab, SWITCH) as client:
        found: dict[str, Any] = client.counters()
    return found


def test_a_2_to_1_incast_trims_and_the_probe_counts_it(lab: Lab, trimming: Path) -> None:
    intent = load_fabric(trimming).intent
    with control(lab, SWITCH) as client:
        qos = client.get_config()["qos"]["ports"][DATAPLANE_PORT]
        client.clear_counters()
    assert qos["trim"]["queue"] != 3 and qos["queues"]["3"]["trim"] is True
    assert not qos["pfc_enabled"]
    result = scenarios.incast(intent, "h3", ["h1", "h2"], duration_s=2.0, dcqcn=False)
    totals = result["totals"]
    counters = _counters(lab)
    port = counters["ports"][DATAPLANE_PORT]
    print(_nos(lab), "incast totals:", totals, "switch trim:", port["trim"])  # measured
    # The switch trimmed, and says so over SSH in its NOS's own formats.
    trimmed, sent, dropped = _switch_trim(lab)
    assert trimmed > 0 and trimmed == sent + dropped
    assert (trimmed, sent, dropped) == tuple(port["trim"].values())
    # The probe recognised the trimmed frames: every one the switch sent, re-marked.
    assert totals["trimmed"] == sent > 0
    assert {f["trimmed_dscp"] for f in result["flows"] if f["trimmed"]} == {qos["trim"]["dscp"]}
    assert any(note.startswith(f"trimmed {sent}:") for note in result["notes"])
    # No pause anywhere: no PFC frame sent by any switch port, none reached a sender.
    for name, counted in counters["ports"].items():
        assert counted["pfc"]["tx_xoff"] == [0] * 8, name
    assert totals["pfc_frames_received"] == 0
    # Trimming replaced tail drops: what the probe lost is what the trim queue dropped.
    assert port["queues"]["3"]["tail_drops"] == 0
    assert totals["lost"] == dropped


# The trim panel's targets and the RoceTrimDropped alert's expression each NOS answers: SONiC
# reports trimmed, sent and dropped per queue; Cumulus 5.15 per class only what was trimmed
# (sent and dropped per queue are not read: no series, never 0).
SERVED = {
    "sonic": {"trimmed": True, "sent": True, "dropped": True},
    "nvue": {"trimmed": True, "sent": False, "dropped": False},
}
TRIM_DROPPED_ALERT = "increase(roce_queue_trim_dropped_packets_total[15s])"


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")
def test_the_trim_panel_and_alert_read_what_the_switch_reports(
    lab: Lab, trimming: Path, tmp_path: Path
) -> None:
    """The exporter (as a user runs it) reads the trimming leaf's counters over SSH; a real
    Prometheus scrapes it; the dashboard's trim queries and RoceTrimDropped's expression find
    the series the NOS reports and none it does not (the lossless exporter lab, whose EOS
    switches do not trim, finds none: tests/lab/test_exporter_lab.py)."""
    served = SERVED[_nos(lab)]
    interface = "Ethernet.*" if _nos(lab) == "sonic" else "swp.*"
    with exporter_serving(trimming, interval="1s") as url:
        target = urllib.parse.urlsplit(url).netloc
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "roce", "static_configs": [{"targets": [target]}]}],
        }
        prometheus, base = prom.run_prometheus(config, tmp_path)
        try:
            found = _trim_queries(base, interface, wait_s=40.0)
        finally:
            prom.stop(prometheus)
    assert found == {column: True for column in served if served[column]} | {
        column: False for column in served if not served[column]
    }, found


def _trim_queries(base: str, interface: str, wait_s: float) -> dict[str, bool]:
    """Per column (trimmed, sent, dropped): whether the trim panel's query and, for dropped,
    the alert's expression return series, once every served column has appeared (or
    ``wait_s`` passed: a rate needs two scrapes)."""
    exprs = {
        title_column(expr): substitute(expr, interface=interface)
        for _, _, expr in targets()
        if TRIM_SERIES.search(expr)
    }
    deadline = time.monotonic() + wait_s
    while True:
        found = {column: bool(prom.query(base, expr)) for column, expr in exprs.items()}
        found["dropped"] = found["dropped"] and bool(prom.query(base, TRIM_DROPPED_ALERT))
        if all(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(2)


def title_column(expr: str) -> str:
    """Which of the trim panel's columns a query reads."""
    for column, metric in (("sent", "trim_sent"), ("dropped", "trim_dropped")):
        if metric in expr:
            return column
    return "trimmed"


def test_a_pfc_storm_pauses_nothing_on_a_trimming_class(lab: Lab, trimming: Path) -> None:
    intent = load_fabric(trimming).intent
    with control(lab, SWITCH) as client:
        client.clear_counters()
    result = scenarios.storm(intent, "h3", duration_s=1.5, rate_pps=200, traffic_from="h1")
    counters = _counters(lab)
    port = counters["ports"][DATAPLANE_PORT]
    print(
        _nos(lab),
        "storm: received pause frames",
        port["pfc"]["rx_xoff"],
        "traffic",
        result["traffic"],
    )
    assert sum(port["pfc"]["rx_xoff"]) > 0  # the storm reached the switch ...
    assert port["paused"] == [False] * 8  # ... which pauses nothing: no PFC on the class
    assert all(q["watchdog"]["storms_detected"] == 0 for q in port["queues"].values())
    for name, counted in counters["ports"].items():
        assert counted["pfc"]["tx_xoff"] == [0] * 8, name
    # h1's RoCE traffic to h3 went on through the storm: the switch kept sending it and
    # h1 was never paused.
    traffic = result["traffic"]
    assert traffic is not None and traffic["sent"] > 0
    assert traffic["paused_s"] == 0.0 and traffic["pfc_frames_received"] == 0
    assert port["queues"]["3"]["tx_packets"] > 0
