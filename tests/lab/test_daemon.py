"""The daemon as a subprocess against the lab, with a fake $NOTIFY_SOCKET; and `validate`
exit codes for pass, fail and error."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lab.support.eos import configure
from tests.lab.support.labs import PASSWORD_ENV, REPO, Lab, LabFactory, requires_lab, run_agent
from tests.lab.support.loopback import free_port
from tests.unit.daemon_process import Daemon, Notifications, sample, scrape, serving

pytestmark = [pytest.mark.lab, requires_lab]


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("dm")


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, PASSWORD_ENV: "admin", **extra}


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return run_agent(*args, timeout=180)


def write_config(path: Path, lab: Lab, mode: str, state: Path, exporter_port: int | None) -> None:
    exporter = (
        f"{{listen: '127.0.0.1:{exporter_port}', poll_interval_s: 2}}" if exporter_port else "null"
    )
    path.write_text(
        f"fabric: {lab.status['fabric_file']}\nmode: {mode}\nstate_dir: {state}\n"
        f"exporter: {exporter}\nintervals: {{reconcile_s: 3}}\n"
    )


# The exit codes and the JUnit report of validate; --no-traffic: the probes' verdicts on a
# quiet machine are the serial tests' (test_validate_selection_lab, test_playbooks_lab).
@pytest.mark.lab_parallel
def test_validate_exit_codes(lab: Lab, tmp_path: Path) -> None:
    fabric = lab.status["fabric_file"]
    # A broken file never reaches the lab: its validate runs beside the others.
    broken = tmp_path / "broken.yml"
    broken.write_text("name: x\nprofile: nvidia-default\ndevices: []\n")
    with ThreadPoolExecutor(max_workers=1) as pool:
        refused = pool.submit(agent, "validate", str(broken))
        assert agent("apply", fabric, "--yes", "--state-dir", str(tmp_path)).returncode == 0
        passed = agent(
            "validate", fabric, "--no-traffic", "--output", "junit",
            "--report-file", str(tmp_path / "r.xml"),
        )  # fmt: skip
    assert refused.result().returncode == 2
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    assert "<testsuites" in passed.stdout and (tmp_path / "r.xml").read_text().startswith("<?xml")

    configure(lab, "leaf1", ["interface Ethernet3", "no priority-flow-control"])
    failed = agent("validate", fabric, "--no-traffic", "--output", "json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    bad = [c for c in report["checks"] if c["status"] == "failure"]
    assert {c["check"] for c in bad} >= {"RC003", "RC008"}
    assert any(
        "Ethernet3 PFC: Expected: True Actual: False" in m for c in bad for m in c["messages"]
    )

    assert agent("apply", fabric, "--yes", "--state-dir", str(tmp_path)).returncode == 0


@pytest.mark.lab_parallel  # the control plane: a daemon, its reloads, timers of 20 s and more
def test_daemon_lifecycle(lab: Lab, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    state = tmp_path / "state"
    port = free_port()
    write_config(config, lab, "observe", state, port)
    notifications = Notifications(tmp_path / "notify.sock")
    watched = env(
        NOTIFY_SOCKET=str(notifications.path), WATCHDOG_USEC="2000000", PYTHONFAULTHANDLER="1"
    )
    with serving(config, port, tmp_path, watched) as daemon:
        notifications.wait_for("READY=1", 20)
        notifications.wait_for("WATCHDOG=1", 5)
        notifications.wait_for("STATUS=running", 20)
        notifications.wait_for("STATUS=observe:", 30)  # after the first reconcile
        assert (state / "last-reconcile.json").exists()
        metrics = scrape(port)  # the embedded exporter serves the lab's switches
        assert 'roce_device_up{device="leaf1",' in metrics
        assert sample(metrics, "roce_agent_config_reload_success") == 1
        assert sample(metrics, 'roce_agent_mode{mode="observe"}') == 1
        _observe_reports_drift_and_keeps_it(lab, daemon)
        _broken_reload_keeps_the_old_configuration(daemon)
        _reload_to_enforce_repairs_the_drift(lab, daemon, state)
        _sigterm_stops_within_10_s(daemon, notifications)


def _observe_reports_drift_and_keeps_it(lab: Lab, daemon: Daemon) -> None:
    """observe: a hand-made drift is reported within one interval, not repaired."""
    configure(lab, "leaf2", ["qos map dscp 20 to traffic-class 3"])
    drift = daemon.logs.wait_for(
        lambda e: e["message"] == "drift" and e.get("device") == "leaf2", 15
    )
    assert any(d["setting"] == "dscp_to_priority[20]" for d in drift["differences"])
    assert agent("drift", lab.status["fabric_file"]).returncode == 1


def _broken_reload_keeps_the_old_configuration(daemon: Daemon) -> None:
    """SIGHUP with a broken file: refused, the old configuration keeps running."""
    daemon.reload("fabric: [this is not a path\n")
    daemon.logs.wait_for(lambda e: e["message"].startswith("reload refused"), 10)
    daemon.logs.wait_for(lambda e: e["message"] == "drift", 15)  # still reconciling
    assert daemon.process.poll() is None
    metrics = scrape(daemon.port)  # still serving, and saying why
    assert sample(metrics, "roce_agent_config_reload_success") == 0
    assert sample(metrics, "roce_agent_config_reload_failures_total") == 1


def _reload_to_enforce_repairs_the_drift(lab: Lab, daemon: Daemon, state: Path) -> None:
    """SIGHUP to enforce: the drift is repaired within one interval."""
    write_config(daemon.config, lab, "enforce", state, daemon.port)
    daemon.process.send_signal(signal.SIGHUP)
    daemon.logs.wait_for(lambda e: e["message"] == "reloaded" and e.get("mode") == "enforce", 10)
    repaired = daemon.logs.wait_for(
        lambda e: e["message"] == "enforce" and e.get("device") == "leaf2", 30
    )
    assert repaired["result"] == "applied"
    assert agent("drift", lab.status["fabric_file"]).returncode == 0
    assert "leaf2" in (state / "audit.jsonl").read_text()
    assert sample(scrape(daemon.port), 'roce_agent_mode{mode="enforce"}') == 1


def _sigterm_stops_within_10_s(daemon: Daemon, notifications: Notifications) -> None:
    # A real systemd reads its socket all along; this fake one has not read it since the
    # enforce phase, and a full queue (~10 datagrams) would drop STOPPING=1.
    notifications.drain()
    started = time.monotonic()
    daemon.process.send_signal(signal.SIGTERM)
    while daemon.process.poll() is None and time.monotonic() - started < 10:
        daemon.logs.poll()  # keep draining: a full stdout pipe would block the daemon's logging
        notifications.drain()
        time.sleep(0.1)
    assert daemon.process.wait(timeout=1) == 0
    assert time.monotonic() - started < 10
    notifications.wait_for("STOPPING=1", 2)


# --------------------------------------------------------------------------- bad reloads


def _fabric_with_bad_speed(lab: Lab, folder: Path) -> tuple[Path, int]:
    text = Path(lab.status["fabric_file"]).read_text()
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip().startswith("speed:"))
    lines[index] = lines[index].split("speed:")[0] + "speed: 1T"
    # Next to the lab's fabric file, so its profile and credential paths resolve the same.
    bad = Path(lab.status["fabric_file"]).with_name(f"bad-speed-{os.getpid()}.yml")
    bad.write_text("\n".join(lines) + "\n")
    return bad, index + 1


def _good_config(lab: Lab, state: Path, port: int, extra: str = "") -> str:
    return (
        f"fabric: {lab.status['fabric_file']}\nmode: observe\nstate_dir: {state}\n"
        f"exporter:\n  listen: '127.0.0.1:{port}'\n  poll_interval_s: 2\n{extra}"
        "intervals: {reconcile_s: 30}\n"
    )


def _bad_cases(
    lab: Lab, tmp_path: Path, state: Path, port: int, busy_port: int
) -> list[tuple[str, bytes, str, int | None]]:
    """(case, agent.yaml bytes, file the log line must name, line or None if whole-file)."""
    config = str(tmp_path / "agent.yaml")
    bad_fabric, speed_line = _fabric_with_bad_speed(lab, tmp_path)
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: '$2y$10$not-a-real-hash'\n")
    folder = tmp_path / "a-directory.yml"
    folder.mkdir()
    fifo = tmp_path / "a-fifo.yml"
    os.mkfifo(fifo)  # a read would wait forever for a writer
    good = _good_config(lab, state, port)
    with_web = good.replace("  poll_interval_s", f"  web_config: {web}\n  poll_interval_s")
    # None: an error about the whole file (unreadable, not UTF-8), which names the file only.
    return [
        ("speed-1T", good.replace(lab.status["fabric_file"], str(bad_fabric)).encode(),
         str(bad_fabric), speed_line),
        ("nul-byte", good.encode().replace(b"mode: observe", b"mode: obs\0erve"), config, 2),
        ("recursive-alias", good.encode() + b"playbooks: &loop [*loop]\n", config, 8),
        ("bad-web-config", with_web.encode(), str(web), 2),
        ("listen-malformed", good.replace(f"127.0.0.1:{port}", "nowhere").encode(), config, 5),
        ("listen-in-use", good.replace(f":{port}'", f":{busy_port}'").encode(), config, 5),
        ("listen-not-local", good.replace("127.0.0.1", "203.0.113.7").encode(), config, 5),
        ("fabric-unreadable", good.replace(lab.status["fabric_file"], str(folder)).encode(),
         str(folder), None),
        ("fabric-is-a-fifo", good.replace(lab.status["fabric_file"], str(fifo)).encode(),
         str(fifo), None),
        ("config-not-utf8", good.encode().replace(b"observe", b"obs\xff\xfeerve"), config, None),
    ]  # fmt: skip


@pytest.mark.lab_parallel  # the control plane: a daemon, its reloads, timers of 20 s and more
def test_bad_reloads_keep_the_old_fabric_and_exporter(lab: Lab, tmp_path: Path) -> None:
    """SIGHUP with each bad input: one JSON line naming FILE(:LINE), reload_success 0, the
    old exporter still serving the old fabric on the old port, the process alive; a good
    file afterwards reloads again (so every case starts from a running, healthy daemon)."""
    config = tmp_path / "agent.yaml"
    state = tmp_path / "state"
    port = free_port()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    good = _good_config(lab, state, port)
    config.write_text(good)
    cases = _bad_cases(lab, tmp_path, state, port, busy.getsockname()[1])
    try:
        with serving(config, port, tmp_path, env(PYTHONFAULTHANDLER="1")) as daemon:
            daemon.logs.wait_for(lambda e: e["message"] == "started", 30)
            assert sample(scrape(port), "roce_agent_config_reload_success") == 1
            for failures, case in enumerate(cases, start=1):
                _refused_then_reloaded(daemon, good, failures, case)
            daemon.logs.poll()
            assert all(e["message"] != "stopped" for e in daemon.logs.lines)
            _web_config_reload_keeps_the_socket(daemon, good, tmp_path)
            _reload_to_a_new_address(daemon, good)
    finally:
        busy.close()
        for path in Path(lab.status["fabric_file"]).parent.glob(f"bad-speed-{os.getpid()}.yml"):
            path.unlink()


def _refused_then_reloaded(
    daemon: Daemon, good: str, failures: int, bad: tuple[str, bytes, str, int | None]
) -> None:
    case, content, file, line = bad
    daemon.reload(content)
    entry = daemon.logs.wait_for(lambda e: e["message"].startswith("reload refused"), 40)
    assert entry["level"] == "error", case
    assert entry.get("file") == file, (case, entry)
    if line is not None:
        assert entry.get("line") == line, (case, entry)
    assert daemon.process.poll() is None, case
    metrics = scrape(daemon.port)  # the old exporter, on the old port
    assert sample(metrics, "roce_agent_config_reload_success") == 0, case
    assert sample(metrics, "roce_agent_config_reload_failures_total") == failures, case
    assert 'roce_device_up{device="leaf1",' in metrics, case  # the old fabric
    daemon.reloaded(good)
    assert sample(scrape(daemon.port), "roce_agent_config_reload_success") == 1, case


def _web_config_reload_keeps_the_socket(daemon: Daemon, good: str, folder: Path) -> None:
    """A good web config on the same address: the socket is kept, the new rules apply."""
    import bcrypt

    web = folder / "auth.yml"
    hashed = bcrypt.hashpw(b"scrape", bcrypt.gensalt(4)).decode()
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    daemon.reloaded(good.replace("  poll_interval_s", f"  web_config: {web}\n  poll_interval_s"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        scrape(daemon.port)
    assert refused.value.code == 401
    daemon.reloaded(good)


def _reload_to_a_new_address(daemon: Daemon, good: str) -> None:
    """A good reload to a new address: bound before the old one is let go, then moved."""
    new_port = free_port()
    daemon.reloaded(good.replace(f":{daemon.port}'", f":{new_port}'"))
    assert sample(scrape(new_port), "roce_agent_config_reload_success") == 1
    with pytest.raises(OSError):
        scrape(daemon.port)
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(timeout=15) == 0


@pytest.mark.lab_parallel  # the control plane: a daemon, its reloads, timers of 20 s and more
def test_systemd_credential_recipe(lab: Lab, tmp_path: Path) -> None:
    """``password_file: ${CREDENTIALS_DIRECTORY}/fabric-password`` with the directory made
    the way LoadCredential= makes it (private, 0500, the file 0400; no systemd PID 1 here for
    ``systemd-run``) and the password in no environment variable: the real daemon logs in
    to the lab's switches. Without the variable, serve exits 2 naming file, line, device."""
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    secret = credentials / "fabric-password"
    secret.write_text("admin")
    secret.chmod(0o400)
    credentials.chmod(0o500)
    lab_fabric = Path(lab.status["fabric_file"])
    fabric = lab_fabric.with_name(f"credential-recipe-{os.getpid()}.yml")
    text = lab_fabric.read_text()
    assert "password_env: ROCE_LAB_PASSWORD" in text
    fabric.write_text(
        text.replace(
            "password_env: ROCE_LAB_PASSWORD",
            "password_file: ${CREDENTIALS_DIRECTORY}/fabric-password",
        )
    )
    config = tmp_path / "agent.yaml"
    port = free_port()
    config.write_text(
        _good_config(lab, tmp_path / "state", port).replace(lab.status["fabric_file"], str(fabric))
    )
    clean = {k: v for k, v in os.environ.items() if k != PASSWORD_ENV}
    try:
        unset = subprocess.run(
            [sys.executable, "-m", "agent", "serve", "--config", str(config)],
            cwd=REPO,
            env={k: v for k, v in clean.items() if k != "CREDENTIALS_DIRECTORY"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert unset.returncode == 2
        line = next(
            i for i, t in enumerate(fabric.read_text().splitlines(), 1) if "CREDENTIALS_DIR" in t
        )
        assert f"{fabric}:{line}:" in unset.stderr
        assert "${CREDENTIALS_DIRECTORY} is not set" in unset.stderr
        assert "Traceback" not in unset.stderr

        with_file = {**clean, "CREDENTIALS_DIRECTORY": str(credentials)}
        with serving(config, port, tmp_path, with_file) as daemon:
            daemon.logs.wait_for(lambda e: e["message"] == "started", 30)
            up = _switches_up(port, timeout=30)
            assert all(value == 1 for value in up.values()), up  # logged in with the file
            daemon.logs.poll()
            assert not [e for e in daemon.logs.lines if e["message"] == "device unreadable"]
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=15) == 0
    finally:
        credentials.chmod(0o700)
        fabric.unlink(missing_ok=True)


def _switches_up(port: int, timeout: float) -> dict[str, float]:
    """roce_device_up of each lab switch, once all are 1 or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    up: dict[str, float] = {}
    while time.monotonic() < deadline:
        metrics = scrape(port)
        up = {
            name: sample(metrics, f'roce_device_up{{device="{name}"}}')
            for name in ("spine1", "spine2", "leaf1", "leaf2")
        }
        if all(value == 1 for value in up.values()):
            break
        time.sleep(1)
    return up
