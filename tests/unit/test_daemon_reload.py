"""The daemon's reload machinery in-process, with real reload workers (child processes):
whatever the loader does in the child (raise, crash, grow, hang), a reload is refused with
the old configuration kept and no worker left running; a good one swaps in; a new exporter
that is built too late is discarded, never swapped in. The whole daemon as a process under
hostile reloads is tests/hostile/test_daemon.py; with real SIGHUPs against the lab,
tests/lab/test_daemon.py."""

from __future__ import annotations

import os
import pickle
import threading
import time
from pathlib import Path

import bcrypt
import pytest

import agent.app.daemon_config as daemon_config
from agent.app.daemon import Daemon, Prepared
from agent.app.daemon_config import Loaded, error_fields, load_config
from agent.app.reload_worker import ReloadWorker
from agent.errors import AgentError, IntentError
from common.errors import MAX_SHOWN

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"
HOOK = REPO / "tests" / "hostile" / "loader_hook"


def make_daemon(tmp_path: Path, extra: str = "") -> Daemon:
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nstate_dir: {tmp_path / 'state'}\nexporter: null\n{extra}")
    return Daemon(config, load_config(config))


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reload workers started from now on carry tests/hostile/loader_hook."""
    monkeypatch.setenv("PYTHONPATH", f"{HOOK}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("ROCE_TEST_LOADER_HOOK", "1")


@pytest.mark.parametrize(
    ("mode", "timeout_s", "words"),
    [
        # A worker that dies or runs out of memory is refused for that, whatever the deadline:
        # a deadline of 60 s keeps a busy machine's slow worker start-up (a CI run: more than
        # 2 s before the hook ran) from turning the case into the deadline's.
        ("exit", 60, "the reload worker died (exit code 3): loader hook: exit 3"),
        ("grow", 60, "MemoryError"),
        ("sleep", 2, "loading took longer than 2 s (reload worker killed)"),
        ("hold-gil", 2, "loading took longer than 2 s (reload worker killed)"),
    ],
)
def test_whatever_the_loader_does_the_reload_is_refused_and_the_worker_gone(
    tmp_path: Path, hooked: None, mode: str, timeout_s: int, words: str
) -> None:
    daemon = make_daemon(tmp_path, f"reload_timeout_s: {timeout_s}\n")
    old = daemon.loaded
    daemon.config_path.write_text(f"# loader-hook: {mode}\n{daemon.config_path.read_text()}")
    daemon.start_reload()
    job = daemon.reloading
    assert job is not None
    started = time.monotonic()
    while daemon.reloading is not None:
        daemon.finish_reload()
        time.sleep(0.05)
    assert time.monotonic() - started < timeout_s + 1.5  # refused by the deadline at the latest
    assert daemon.loaded is old
    assert not daemon.reload_ok and daemon.reload_failures == 1
    assert words in daemon.reload_error, daemon.reload_error
    job.worker.process.wait(5)  # killed (or ended): no worker left behind
    assert not job.worker.alive


def test_a_refusal_names_file_and_line_then_a_good_reload_works(tmp_path: Path) -> None:
    daemon = make_daemon(tmp_path)
    daemon.config_path.write_text("fabric: [unclosed\n")
    daemon.do_reload()
    assert not daemon.reload_ok
    assert daemon.reload_error.startswith(f"{daemon.config_path}:2:1: ")  # YAML: at the end
    daemon.config_path.write_text(f"fabric: {FABRIC}\nmode: enforce\nexporter: null\n")
    daemon.do_reload()
    assert daemon.reload_ok and daemon.loaded.config.mode == "enforce"
    assert daemon.loaded.intent.name == load_config(daemon.config_path).intent.name


def test_a_shard_given_on_the_command_line_wins_in_the_worker_too(tmp_path: Path) -> None:
    from agent.intent.shard import parse_shard

    daemon = make_daemon(tmp_path, "shard: 1/2\n")
    daemon.shard_override = parse_shard("2/3")
    daemon.do_reload()
    assert daemon.reload_ok and str(daemon.loaded.shard) == "2/3"


def test_a_late_exporter_is_discarded_never_swapped_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child answered, but building the new exporter outlives the deadline: refused;
    what the build makes later is discarded (its socket closed), the old one stays."""
    daemon = make_daemon(tmp_path, "reload_timeout_s: 3\n")
    old = daemon.loaded
    release, discarded = threading.Event(), threading.Event()

    class Late(Prepared):
        def discard(self) -> None:
            discarded.set()

    def slow_prepare(loaded: Loaded) -> Prepared:
        release.wait(20)
        return Late(loaded, None, None, False)

    monkeypatch.setattr(daemon, "prepare", slow_prepare)
    daemon.do_reload()
    assert not daemon.reload_ok and "preparing the new configuration took longer than 3 s" in (
        daemon.reload_error
    )
    release.set()
    assert discarded.wait(5)
    assert daemon.loaded is old and daemon.reloading is None


