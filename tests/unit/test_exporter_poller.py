"""Scheduler and pollers without devices: intervals, bounded concurrency, timeouts that do not
hold up the others, kept SSH sessions, error reasons, and a scrape that never waits."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.device.platforms.arista_eos import AristaEos
from agent.device.platforms.base import Connection, Platform, PlatformError
from agent.device.push import Unreachable
from agent.device.state import Counters, InterfaceCounters, PendingSession, QosState
from agent.errors import CredentialError
from agent.intent.loader import load_fabric
from agent.intent.model import Device
from exporters.exporter import Exporter, ExporterOptions
from exporters.poller import PollScheduler, SwitchPoller, SwitchRead, classify
from exporters.store import FabricIndex, SnapshotStore, SwitchInventory


class Job:
    """A pollable that records what the scheduler did with it."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        timeout_s: float,
        work_s: float,
        gauge: list[int],
        lock: threading.Lock,
    ) -> None:
        self.name, self.interval_s, self.timeout_s, self.work_s = (
            name,
            interval_s,
            timeout_s,
            work_s,
        )
        self.gauge, self.lock = gauge, lock
        self.polls = self.successes = self.abandons = 0
        self.failures: list[tuple[str, float]] = []
        self.release = threading.Event()

    def poll(self) -> str:
        with self.lock:
            self.gauge[0] += 1
            self.gauge[1] = max(self.gauge[1], self.gauge[0])
        try:
            self.polls += 1
            if self.work_s < 0:
                self.release.wait(10)  # hangs until the test releases it
            else:
                time.sleep(self.work_s)
            return self.name
        finally:
            with self.lock:
                self.gauge[0] -= 1

    def succeeded(self, result: Any, duration_s: float) -> None:
        self.successes += 1

    def failed(self, reason: str, duration_s: float, error: BaseException | None) -> None:
        self.failures.append((reason, time.monotonic()))

    def abandoned(self) -> None:
        self.abandons += 1


@pytest.fixture
def gauge() -> tuple[list[int], threading.Lock]:
    return [0, 0], threading.Lock()


def test_jobs_run_at_their_interval_within_the_concurrency_bound(
    gauge: tuple[list[int], threading.Lock],
) -> None:
    jobs = [Job(f"d{i}", 0.2, 2.0, 0.05, *gauge) for i in range(6)]
    scheduler = PollScheduler(jobs, concurrency=2)
    scheduler.start()
    time.sleep(1.1)
    scheduler.stop()
    assert gauge[0][1] <= 2
    for job in jobs:
        assert 3 <= job.polls <= 7, (job.name, job.polls)
        assert job.successes >= 3 and not job.failures


def test_a_hung_job_times_out_promptly_and_does_not_delay_the_others(
    gauge: tuple[list[int], threading.Lock],
) -> None:
    hung = Job("hung", 0.2, 0.3, -1, *gauge)
    healthy = [Job(f"ok{i}", 0.2, 1.0, 0.02, *gauge) for i in range(2)]
    scheduler = PollScheduler([hung, *healthy], concurrency=2)
    started = time.monotonic()
    scheduler.start()
    time.sleep(1.2)
    assert hung.failures and hung.failures[0][0] == "timeout"
    assert hung.failures[0][1] - started < 0.6  # declared at the timeout, not at the return
    assert len(hung.failures) == 1  # no second poll while the first still hangs
    for job in healthy:
        assert job.polls >= 4, (job.name, job.polls)  # a replacement worker kept them going
    assert hung.successes == 0
    hung.release.set()
    time.sleep(0.1)
    assert hung.abandons == 1  # the late result was discarded, not recorded
    assert [reason for reason, _ in hung.failures] == ["timeout"]
    scheduler.stop()


class FakeNetmiko:
    def __init__(self) -> None:
        self.closed = False

    def disconnect(self) -> None:
        self.closed = True


