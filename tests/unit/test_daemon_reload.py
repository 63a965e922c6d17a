"""The daemon's reload machinery in-process: whatever the loaders do (raise anything, hang),
a reload is refused and the old configuration stays; a late result after a timeout is
discarded. The subprocess version with real SIGHUPs is tests/lab/test_daemon.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import agent.app.daemon as daemon_module
from agent.app.daemon import Daemon, Loaded, error_fields, load_config
from agent.errors import IntentError

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"


def make_daemon(tmp_path: Path) -> Daemon:
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nstate_dir: {tmp_path / 'state'}\nexporter: null\n")
    return Daemon(config, load_config(config))


def wait_finished(daemon: Daemon, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while daemon._reload_thread is not None and time.monotonic() < deadline:
        daemon.finish_reload()
        time.sleep(0.02)
    assert daemon._reload_thread is None


@pytest.mark.parametrize(
    "error",
    [MemoryError(), RecursionError("maximum recursion depth exceeded"), KeyError("x"),
     ValueError("speed above 800G"), SystemExit(1)],
    ids=lambda e: type(e).__name__,
)  # fmt: skip
def test_any_exception_is_a_refused_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    daemon = make_daemon(tmp_path)
    old = daemon.loaded

    def explode(path: Path) -> Loaded:
        raise error

    monkeypatch.setattr(daemon_module, "load_config", explode)
    daemon.start_reload()
    wait_finished(daemon)
    assert daemon.loaded is old
    assert not daemon.reload_ok and daemon.reload_failures == 1
    assert type(error).__name__ in daemon.reload_error or str(error) in daemon.reload_error


def test_a_hanging_load_is_refused_and_its_late_result_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = make_daemon(tmp_path)
    old = daemon.loaded
    release = threading.Event()
    real_load = load_config

    def slow(path: Path) -> Loaded:
        release.wait(10)
        return real_load(path)

    monkeypatch.setattr(daemon_module, "load_config", slow)
    monkeypatch.setattr(daemon_module, "RELOAD_TIMEOUT_S", 0.3)
    daemon.start_reload()
    thread = daemon._reload_thread
    assert thread is not None
    wait_finished(daemon)
    assert not daemon.reload_ok and "longer than 0.3 s" in daemon.reload_error
    release.set()
    thread.join(5)
    daemon.finish_reload()
    assert daemon.loaded is old and not daemon.reload_ok  # the late success did not sneak in


def test_a_loader_bug_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter: null\n")

    def buggy(path: Path) -> object:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(daemon_module, "load_fabric", buggy)
    with pytest.raises(IntentError) as caught:
        load_config(config)
    fields = error_fields(caught.value)
    assert fields["file"] == str(FABRIC)
    assert "ZeroDivisionError: division by zero" in fields["reason"]


def test_a_good_reload_after_a_refused_one(tmp_path: Path) -> None:
    daemon = make_daemon(tmp_path)
    daemon.config_path.write_text("fabric: [unclosed\n")
    daemon.do_reload()
    assert not daemon.reload_ok
    assert daemon.reload_error.startswith(f"{daemon.config_path}:2:1: ")  # YAML: at the end
    daemon.config_path.write_text(f"fabric: {FABRIC}\nmode: enforce\nexporter: null\n")
    daemon.do_reload()
    assert daemon.reload_ok and daemon.loaded.config.mode == "enforce"