def test_a_loader_bug_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter: null\n")

    def buggy(path: Path) -> object:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(daemon_config, "load_fabric", buggy)
    with pytest.raises(IntentError) as caught:
        load_config(config)
    fields = error_fields(caught.value)
    assert fields["file"] == str(FABRIC)
    assert "ZeroDivisionError: division by zero" in fields["reason"]


def test_refusal_fields_are_one_bounded_log_line() -> None:
    """A value from the file (a 200 000-digit port name) does not make a 200 KB log line."""
    from agent.errors import Problem

    problems = [Problem(None, "", f"port {'1' * 200_000}: invalid")] * 120
    fields = error_fields(IntentError(problems))
    assert len(fields["reason"]) <= daemon_config.FIELD_CHARS
    assert len(fields["problems"]) == MAX_SHOWN + 1  # the error's own line saying how many more
    assert f"and {120 - MAX_SHOWN} more problem(s)" in fields["problems"][-1]
    assert all(len(p) <= daemon_config.FIELD_CHARS for p in fields["problems"])
    many = error_fields(AgentError("\n".join(f"problem {n}" for n in range(500))))
    assert len(many["problems"]) == daemon_config.MAX_PROBLEMS + 1
    assert many["problems"][-1] == f"... and {500 - daemon_config.MAX_PROBLEMS} more"
    assert all(len(p) <= daemon_config.FIELD_CHARS for p in fields["problems"])


def test_what_the_worker_sends_survives_the_trip(tmp_path: Path) -> None:
    """The child pickles what it loaded, the web config's users included; the daemon gets
    the same configuration, with a fresh lock and an empty login cache."""
    web = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(b"scrape", bcrypt.gensalt(4)).decode()
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter: {{listen: '127.0.0.1:0', web_config: {web}}}\n")
    loaded = load_config(config)
    assert loaded.web.basic_auth.check("prometheus", "scrape")  # now remembered
    back = pickle.loads(pickle.dumps(loaded))
    assert back.intent == loaded.intent and back.config == loaded.config
    auth = back.web.basic_auth
    assert not auth.remembers("prometheus", "scrape") and auth.check("prometheus", "scrape")
    worker = ReloadWorker(config, None, 30)
    while (answer := worker.answer()) is None:
        time.sleep(0.05)
    assert isinstance(answer, Loaded) and answer.intent == loaded.intent


def test_a_worker_that_cannot_start_is_a_refused_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process to be had (a process limit, no memory): refused, the daemon runs on."""
    import subprocess

    daemon = make_daemon(tmp_path)

    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    daemon.start_reload()
    assert daemon.reloading is None and not daemon.reload_ok
    assert "cannot start the reload worker" in daemon.reload_error


def test_a_reloaded_insecure_permissions_applies_in_the_daemons_own_process(
    tmp_path: Path,
) -> None:
    """The worker process loads the new agent.yaml; the daemon itself reads credentials later
    (at every connect), so the new file's insecure_permissions must hold here too, and a
    file without it must take it away again."""
    from common import permissions

    daemon = make_daemon(tmp_path)
    assert permissions._override() is None
    try:
        daemon.config_path.write_text(
            f"{daemon.config_path.read_text()}insecure_permissions: true\n"
        )
        daemon.do_reload()
        assert daemon.reload_ok, daemon.reload_error
        assert permissions._override() == f"insecure_permissions: true in {daemon.config_path}"
        daemon.config_path.write_text(daemon.config_path.read_text().replace("true", "false"))
        daemon.do_reload()
        assert daemon.reload_ok and permissions._override() is None
    finally:
        permissions.set_config_override(None)
