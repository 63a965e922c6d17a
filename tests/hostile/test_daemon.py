"""Hostile reloads of the real daemon (issue #42, "A daemon that cannot freeze").

``roce-agent serve`` runs as a process with its exporter, a fake systemd that asks for
watchdog pings every 0.5 s, and a loader that misbehaves on request
(tests/hostile/loader_hook: a pattern that backtracks for ever while holding the interpreter
lock, a sleep, a 4 GiB allocation, a crash), plus a real hostile fabric (a 200 000-digit port
name, which froze the daemon for good). For each: SIGHUP, then scrapes every 0.2 s with
Prometheus' 1 s budget and the watchdog pings counted throughout; every scrape is answered,
the pings never stop, the reload is refused with the old configuration running (its worker
killed, no process left behind), and a good reload works again. SIGTERM, even in the middle
of a runaway reload, ends the process within 10 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.daemon_process import (
    REPO,
    Daemon,
    Notifications,
    environment,
    fabric_on_loopback,
    free_port,
    sample,
    scrape,
    serving,
)

HOOK = Path(__file__).resolve().parent / "loader_hook"
DEADLINE_S = 6  # the running configuration's reload_timeout_s (a worker starts in ~1 s)
SCRAPE_BUDGET_S = 1.0  # Prometheus' default scrape timeout is 10 s; ours is stricter
PING_EVERY_S = 0.5  # WATCHDOG_USEC=1000000: the daemon pings every half interval


@dataclass
class Served:
    daemon: Daemon
    notifications: Notifications
    good: str
    fabric: Path


def good_config(folder: Path, fabric: Path, port: int) -> str:
    return (
        f"fabric: {fabric}\nstate_dir: {folder / 'state'}\nreload_timeout_s: {DEADLINE_S}\n"
        f"exporter: {{listen: '127.0.0.1:{port}', poll_interval_s: 1}}\n"
        "intervals: {reconcile_s: 3600}\n"
    )


@contextmanager
def start(folder: Path) -> Iterator[Served]:
    fabric = fabric_on_loopback(folder / "fabric.yml", {"leaf1": free_port(), "leaf2": free_port()})
    port = free_port()
    good = good_config(folder, fabric, port)
    config = folder / "agent.yaml"
    config.write_text(good)
    notifications = Notifications(folder / "notify.sock")
    env = environment(
        PYTHONPATH=f"{HOOK}{os.pathsep}{REPO}",
        ROCE_TEST_LOADER_HOOK="1",
        NOTIFY_SOCKET=str(notifications.path),
        WATCHDOG_USEC=str(int(2 * PING_EVERY_S * 1e6)),
    )
    try:
        with serving(config, port, folder, env) as daemon:
            daemon.logs.wait_for(lambda e: e["message"] == "started", 30)
            notifications.wait_for("READY=1", 10)
            yield Served(daemon, notifications, good, fabric)
    finally:
        notifications.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with start(tmp_path_factory.mktemp("daemon")) as running:
        yield running


def hostile_fabric(served: Served) -> str:
    """The issue's case: a port name of 200 000 digits (the range pattern backtracked on it)."""
    text = served.fabric.read_text().replace("name: Ethernet1,", f"name: Ethernet{'1' * 200_000},")
    bad = served.fabric.with_name("hostile-fabric.yml")
    bad.write_text(text)
    return served.good.replace(str(served.fabric), str(bad))


def hooked(mode: str) -> Callable[[Served], str]:
    return lambda served: f"# loader-hook: {mode}\n{served.good}"


# (case, new agent.yaml, words of the refusal: any one of them)
CASES = [
    ("holds-the-interpreter", hooked("hold-gil"), [f"took longer than {DEADLINE_S} s"]),
    ("sleeps", hooked("sleep"), [f"took longer than {DEADLINE_S} s"]),
    ("grows-without-bound", hooked("grow"), ["MemoryError"]),
    ("crashes", hooked("exit"), ["the reload worker died (exit code 3)", "loader hook: exit 3"]),
    # Until the pattern is linear the deadline refuses it; after, the loader does, located.
    ("port-name-of-200000-digits", hostile_fabric,
     [f"took longer than {DEADLINE_S} s", "devices[0].ports[0].name"]),
]  # fmt: skip


@dataclass
class Watch:
    scrapes: list[tuple[int | str, float]]
    pings: int
    seconds: float


def watch(served: Served, until: Callable[[], bool], at_least_s: float) -> Watch:
    """Scrape every 0.2 s and count the watchdog pings until ``until()`` (and at least
    ``at_least_s``), at most 30 s."""
    served.notifications.drain()
    served.notifications.seen.clear()
    results: list[tuple[int | str, float]] = []
    started = time.monotonic()
    while time.monotonic() - started < 30:
        began = time.monotonic()
        try:
            scrape(served.daemon.port, timeout=SCRAPE_BUDGET_S)
            results.append((200, time.monotonic() - began))
        except OSError as exc:
            results.append((type(exc).__name__, time.monotonic() - began))
        served.notifications.drain()
        if time.monotonic() - started >= at_least_s and until():
            break
        time.sleep(max(0.0, 0.2 - (time.monotonic() - began)))
    pings = sum(m == "WATCHDOG=1" for m in served.notifications.seen)
    return Watch(results, pings, time.monotonic() - started)


