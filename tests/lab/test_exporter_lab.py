"""The exporter on the lab, scraped by a real Prometheus server, with the shipped dashboards and
alert rules.

One lab for the module. The exporter runs in-process through its Python API (as the daemon
will embed it), serving HTTPS with bcrypt basic auth; Prometheus (Debian's package, installed
by scripts/ensure-system-deps.sh) runs on a random loopback port with a temporary storage
directory, scrapes every second and evaluates the shipped alert rules rendered for the lab's
jobs (`python -m exporters.alerts --selector`, a regex selector) with `for:` 0s and 15s windows
(the only changes). The fabric gets one extra switch, ``stuck1``, whose management port is a
loopback TCP server that accepts and never speaks SSH; Prometheus gets one extra target,
``roce-gone``, on a loopback port nobody listens on (an exporter that is down).

Phases: (A) the lab as built, PFC and ECN off: an incast drops on the lossless class, so the
drops, probe loss, drift and device-down alerts fire in Prometheus; (B) after `apply`, ECN
thresholds far above the pause threshold on leaf1: an incast makes leaf1 pause while never
marking, so the pause-without-ECN alert fires. Then every dashboard query and every alert
expression must return series from Prometheus, and the CLI exporter must answer scrapes in
under a second while stuck1 hangs.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import click
import pytest
import yaml

from agent.intent.loader import load_fabric
from agent.observe.locate.evidence import PathResult
from agent.observe.locate.gather import LocateRun, as_json
from agent.observe.locate.rank import locate
from agent.observe.locate.topology import Topology
from agent.observe.probes import scenarios
from agent.observe.probes.runner import NetnsRunner
from exporters import alerts
from exporters.exporter import Exporter, ExporterOptions
from exporters.store import CheckOutcome
from exporters.webconfig import load_web_config
from tests.lab.support import prometheus as prom
from tests.lab.support.dashboards import GRAFANA, TRIM_SERIES, substitute, targets
from tests.lab.support.eos import configure
from tests.lab.support.labs import PASSWORD_ENV, REPO, Lab, LabFactory, requires_lab, run_agent
from tests.lab.support.loopback import free_port
from tests.lab.support.prometheus import run_prometheus, stop

pytestmark = [
    pytest.mark.lab,
    requires_lab,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed"),
]
SYSFS = REPO / "tests" / "data" / "sysfs"
RULES = REPO / "exporters" / "alerts" / "roce.rules.yml"
# The lab's exporter job and a job whose only target is down, both selected by the rules.
LAB_SELECTOR = 'job=~"roce|roce-gone"'
USER, PASSWORD = "prometheus", "lab-scrape-7c1e"
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
# Template variables of the dashboards, as Grafana would substitute them for one selection.
UNDERLYING = {
    "RoceLosslessQueueDrops": "increase(roce_queue_dropped_packets_total[15s]) and on "
    '(fabric, device, interface, queue) roce_intended_class_info{pfc="on"}',
    "RoceLosslessHeadroomDrops": "increase(roce_headroom_dropped_packets_total[15s]) and on "
    '(fabric, device, interface, priority) roce_intended_class_info{pfc="on"}',
    "RocePfcWatchdogStormed": "roce_pfc_watchdog_stormed and on "
    '(fabric, device, interface, priority) roce_intended_class_info{pfc="on"}',
    "RocePfcStormsDetected": "increase(roce_pfc_watchdog_storms_detected_total[15s]) and on "
    '(fabric, device, interface, priority) roce_intended_class_info{pfc="on"}',
    "RocePauseWithoutEcn": "sum by (fabric, device) (rate(roce_pfc_frames_total"
    '{direction="tx"}[15s]) and on (fabric, device, interface, priority) '
    'roce_intended_class_info{pfc="on",ecn="on"}) and on (fabric, device) '
    "sum by (fabric, device) (rate(roce_queue_ecn_marked_packets_total[15s]) and on "
    '(fabric, device, interface, queue) roce_intended_class_info{ecn="on"})',
    "RoceConfigDrift": "roce_drift_items",
    "RoceConfigSessionPending": "roce_config_sessions_pending",
    "RoceDeviceDown": "roce_device_up",
    "RoceProbeLoss": "roce_probe_last_run_lost_packets",
    "RoceCheckFailed": "roce_check_result",
    "RoceExporterDown": 'up{job="roce-gone"}',
    "RoceExporterAbsent": 'up{job="roce"}',
    "RoceLocateSuspect": "roce_locate_suspect >= 0.5",
    "RoceTrimDropped": "increase(roce_queue_trim_dropped_packets_total[15s])",
}
# Alerts over the trim counters: this lab's EOS switches do not trim, so their expressions
# must find nothing here; tests/lab/test_trim_lab.py finds them on a trimming SONiC leaf.
TRIMMING_ALERTS = {"RoceTrimDropped"}
# Alerts this module drives the lab into (the others are proven by their underlying
# expression here and by `promtool test rules` in tests/unit/test_exporter_artifacts.py).
FIRED: dict[str, dict[str, str]] = {}


class SilentSshPort:
    """A TCP server on loopback that accepts connections and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.clients: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            self.clients.append(client)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)
        for client in self.clients:
            client.close()
        self.sock.close()