class FakePlatform(AristaEos):
    """Counters without a device; ``fail_next`` raises once."""

    def __init__(self) -> None:
        self.fail_next: Exception | None = None
        self.reads = 0

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        self.reads += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        return Counters(
            device=conn.device,
            collected_at=time.time(),
            interfaces={"Ethernet1": InterfaceCounters(pfc_rx=(0, 0, 0, self.reads, 0, 0, 0, 0))},
        )

    def read_state(self, conn: Connection) -> QosState:
        return QosState(trust="dscp")

    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        # A leaked uncommitted session and a live one, as AristaEos parses them.
        return AristaEos.sessions_from_json(conn.device, RECORDED_SESSIONS, now=1000.0)


RECORDED_SESSIONS = {
    "sessions": {
        "roce-agent-1": {"state": "pending", "user": "admin", "createdTime": 400.0},
        "ops-change": {"state": "pendingCommitTimer", "user": "ops", "createdTime": 900.0,
                       "commitTimerRemaining": 200.0},
        "done": {"state": "completed", "user": "ops", "createdTime": 10.0},
    },
    "maxSavedSessions": 1,
    "maxOpenSessions": 5,
}  # fmt: skip


def test_switch_poller_keeps_its_session_and_rebuilds_it_after_a_failure() -> None:
    device = Device.model_validate(
        {
            "name": "leaf1",
            "platform": "arista_eos",
            "role": "leaf",
            "host": "127.0.0.1",
            "username": "admin",
            "credentials": {"password_env": "UNUSED"},
            "ports": [{"name": "Ethernet1", "speed": "10M", "cable_m": 1, "mtu": 9000}],
        }
    )
    sessions: list[FakeNetmiko] = []

    def connector(dev: Device, platform: Platform) -> Connection:
        sessions.append(FakeNetmiko())
        return Connection(sessions[-1], dev.name)

    platform = FakePlatform()
    store = SnapshotStore(
        "lab", [SwitchInventory("leaf1", ("Ethernet1",), ())], FabricIndex(device_names=["leaf1"])
    )
    desired = QosState(trust="dscp", dscp_to_priority={26: 3})
    poller = SwitchPoller(device, store, 1.0, 1.0, SwitchRead(desired, platform, connector))
    first = poller.poll()
    poller.poll()
    assert len(sessions) == 1 and first.drift == 1  # one DSCP entry differs
    poller.succeeded(first, 0.1)
    view = store.snapshot().devices["leaf1"]
    assert (view.sessions_pending, view.sessions_oldest_age_s) == (2, 600.0)
    platform.fail_next = EOFError("session closed by peer")  # idle timeout on the device
    assert poller.poll().counters.interfaces["Ethernet1"].pfc_rx[3] == 4  # retried at once
    assert len(sessions) == 2 and sessions[0].closed
    platform.fail_next = PlatformError("leaf1: did not return JSON")
    with pytest.raises(PlatformError):
        poller.poll()  # a parse error is not retried: a new session would not help
    assert sessions[1].closed
    poller.abandoned()


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Unreachable("leaf1", "authentication failed", "user admin (password_env X)"), "auth"),
        (Unreachable("leaf1", "unreachable", "10.0.0.1:22 refused, 3 attempts"), "connect"),
        (Unreachable("leaf1", "timed out", "no SSH banner within 10 s"), "timeout"),
        (Unreachable("leaf1", "host key changed", "SHA256:a != SHA256:b"), "connect"),
        (Unreachable("leaf1", "protocol error", "not an SSH server"), "connect"),
        (CredentialError("environment variable X is not set"), "auth"),
        (TimeoutError("timed out"), "timeout"),
        (TimeoutError("timed out"), "timeout"),
        (PlatformError("did not return JSON"), "parse"),
        (KeyError("interfaces"), "parse"),
        (ConnectionResetError(), "connect"),
        (EOFError(), "connect"),
        (RuntimeError("boom"), "other"),
    ],
)
def test_errors_map_to_bounded_reasons(error: BaseException, reason: str) -> None:
    assert classify(error) == reason


def test_netmiko_exceptions_map_to_reasons() -> None:
    from netmiko.exceptions import NetmikoAuthenticationException, ReadTimeout

    assert classify(NetmikoAuthenticationException("bad")) == "auth"
    assert classify(ReadTimeout("no prompt")) == "timeout"