@pytest.mark.parametrize(("case", "content", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_reload_never_stops_scrapes_or_pings(
    served: Served, case: str, content: Callable[[Served], str], words: list[str]
) -> None:
    daemon = served.daemon
    failures = sample(scrape(daemon.port), "roce_agent_config_reload_failures_total")
    refused: list[dict[str, object]] = []

    daemon.logs.poll()
    daemon.logs.lines.clear()  # what earlier cases logged

    def was_refused() -> bool:
        daemon.logs.poll()
        refused.extend(
            e for e in daemon.logs.lines if str(e["message"]).startswith("reload refused")
        )
        return bool(refused)

    daemon.reload(content(served))
    seen = watch(served, was_refused, at_least_s=DEADLINE_S)
    summary = f"{case}: {len(seen.scrapes)} scrapes in {seen.seconds:.1f} s, {seen.pings} pings"
    assert refused, f"{summary}: no refusal logged"
    assert any(word in str(refused[0]["reason"]) for word in words), refused[0]
    assert len(str(refused[0])) < 60_000, "the refusal is one bounded log line"
    assert all(status == 200 for status, _ in seen.scrapes), (summary, seen.scrapes)
    assert max(took for _, took in seen.scrapes) < SCRAPE_BUDGET_S, (summary, seen.scrapes)
    assert seen.pings >= int(seen.seconds / PING_EVERY_S) - 2, summary
    metrics = scrape(daemon.port)  # the old configuration, still serving, says why
    assert sample(metrics, "roce_agent_config_reload_success") == 0, case
    assert sample(metrics, "roce_agent_config_reload_failures_total") == failures + 1, case
    assert 'roce_device_up{device="leaf1",' in metrics, case
    deadline = time.monotonic() + 5
    while daemon.children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemon.children() == [], f"{case}: the reload worker is still running"
    assert daemon.process.poll() is None, case
    daemon.reloaded(served.good)
    assert sample(scrape(daemon.port), "roce_agent_config_reload_success") == 1, case


def test_sigterm_in_the_middle_of_a_runaway_reload_stops_within_10_s(
    tmp_path: Path,
) -> None:
    with start(tmp_path) as served:
        daemon = served.daemon
        daemon.reload(hooked("hold-gil")(served))
        deadline = time.monotonic() + 10
        while not daemon.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = daemon.children()
        assert workers, "no reload worker started"
        time.sleep(0.5)  # well inside the runaway match
        started = time.monotonic()
        daemon.process.send_signal(signal.SIGTERM)
        code = daemon.process.wait(timeout=10)
        took = time.monotonic() - started
        assert code == 0 and took < 10, (code, took)
        daemon.logs.poll()
        assert any(e["message"] == "stopped" for e in daemon.logs.lines)
        for pid in workers:  # killed with the daemon's stop, not left to run
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_stop_that_hangs_is_ended_by_the_stop_limit(tmp_path: Path) -> None:
    """Whatever holds the graceful stop, the process is gone STOP_LIMIT_S after SIGTERM,
    with every thread's stack on stderr (faulthandler's watchdog thread, which needs no
    interpreter lock)."""
    from agent.app.daemon import STOP_LIMIT_S

    hang = tmp_path / "hang"
    hang.mkdir()
    (hang / "sitecustomize.py").write_text(
        "import time\nimport agent.app.daemon as d\n"
        "d.Daemon.shut_down = lambda self, worker: time.sleep(3600)\n"
    )
    fabric = fabric_on_loopback(tmp_path / "fabric.yml", {"leaf1": free_port()})
    config = tmp_path / "agent.yaml"
    port = free_port()
    config.write_text(good_config(tmp_path, fabric, port))
    env = environment(PYTHONPATH=f"{hang}{os.pathsep}{REPO}")
    with serving(config, port, tmp_path, env) as daemon:
        daemon.logs.wait_for(lambda e: e["message"] == "started", 30)
        started = time.monotonic()
        daemon.process.send_signal(signal.SIGTERM)
        code = daemon.process.wait(timeout=15)
        took = time.monotonic() - started
    stderr = (tmp_path / "stderr.txt").read_text()
    assert code == 1 and STOP_LIMIT_S - 0.5 < took < 10, (code, took)
    assert "Timeout" in stderr and "sitecustomize.py" in stderr, stderr[-3000:]


def test_the_freeze_guard_needs_no_interpreter_lock() -> None:
    """A main loop held by a C call that never returns (a runaway match here): the guard's
    deadline still ends the process, with the stacks on stderr."""
    program = (
        "import re\nfrom agent.app.daemon import FreezeGuard\n"
        "FreezeGuard(1.0).alive()\nre.match(r'(a+)+$', 'a' * 64 + 'b')\n"
    )
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=20
    )
    took = time.monotonic() - started
    assert run.returncode == 1 and took < 10, (run.returncode, took, run.stderr[-2000:])
    assert "Timeout (0:00:01)" in run.stderr and "<string>" in run.stderr