@dataclass
class Setup:
    lab: Lab
    fabric: Path  # the lab's fabric plus stuck1
    tls_dir: Path
    web_config: Path
    exporter: Exporter
    prometheus: str  # http://127.0.0.1:PORT
    silent: SilentSshPort


def make_tls(folder: Path) -> Path:
    crt, key = folder / "exporter.crt", folder / "exporter.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(crt),
            "-subj",
            "/CN=roce-exporter-lab",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    web = folder / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {"cert_file": crt.name, "key_file": key.name},
                "basic_auth_users": {USER: hashed},
            }
        )
    )
    return web


def fabric_with_stuck_switch(lab: Lab, folder: Path, port: int) -> Path:
    data = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    data["devices"].append(
        {
            "name": "stuck1",
            "platform": "arista_eos",
            "role": "leaf",
            "host": "127.0.0.1",
            "port": port,
            "ports": [{"name": "Ethernet1", "speed": "10M", "cable_m": 1, "mtu": 9000}],
        }
    )
    path = folder / "fabric.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fast_rules(folder: Path) -> Path:
    """The shipped rules for the lab's jobs with `for: 0s` and 15 s windows, so a lab minute
    shows them fire."""
    text = alerts.render(LAB_SELECTOR)
    text = re.sub(r"for: \d+[smh]", "for: 0s", text)
    text = re.sub(r"\[\d+[smh]\]", "[15s]", text)
    path = folder / "roce.rules.yml"
    path.write_text(text)
    return path


def start_prometheus(
    folder: Path, exporter_port: int, tls_dir: Path
) -> tuple[subprocess.Popen[bytes], str]:
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(fast_rules(folder))],
        "scrape_configs": [
            {
                "job_name": "roce",
                "scheme": "https",
                "tls_config": {"ca_file": str(tls_dir / "exporter.crt")},
                "basic_auth": {"username": USER, "password": PASSWORD},
                "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
            },
            {  # a port nobody listens on: RoceExporterDown
                "job_name": "roce-gone",
                "static_configs": [{"targets": [f"127.0.0.1:{free_port()}"]}],
            },
        ],
    }
    return run_prometheus(config, folder)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, module_labs: LabFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("exporterlab")
    lab = module_labs.start("ex", password="admin")  # the lab's default credentials
    silent = SilentSshPort()
    exporter: Exporter | None = None
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        web = make_tls(folder)
        fabric = fabric_with_stuck_switch(lab, folder, silent.port)
        recorded = SYSFS / "ethtool"
        exporter = Exporter(
            load_fabric(fabric).intent,
            ExporterOptions(
                listen=("127.0.0.1", 0),
                interval_s=1.0,
                timeout_s=5.0,
                web_config=load_web_config(web),
                host_nic=True,  # the lab has no RDMA NIC: the fixture tree stands in for one
                sysfs_root=SYSFS,
                ethtool=lambda interface: (recorded / f"{interface}.txt").read_text(),
            ),
        )
        exporter.start()
        assert exporter.server is not None
        prometheus, url = start_prometheus(folder, exporter.server.address[1], folder)
        yield Setup(lab, fabric, folder, web, exporter, url, silent)
    finally:
        if prometheus is not None:
            stop(prometheus)
        if exporter is not None:
            exporter.stop()
        silent.close()


def query(setup: Setup, expr: str) -> list[dict[str, Any]]:
    return prom.query(setup.prometheus, expr)