# --------------------------------------------------------------------------- whole exporter


@pytest.fixture
def small_fabric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROCE_EXPORTER_TEST_PASSWORD", "x")
    ports = [{"name": "Ethernet1", "speed": "10M", "cable_m": 1, "mtu": 9000}]
    fabric = {
        "name": "tiny",
        "profile": "nvidia-default",
        "defaults": {
            "username": "admin",
            "credentials": {"password_env": "ROCE_EXPORTER_TEST_PASSWORD"},
        },
        "devices": [
            {
                "name": name,
                "platform": "arista_eos",
                "role": "leaf",
                "host": "127.0.0.1",
                "port": port,
                "ports": ports,
            }
            for port, name in enumerate(("leaf1", "leaf2", "stuck"), start=2201)
        ],
    }
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(fabric))
    return path


@pytest.fixture
def exporter(small_fabric: Path) -> Iterator[Exporter]:
    release = threading.Event()

    def connector(device: Device, platform: Platform) -> Connection:
        if device.name == "stuck":
            release.wait(20)  # like a TCP port that accepts and never speaks SSH
            raise TimeoutError("banner")
        return Connection(FakeNetmiko(), device.name)

    exp = Exporter(
        load_fabric(small_fabric).intent,
        ExporterOptions(
            listen=("127.0.0.1", 0),
            interval_s=0.3,
            timeout_s=0.5,
            concurrency=2,
            connector=connector,
            host_nic=False,
        ),
    )
    for job in exp.jobs:
        if isinstance(job, SwitchPoller):
            job.platform = FakePlatform()
    exp.start()
    try:
        yield exp
    finally:
        release.set()
        exp.stop()


def scrape(url: str) -> tuple[float, str]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=5) as response:
        body = response.read().decode()
    return time.monotonic() - started, body


def test_scrape_never_waits_for_a_stuck_device(exporter: Exporter) -> None:
    assert exporter.url is not None
    elapsed, body = scrape(exporter.url)  # at once, before any poll finished
    assert elapsed < 1.0
    assert 'roce_device_up{device="stuck",fabric="tiny"} 0.0' in body
    time.sleep(1.5)
    elapsed, body = scrape(exporter.url)
    assert elapsed < 1.0
    assert 'roce_device_up{device="stuck",fabric="tiny"} 0.0' in body
    assert 'roce_device_up{device="leaf1",fabric="tiny"} 1.0' in body
    assert 'roce_device_up{device="leaf2",fabric="tiny"} 1.0' in body
    assert 'roce_polls_total{device="leaf1",fabric="tiny"}' in body
    # never answered: no counters, no poll statistics that would read as zeros
    assert 'device="stuck",direction=' not in body
    assert 'roce_queue_transmitted_packets_total{device="stuck"' not in body
    assert 'roce_poll_errors_total{device="stuck"' not in body
    assert exporter.store.snapshot().devices["stuck"].status.errors["timeout"] >= 1
    status = exporter.store.snapshot().devices
    assert status["leaf1"].status.polls >= 3  # kept polling while "stuck" hung
    assert status["leaf1"].drift is not None


def test_collectors_registered_next_to_the_exporter_are_served(exporter: Exporter) -> None:
    """The daemon registers its own collector in ``exporter.registry``; the fast text path
    that answers Prometheus must serve it too."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    class DaemonLike(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            yield GaugeMetricFamily("roce_daemon_test_up", "test", value=1)

    daemon_like = DaemonLike()
    exporter.registry.register(daemon_like)
    assert exporter.url is not None
    prometheus_accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    for accept in (prometheus_accept, "application/openmetrics-text;version=1.0.0"):
        request = urllib.request.Request(exporter.url, headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read().decode()
        # the fabric label is added to other collectors' roce_* series too
        assert 'roce_daemon_test_up{fabric="tiny"} 1.0' in body, accept
        assert 'roce_exporter_http_connections{fabric="tiny"}' in body, accept
        assert "roce_device_up" in body
    exporter.registry.unregister(daemon_like)
    assert b"roce_daemon_test_up" not in exporter.exposition_text()