def firing(setup: Setup) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{setup.prometheus}/api/v1/alerts", timeout=10) as response:
        alerts: list[dict[str, Any]] = json.loads(response.read())["data"]["alerts"]
    return [a for a in alerts if a["state"] == "firing"]


def wait_for_alert(setup: Setup, name: str, timeout: float = 45.0, **labels: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for alert in firing(setup):
            if alert["labels"]["alertname"] == name and all(
                alert["labels"].get(k) == v for k, v in labels.items()
            ):
                FIRED[name] = alert["labels"]
                return
        time.sleep(0.5)
    # What the condition saw, so a failure tells a rule bug from a lab that misbehaved.
    seen = [(r["metric"], r["value"][1]) for r in query(setup, UNDERLYING[name])]
    raise AssertionError(
        f"{name} {labels} did not fire; firing: {[a['labels'] for a in firing(setup)]}; "
        f"{UNDERLYING[name]} = {seen}"
    )


def incast(setup: Setup) -> dict[str, Any]:
    intent = setup.lab.intent()
    return scenarios.incast(intent, "h3", ["h1", "h2"], duration_s=2.0)


def test_prometheus_scrapes_the_exporter_over_tls_with_basic_auth(setup: Setup) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        up = query(setup, 'up{job="roce"}')
        if up and up[0]["value"][1] == "1" and len(query(setup, "roce_device_up == 1")) == 4:
            break
        time.sleep(0.5)
    assert up and up[0]["value"][1] == "1", up
    devices = {r["metric"]["device"]: r["value"][1] for r in query(setup, "roce_device_up")}
    assert devices == {"spine1": "1", "spine2": "1", "leaf1": "1", "leaf2": "1", "stuck1": "0"}


def test_drops_without_pfc_fire_the_lossless_drops_alert(setup: Setup) -> None:
    """The lab as built (PFC and ECN off): the incast overflows leaf1's uplink queue 3."""
    result = incast(setup)
    assert result["totals"]["lost"] > 0, result["totals"]
    setup.exporter.store.update_probe(result)
    setup.exporter.store.update_checks(
        [CheckOutcome("RC001", "leaf1", "fail"), CheckOutcome("RC001", "leaf2", "pass")]
    )
    wait_for_alert(setup, "RoceLosslessQueueDrops", device="leaf1", queue="3")
    wait_for_alert(setup, "RoceProbeLoss", scenario="incast", dst="h3")
    wait_for_alert(setup, "RoceConfigDrift", device="leaf1")
    wait_for_alert(setup, "RoceDeviceDown", device="stuck1")
    wait_for_alert(setup, "RoceCheckFailed", device="leaf1", check="RC001")
    wait_for_alert(setup, "RoceExporterDown", job="roce-gone")
    assert not any(
        a["labels"].get("device") in SWITCHES and a["labels"]["alertname"] == "RoceDeviceDown"
        for a in firing(setup)
    )


def test_pause_without_ecn_fires_when_thresholds_are_too_high(setup: Setup) -> None:
    """After apply, ECN thresholds far above the pause threshold on leaf1: it pauses and
    never marks, which is what the alert is for."""
    applied = run_agent(
        "apply", setup.lab.status["fabric_file"], "--yes",
        "--state-dir", setup.tls_dir / "audit", "--output", "json", timeout=120,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr
    too_high = (
        "random-detect ecn minimum-threshold 2000000 bytes maximum-threshold 4000000 "
        "bytes max-mark-probability 100"
    )
    configure(
        setup.lab,
        "leaf1",
        [
            "interface Ethernet1",
            "uc-tx-queue 3",
            too_high,
            "exit",
            "exit",
            "interface Ethernet2",
            "uc-tx-queue 3",
            too_high,
        ],
        refused="% Invalid",
    )
    result = incast(setup)
    assert result["totals"]["lost"] == 0, result["totals"]
    assert result["totals"]["pfc_frames_received"] > 0, result["totals"]
    setup.exporter.store.update_probe(result)
    wait_for_alert(setup, "RocePauseWithoutEcn", device="leaf1")
    # A receiver result carries what the scenario rows do not: latency and invalid frames.
    ns = setup.lab.netns
    receiver = NetnsRunner("h3", ns("h3")).start(
        "receive",
        {"ifname": "eth1", "duration_s": 8.0, "idle_timeout_s": 1.0, "link_speed_bps": 10_000_000},
    )
    receiver.wait_ready()
    NetnsRunner("h1", ns("h1")).start(
        "send",
        {
            "ifname": "eth1",
            "dst_ip": "198.18.0.13",
            "rate_bps": 1_000_000,
            "link_speed_bps": 10_000_000,
            "count": 300,
            "size": 512,
            "qpn": 0x300,
            "sport": 50001,
            "flow_id": 7,
        },
    ).result(timeout=30)
    received = receiver.result(timeout=30)
    assert received["flows"] and received["flows"][0]["latency"]["count"] > 0
    setup.exporter.store.update_probe(received)


def locate_verdict(setup: Setup) -> dict[str, Any]:
    """``as_json`` of the real join over h1 -> h3 by each spine, and h2 -> h4 by spine2: the
    path through spine1 lost 30 of 200 probes: its links leaf1:Ethernet1>spine1 and
    spine1:Ethernet2>leaf2 lie on the same paths, so the first is named with confidence 0.6."""
    up, down = ("h1>leaf1", "leaf1:Ethernet1>spine1"), ("leaf2:Ethernet3>h3",)
    paths = [
        PathResult("h1", "h3", 49152, (*up, "spine1:Ethernet2>leaf2", *down), 200, 170, 0, 0.1, ()),
        PathResult("h1", "h3", 49153, ("h1>leaf1", "leaf1:Ethernet2>spine2",
                   "spine2:Ethernet2>leaf2", *down), 200, 200, 0, 0.1, ()),
        PathResult("h2", "h4", 49153, ("h2>leaf1", "leaf1:Ethernet2>spine2",
                   "spine2:Ethernet2>leaf2", "leaf2:Ethernet4>h4"), 200, 200, 0, 0.1, ()),
    ]  # fmt: skip
    topology = Topology.from_intent(load_fabric(setup.fabric).intent)
    found = locate(topology, paths, [], duration_s=5.0)
    return as_json(LocateRun(found, paths, 7.5, {"probes": 5.0}))


def test_every_dashboard_query_returns_series(setup: Setup) -> None:
    # A locate verdict from the real join over recorded-style paths (the locate run itself is
    # tests/lab/test_locate_lab.py): its series feed the overview's locate panels and the alert.
    setup.exporter.store.update_locate(locate_verdict(setup))
    wait_for_alert(setup, "RoceLocateSuspect", kind="link", element="leaf1:Ethernet1>spine1")
    time.sleep(3)  # a few scrapes with the receiver's latency histogram
    dead = []
    count = 0
    for name, title, expr in targets():
        count += 1
        found = query(setup, substitute(expr))
        # A trim query finds nothing on switches that do not trim (not read, never 0); the
        # trimming lab proves it (tests/lab/test_trim_lab.py).
        if bool(found) == bool(TRIM_SERIES.search(expr)):
            dead.append(f"{name} / {title}: {expr} ({len(found)} series)")
    for path in sorted(GRAFANA.glob("*.json")):
        board = json.loads(path.read_text())
        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                inner = substitute(variable["definition"][len("label_values(") : -1])
                metric, label = (part.strip() for part in inner.rsplit(",", 1))
                values = {r["metric"].get(label) for r in query(setup, metric)} - {None}
                if not values:
                    dead.append(f"{path.name} variable {variable['name']}: no values")
    assert count > 40
    assert not dead, "\n".join(dead)


def test_every_alert_expression_returns_series(setup: Setup) -> None:
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert set(names) == set(UNDERLYING), "every rule needs its underlying expression here"
    empty = [name for name in UNDERLYING if not query(setup, UNDERLYING[name])]
    assert sorted(empty) == sorted(TRIMMING_ALERTS), empty
    assert {
        "RoceLosslessQueueDrops",
        "RoceProbeLoss",
        "RoceConfigDrift",
        "RoceDeviceDown",
        "RocePauseWithoutEcn",
        "RoceCheckFailed",
        "RoceExporterDown",
        "RoceLocateSuspect",
    } <= set(FIRED)
    assert FIRED["RoceExporterDown"]["job"] == "roce-gone"
    assert not [
        a["labels"]
        for a in firing(setup)
        if a["labels"]["alertname"] == "RoceExporterAbsent"
        or (a["labels"]["alertname"] == "RoceExporterDown" and a["labels"]["job"] == "roce")
    ]


def fetch_metrics(url: str, cafile: Path, password: str) -> tuple[float, str]:
    request = urllib.request.Request(url)
    token = base64.b64encode(f"{USER}:{password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(cafile))
    started = time.monotonic()
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        body = response.read().decode()
    return time.monotonic() - started, body


def test_promtool_check_metrics_on_what_is_served(setup: Setup) -> None:
    assert setup.exporter.url is not None
    _, body = fetch_metrics(setup.exporter.url, setup.tls_dir / "exporter.crt", PASSWORD)
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "roce_probe_latency_seconds_bucket" in body


def exporter_cli() -> list[str]:
    from agent.app.cli import main

    # main.commands holds only the commands defined in agent.app.cli (the rest load lazily)
    if "exporter" in main.list_commands(click.Context(main)):
        return [sys.executable, "-m", "agent", "exporter"]
    return [
        sys.executable,
        "-c",
        "from agent.app.exporter import exporter_command; exporter_command()",
    ]


def test_cli_scrape_is_prompt_while_a_device_hangs(setup: Setup) -> None:
    """`roce-agent exporter` as a user runs it: a switch that accepts TCP and never speaks SSH
    reads down within the timeout, the scrape stays under a second, the others stay current."""
    results = setup.tls_dir / "probe-results"
    results.mkdir()
    (results / "incast.json").write_text(json.dumps(incast_result_fixture(setup)))
    port = free_port()
    process = subprocess.Popen(
        [
            *exporter_cli(),
            str(setup.fabric),
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "1s",
            "--timeout",
            "2s",
            "--web-config",
            str(setup.web_config),
            "--probe-results",
            str(results),
            "--no-host-nic",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, PASSWORD_ENV: "admin"},
    )
    try:
        url = f"https://127.0.0.1:{port}/metrics"
        cafile = setup.tls_dir / "exporter.crt"
        deadline = time.monotonic() + 30
        body = ""
        while time.monotonic() < deadline:
            try:
                elapsed, body = fetch_metrics(url, cafile, PASSWORD)
            except OSError:
                time.sleep(0.2)
                continue
            assert elapsed < 1.0, elapsed
            # every series carries fabric="..." (sorted after device)
            if all(
                re.search(rf'roce_device_up\{{device="{s}",fabric="[^"]+"\}} 1\.0', body)
                for s in SWITCHES
            ):
                break
            time.sleep(0.3)
        assert re.search(r'roce_device_up\{device="stuck1",fabric="[^"]+"\} 0\.0', body), body[
            -3000:
        ]
        # never answered: nothing but roce_device_up 0 (no zero-filled counters or statistics)
        assert 'roce_poll_errors_total{device="stuck1"' not in body
        timings = [fetch_metrics(url, cafile, PASSWORD)[0] for _ in range(5)]
        assert max(timings) < 1.0, timings
        _, body = fetch_metrics(url, cafile, PASSWORD)
        now = time.time()
        for switch in SWITCHES:
            match = re.search(
                rf'roce_last_successful_poll_timestamp_seconds\{{device="{switch}"'
                r',fabric="[^"]+"\} (\S+)',
                body,
            )
            assert match and now - float(match.group(1)) < 5.0, (switch, match)
        assert "stuck1" not in re.findall(
            r'roce_last_successful_poll_timestamp_seconds\{device="(\w+)"', body
        )
        assert re.search(
            r'roce_probe_packets_sent_total\{dst="h3",fabric="[^"]+",scenario="incast",src="h1"\}',
            body,
        )
        with pytest.raises(urllib.error.HTTPError) as denied:
            fetch_metrics(url, cafile, "wrong-password")
        assert denied.value.code == 401
    finally:
        process.terminate()
        out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert PASSWORD not in out + err


def incast_result_fixture(setup: Setup) -> dict[str, Any]:
    """A probe result as `probe incast --output json` writes it (the shape, small numbers)."""
    return {
        "scenario": "incast",
        "to": "h3",
        "from": ["h1"],
        "passed": True,
        "failures": [],
        "flows": [
            {
                "from": "h1",
                "to": "h3",
                "qpn": 256,
                "sent": 10,
                "received": 10,
                "lost": 0,
                "reordered": 0,
                "ce_marked": 0,
                "cnps_received": 0,
                "pfc_frames_received": 0,
                "paused_s": 0.0,
            }
        ],
    }
