"""The fault drill: break a rollout on purpose, at every step, and check what is left.

Runs only against a lab built by ``roce-agent lab up`` (its ``state.json`` sits next to the
fabric file): the faults are the lab management plane's own knobs (``python -m lab.mgmt``:
``faults.json`` + SIGUSR1, SIGUSR2 rotates the host key), reached by signal and file, never
over SSH, so nothing here can touch a real switch. The agent under test runs as a user runs
it — ``python -m agent apply`` in a subprocess — with ``ROCE_AGENT_KILL_AT`` for the kill
points.

Each row: every switch back to the state found at the start ("old"), inject the fault, run
``apply`` (canary 1, batches of 2, a short commit timer), wait until any orphaned timer has
fired, then judge:

- every switch is entirely old or entirely new (the intent), never in between;
- no switch reported ``applied`` (output or audit) is anything but new, and no switch that
  changed is reported as anything else;
- every switch that changed has an audit record from that run, and ``roce-agent audit
  --incomplete`` lists an attempt that never finished (exit 1) until the re-run reconciles
  it (exit 0);
- the exit code is the expected one (-9 for SIGKILL, 1 for a device that failed);
- after the fault is gone, a plain re-run exits 0 with every switch new and saved (``show
  running-config diffs`` empty: a reload would not bring the old QoS back).

The rows are the same on every platform; the management-plane faults fire on the lines where
that platform's change goes live under its timer and where it is confirmed
(:data:`CHANGE_LINES`), and the drill runs on the platform of its canary (the fabric's first
switch). One table per platform, a row per (platform, fault).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agent.device.failures import NOT_CONNECTED
from agent.device.fanout import results_or_raise, run_each
from agent.device.platforms import platform_for
from agent.device.push import Pusher, Unreachable, close_quietly, connect
from agent.device.state import QosState, diff
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.model import Device

REPO = Path(__file__).resolve().parents[2]
FAULTS_FILE = "faults.json"
KILLED = -signal.SIGKILL
# netmiko's send_command gives up after 10 s (read_timeout): the slow switch answers 10x later.
SLOW_DELAY_S = 100.0
# How often a pending commit timer is polled: its end is what the judge waits for.
SETTLE_POLL_S = 0.2
Outcome = TypeVar("Outcome")


class DrillError(AgentError):
    """The drill cannot run here (not a lab fabric, lab not up)."""


@dataclass(frozen=True)
class ChangeLines:
    """The lines (regexes on what the driver sends) where a platform's change goes live under
    its rollback timer, and where it is made permanent: the drill's SSH faults fire on them."""

    commit: str
    confirm: str


CHANGE_LINES = {
    # configure session NAME ... commit timer T; later `configure session NAME commit`.
    "arista_eos": ChangeLines(r"^commit timer", r"^configure session \S+ commit$"),
    # GCU apply-patch goes live at once (its rollback timer is armed right after); deleting
    # the checkpoint confirms (the timer's rollback has nothing to go back to after it).
    "sonic": ChangeLines(r"^sudo config apply-patch ", r"^sudo config delete-checkpoint "),
    # nv config apply --confirm Ns goes live under NVUE's own timer; --confirm-yes keeps it.
    "cumulus_nvue": ChangeLines(
        r"^nv config apply --confirm \d", r"^nv config apply --confirm-yes"
    ),
    # configure replace FILE commit-timeout T goes live under its timer; configure replace
    # commit (one line with the checkpoint's deletion) keeps it.
    "cisco_nxos": ChangeLines(
        r"^configure replace bootflash:\S+ commit-timeout \d", r"^configure replace commit"
    ),
}


@dataclass
class LabControl:
    """The lab's fault knobs, found through ``state.json`` next to the lab's fabric file."""

    fabric: Path
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_fabric(cls, fabric: Path) -> LabControl:
        path = fabric.resolve().parent / "state.json"
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise DrillError(
                f"{fabric}: the fault drill runs only on a lab fabric (written by `roce-agent "
                f"lab up`); Expected: {path} Actual: missing or unreadable"
            ) from None
        if state.get("phase") != "up":
            raise DrillError(f"{fabric}: lab {state.get('lab')} is not up")
        return cls(fabric.resolve(), state)

    def _pid(self, switch: str) -> int:
        record = self.state.get("processes", {}).get(f"{switch}:mgmt")
        if not record:
            raise DrillError(f"lab has no management process for {switch}")
        return int(record["pid"])

    def _dir(self, switch: str) -> Path:
        return self.fabric.parent / f"{switch}-mgmt"

    def log_size(self, switch: str) -> int:
        try:
            return (self._dir(switch) / "mgmt.log").stat().st_size
        except OSError:
            return 0

    def log_since(self, switch: str, offset: int) -> str:
        try:
            with (self._dir(switch) / "mgmt.log").open("rb") as handle:
                handle.seek(offset)
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def set_faults(self, switch: str, **knobs: Any) -> None:
        path = self._dir(switch) / FAULTS_FILE
        tmp = path.with_name(f".{FAULTS_FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(knobs), encoding="utf-8")
        os.replace(tmp, path)
        os.kill(self._pid(switch), signal.SIGUSR1)
        time.sleep(0.2)  # the process reloads from its event loop

    def clear_faults(self, switch: str) -> None:
        self.set_faults(switch)

    def rotate_host_key(self, switch: str, host: str, port: int) -> None:
        before = scan_host_key(host, port)
        os.kill(self._pid(switch), signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while scan_host_key(host, port) == before:
            if time.monotonic() > deadline:
                raise DrillError(f"{switch}: host key did not change after SIGUSR2")
            time.sleep(0.1)

    def repin_host_key(self, switch: str, old: str, new: str) -> None:
        """What the operator does after a legitimate re-key: the fabric file pins the new key."""
        text = self.fabric.read_text(encoding="utf-8")
        if old not in text:
            raise DrillError(f"{self.fabric}: no pinned key of {switch} to replace")
        self.fabric.write_text(text.replace(old, new), encoding="utf-8")


def scan_host_key(host: str, port: int) -> str:
    """The key a server presents (``ssh-keyscan``'s job), as ``TYPE BASE64``."""
    import paramiko  # type: ignore[import-untyped]

    with socket.create_connection((host, port), timeout=10) as sock:
        transport = paramiko.Transport(sock)
        try:
            transport.start_client(timeout=10)
            key = transport.get_remote_server_key()
            return f"{key.get_name()} {base64.b64encode(key.asbytes()).decode()}"
        finally:
            transport.close()


@dataclass
class Row:
    """One drill: what to break, how to undo it, which exit code the broken run must give."""

    name: str
    kind: str  # kill | fault
    env: dict[str, str] = field(default_factory=dict)
    inject: Callable[[Drill], None] | None = None
    undo: Callable[[Drill], None] | None = None
    expected_exit: int = 1
    evidence: str | None = None  # must appear in the canary's management log: it really fired
    canary_error: str | None = None  # must appear in the canary's reported error

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


@dataclass
class RowResult:
    name: str
    platform: str = "arista_eos"
    exit_code: int | None = None
    expected_exit: int = 1
    reported: dict[str, str] = field(default_factory=dict)
    after_fault: dict[str, str] = field(default_factory=dict)
    audited: dict[str, str] = field(default_factory=dict)
    incomplete_exit: int | None = None  # `audit --incomplete` after the broken run
    rerun_exit: int | None = None
    after_rerun: dict[str, str] = field(default_factory=dict)
    incomplete_after_rerun: int | None = None
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "row": self.name,
            "passed": self.passed,
            "exit": self.exit_code,
            "expected_exit": self.expected_exit,
            "reported": self.reported,
            "after_fault": self.after_fault,
            "audit": self.audited,
            "audit_incomplete_exit": self.incomplete_exit,
            "rerun_exit": self.rerun_exit,
            "after_rerun": self.after_rerun,
            "audit_incomplete_exit_after_rerun": self.incomplete_after_rerun,
            "problems": self.problems,
            "duration_s": round(self.duration_s, 1),
        }


def _states(states: dict[str, str]) -> str:
    return " ".join(f"{d}={s}" for d, s in states.items()) or "-"


def matrix_rows(results: list[RowResult]) -> list[dict[str, str]]:
    """The drill matrix, one line per row, as printed (table, Markdown, test output)."""
    return [
        {
            "platform": r.platform,
            "drill": r.name,
            "exit": f"{r.exit_code} (want {r.expected_exit})",
            "after fault": _states(r.after_fault),
            "reported": _states(r.reported),
            "audit": _states(r.audited),
            "incomplete": f"{r.incomplete_exit} then {r.incomplete_after_rerun}",
            "re-run": f"{r.rerun_exit}: {_states(r.after_rerun)}",
            "verdict": "PASS" if r.passed else "FAIL: " + "; ".join(r.problems),
        }
        for r in results
    ]


def format_matrix(results: list[RowResult]) -> str:
    """Plain-text table (for logs and pytest output)."""
    rows = matrix_rows(results)
    if not rows:
        return "(no drill rows)"
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


class Drill:
    """Runs the rows against a lab fabric's switches; its platform is the canary's."""

    def __init__(
        self,
        fabric: Path,
        state_dir: Path,
        confirm_timeout_s: int = 5,
        password_env: str = "ROCE_LAB_PASSWORD",
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.fabric = fabric.resolve()
        self.lab = LabControl.for_fabric(self.fabric)
        self.state_dir = state_dir
        self.confirm_timeout_s = confirm_timeout_s
        self.password_env = password_env
        self.log = log or (lambda _: None)
        self.notes: dict[str, str] = {}
        self._reload()
        self.old: dict[str, QosState] = {}

    def _reload(self) -> None:
        intent = load_fabric(self.fabric).intent
        self.pusher = Pusher.for_intent(intent)
        self.switches: list[Device] = self.pusher.select(())
        self.canary = self.switches[0].name
        self.platform = self.switches[0].platform

    # ------------------------------------------------------------------ state

    def _read(self, device: Device) -> QosState | str:
        platform = platform_for(device.platform)
        try:
            conn = connect(device, platform)
        except Unreachable as exc:
            return f"unreachable ({exc})"
        try:
            return platform.read_state(conn)
        finally:
            close_quietly(conn)

    def classify(self, settle_s: float | None = None) -> dict[str, str]:
        """old | new | mixed(N) | unreadable, per switch.

        With ``settle_s``, each switch is first given up to that long for any commit timer
        left behind to fire (or be settled), polled on the connection the state is then read
        from: a switch's state depends on its own sessions only, and one SSH login per switch
        instead of one per poll keeps the drill's CPU for the agent under test.
        """
        deadline = time.monotonic() + (settle_s or 0.0)

        def one(device: Device) -> str:
            actual = self._settled_read(device, deadline) if settle_s else self._read(device)
            if isinstance(actual, str):
                return "unreadable"
            platform = platform_for(device.platform)
            device_plan = self.pusher.plan.device(device.name)
            assert device_plan is not None
            desired = platform.desired(device_plan)
            if not diff(device.name, desired, actual, platform.managed):
                return "new"
            if not diff(device.name, self.old[device.name], actual, platform.managed):
                return "old"
            remaining = diff(device.name, desired, actual, platform.managed)
            return f"mixed({len(remaining)})"

        return results_or_raise(self._on_every_switch(one))

    def unsaved(self) -> dict[str, str]:
        """Switches whose running config a reload would lose (or that could not be read):
        switch -> the first unsaved line or why not read."""

        def one(device: Device) -> str | None:
            platform = platform_for(device.platform)
            try:
                conn = connect(device, platform)
            except Unreachable as exc:
                return f"unreachable ({exc})"
            try:
                lines = platform.unsaved(conn)
            except Exception as exc:
                return f"unreadable ({exc})"
            finally:
                close_quietly(conn)
            return lines[0] if lines else None

        found = results_or_raise(self._on_every_switch(one))
        return {name: why for name, why in found.items() if why is not None}

    def snapshot_old(self) -> None:
        for device in self.switches:
            state = self._read(device)
            if isinstance(state, str):
                raise DrillError(f"{device.name}: cannot read the starting state: {state}")
            self.old[device.name] = state

    def reset(self) -> None:
        """Every switch back to its starting state (through the push path, in parallel)."""

        def one(device: Device) -> None:
            result = self.pusher.apply_one(device, target=self.old[device.name])
            if result.result not in ("applied", "no-change"):
                raise DrillError(f"{device.name}: reset failed: {result.result} {result.error}")

        results_or_raise(self._on_every_switch(one))

    def _on_every_switch(self, work: Callable[[Device], Outcome]) -> dict[str, Outcome | Exception]:
        """``work`` on every switch side by side, one session each (a lab fabric is small, and
        each settled read waits on its own switch's clock: the waits overlap); switch name ->
        its outcome."""
        return run_each({d.name: d for d in self.switches}, work, parallelism=None)

    def _settled_read(self, device: Device, deadline: float) -> QosState | str:
        """The switch's state once no change on it waits for a confirm or its timer, or at
        ``deadline`` whatever it is then. Unreachable or unreadable: retried until then."""
        platform = platform_for(device.platform)
        while True:
            try:
                conn = connect(device, platform)
            except Unreachable as exc:
                if time.monotonic() >= deadline:
                    return f"unreachable ({exc})"
                time.sleep(SETTLE_POLL_S)
                continue
            try:
                # A live session rolls back on the switch's own clock: poll its session list
                # on this connection until none is live (no new login per poll).
                while time.monotonic() < deadline and any(
                    s.live for s in platform.read_sessions(conn)
                ):
                    time.sleep(SETTLE_POLL_S)
                return platform.read_state(conn)
            except Exception as exc:  # the connection died under the poll: log in again
                if time.monotonic() >= deadline:
                    return f"unreadable ({exc})"
            finally:
                close_quietly(conn)
            time.sleep(SETTLE_POLL_S)

    def _settle_s(self) -> float:
        """How long a timer left behind can still run: the commit timer plus margin."""
        return self.confirm_timeout_s + 1.5

    # ------------------------------------------------------------------ runs

    def apply(
        self, env: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], dict[str, str]]:
        argv = [
            sys.executable, "-m", "agent", "apply", str(self.fabric), "--yes",
            "--output", "json", "--canary", "1", "--batch-size", "2",
            "--confirm-timeout", f"{self.confirm_timeout_s}s", "--state-dir", str(self.state_dir),
        ]  # fmt: skip
        # A kill point set in the caller's environment must not leak into the re-runs.
        full_env = {k: v for k, v in os.environ.items() if k != "ROCE_AGENT_KILL_AT"}
        full_env.update(env or {})
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, cwd=REPO, env=full_env
        )
        reported: dict[str, str] = {}
        errors: dict[str, str] = {}
        with contextlib.suppress(ValueError, KeyError, TypeError):  # killed runs print nothing
            devices = json.loads(done.stdout)["devices"]
            reported = {d["device"]: d["result"] for d in devices}
            errors = {d["device"]: str(d.get("error") or "") for d in devices}
        return done.returncode, reported, errors

    def _start_audit_incomplete(self) -> subprocess.Popen[str]:
        """``roce-agent audit --incomplete`` (exit 1 while an attempt has no result record).

        It reads only the audit log, final once the apply exited: it runs while the switches
        are read, instead of after."""
        return subprocess.Popen(
            [sys.executable, "-m", "agent", "audit", "--incomplete", "--output", "json",
             "--state-dir", str(self.state_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
        )  # fmt: skip

    @staticmethod
    def _wait(process: subprocess.Popen[str], timeout: float = 60) -> int:
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise

    def _audit_lines(self) -> list[dict[str, Any]]:
        path = self.state_dir / "audit.jsonl"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except ValueError:
                records.append({"unparsable": line[:80]})
        return records

    @staticmethod
    def _audit_claims(records: list[dict[str, Any]]) -> dict[str, str]:
        """Per device, what the audit says happened last (``intent`` when only announced)."""
        claims: dict[str, str] = {}
        for record in records:
            device = record.get("device")
            if not isinstance(device, str):
                continue
            result = record.get("result")
            claims[device] = str(result) if result else str(record.get("record", "intent"))
        return claims

    # ------------------------------------------------------------------ one row

    def run_row(self, row: Row) -> RowResult:
        started = time.monotonic()
        outcome = RowResult(row.name, self.platform, expected_exit=row.expected_exit)
        self.log(f"drill {row.name}: reset")
        self.reset()
        before = self.classify()
        audit_from = len(self._audit_lines())
        log_from = self.lab.log_size(self.canary)
        errors = self._broken_run(row, outcome)
        self._check_fault_fired(row, outcome, errors, log_from)
        records = self._audit_lines()[audit_from:]
        outcome.audited = self._audit_claims(records)
        judge(outcome, before, records)
        announced = [d for d, claim in outcome.audited.items() if claim == "intent"]
        if announced and outcome.incomplete_exit != 1:
            outcome.problems.append(
                f"audit --incomplete exit {outcome.incomplete_exit} with an unfinished attempt "
                f"on {', '.join(announced)}, want 1"
            )
        self._rerun(outcome)
        outcome.duration_s = time.monotonic() - started
        return outcome

    def _broken_run(self, row: Row, outcome: RowResult) -> dict[str, str]:
        """The fault injected, ``apply`` run through it and the fault undone; then every switch
        read once its timers had their time, beside ``audit --incomplete``. The devices'
        reported errors."""
        try:
            if row.inject:
                row.inject(self)
            self.log(f"drill {row.name}: broken apply")
            outcome.exit_code, outcome.reported, errors = self.apply(row.env)
        finally:
            if row.undo:
                row.undo(self)
        audit = self._start_audit_incomplete()
        try:
            outcome.after_fault = self.classify(settle_s=self._settle_s())
        finally:
            outcome.incomplete_exit = self._wait(audit)
        return errors

    def _check_fault_fired(
        self, row: Row, outcome: RowResult, errors: dict[str, str], log_from: int
    ) -> None:
        """The canary's error or its management log shows the fault really happened."""
        if row.canary_error and row.canary_error not in errors.get(self.canary, ""):
            outcome.problems.append(f"{self.canary} error lacks {row.canary_error!r}")
        if row.evidence and row.evidence not in self.lab.log_since(self.canary, log_from):
            outcome.problems.append(f"the fault never fired ({row.evidence!r} not logged)")

    def _rerun(self, outcome: RowResult) -> None:
        """The fault gone, a plain re-run must reconcile every attempt and leave every switch
        new and saved."""
        self.log(f"drill {outcome.name}: re-run")
        outcome.rerun_exit, _, _ = self.apply()
        audit = self._start_audit_incomplete()
        try:
            outcome.after_rerun = self.classify()
        finally:
            outcome.incomplete_after_rerun = self._wait(audit)
        if outcome.incomplete_after_rerun != 0:
            outcome.problems.append(
                f"audit --incomplete exit {outcome.incomplete_after_rerun} after the re-run "
                "(attempts never reconciled), want 0"
            )
        if outcome.rerun_exit != 0:
            outcome.problems.append(f"re-run exit {outcome.rerun_exit}, want 0")
        not_new = [d for d, s in outcome.after_rerun.items() if s != "new"]
        if not_new:
            outcome.problems.append(f"not new after the re-run: {', '.join(not_new)}")
        for device, line in self.unsaved().items():  # a reload must not bring the old back
            outcome.problems.append(f"{device} not saved after the re-run ({line})")

    def run(self, rows: list[Row]) -> list[RowResult]:
        self.snapshot_old()
        results = []
        try:
            for row in rows:
                results.append(self.run_row(row))
                self.log(format_matrix(results[-1:]).splitlines()[-1])
        finally:
            for device in self.switches:
                self.lab.clear_faults(device.name)
        return results


def judge(outcome: RowResult, before: dict[str, str], records: list[dict[str, Any]]) -> None:
    """Add to ``outcome.problems`` what the broken run got wrong (see the module doc)."""
    problems = outcome.problems
    if outcome.exit_code != outcome.expected_exit:
        problems.append(f"exit {outcome.exit_code}, want {outcome.expected_exit}")
    for device, state in outcome.after_fault.items():
        if state not in ("old", "new"):
            problems.append(f"{device} is {state}")
        changed = before.get(device) == "old" and state == "new"
        problems += _report_problems(device, state, outcome.reported.get(device), changed)
        problems += _audit_problems(device, state, outcome.audited.get(device), changed)
    if any("unparsable" in r for r in records):
        problems.append("audit log has a torn line")


def _report_problems(device: str, state: str, said: str | None, changed: bool) -> list[str]:
    """What the run's output claims about a switch against what it is."""
    if said == "applied" and state != "new":
        return [f"{device} reported applied but is {state}"]
    if said is not None and said != "applied" and changed:
        return [f"{device} reported {said} but changed to new"]
    return []


def _audit_problems(device: str, state: str, claim: str | None, changed: bool) -> list[str]:
    """What the audit log claims about a switch against what it is."""
    problems = []
    if claim == "applied" and state != "new":
        problems.append(f"audit says {device} applied but it is {state}")
    if changed and claim is None:
        problems.append(f"{device} changed with no audit record")
    elif changed and claim in ("failed", *NOT_CONNECTED, "skipped", "rolled-back"):
        problems.append(f"audit says {device} {claim} but it changed to new")
    return problems


# ---------------------------------------------------------------------- the rows


def _fault(switch_of: Callable[[Drill], str], **knobs: Any) -> dict[str, Any]:
    def inject(drill: Drill) -> None:
        drill.lab.set_faults(switch_of(drill), **knobs)

    def undo(drill: Drill) -> None:
        drill.lab.clear_faults(switch_of(drill))

    return {"inject": inject, "undo": undo}


def _canary(drill: Drill) -> str:
    return drill.canary


def _rotate(drill: Drill) -> None:
    device = drill.switches[0]
    assert device.host is not None
    drill.notes["old_key"] = scan_host_key(device.host, device.port)
    drill.lab.rotate_host_key(device.name, device.host, device.port)


def _repin(drill: Drill) -> None:
    device = drill.switches[0]
    assert device.host is not None
    new_key = scan_host_key(device.host, device.port)
    drill.lab.repin_host_key(device.name, drill.notes["old_key"], new_key)
    drill._reload()


def change_lines(platform: str) -> ChangeLines:
    """Where ``platform``'s change goes live and is confirmed (DrillError for one the drill
    does not know)."""
    lines = CHANGE_LINES.get(platform)
    if lines is None:
        raise DrillError(
            f"the fault drill has no rows for platform {platform!r}; "
            f"Expected: one of {', '.join(CHANGE_LINES)}"
        )
    return lines


def default_rows(slow_delay_s: float = SLOW_DELAY_S, platform: str = "arista_eos") -> list[Row]:
    """The matrix of issue #11 for ``platform``: kill points, then link and management
    failures on the lines of its transaction."""
    lines = change_lines(platform)

    def kill(point: str, at_canary: bool = True) -> Row:
        env_value = f"{point}@{{canary}}" if at_canary else point
        return Row(f"kill {point}", "kill", {"ROCE_AGENT_KILL_AT": env_value}, None, None, KILLED)

    rows = [
        kill("after-intent"),
        kill("in-session"),
        kill("after-commit"),
        kill("before-save"),
        kill("after-confirm"),
        kill("mid-batch", at_canary=False),
    ]
    cut_before = _fault(_canary, cut_on=lines.commit, cut_when="before")
    cut_after = _fault(_canary, cut_on=lines.confirm, cut_when="after")
    restart = _fault(_canary, restart_on=lines.commit, restart_down_s=2)
    slow = _fault(_canary, delay_s=slow_delay_s, slow_on=lines.commit)
    rows += [
        Row("ssh cut before commit", "fault", **cut_before, evidence="fault: connection cut"),
        # The confirm ran, its reply is lost: the agent must find out the truth on a fresh
        # connection and report applied (exit 0), not "failed" while the change is live.
        Row(
            "ssh cut after confirm (reply lost)",
            "fault",
            **cut_after,
            expected_exit=0,
            evidence="fault: connection cut after",
        ),
        Row("mgmt plane restart in session", "fault", **restart, evidence="fault: management"),
        Row(
            f"slow switch (commit reply +{slow_delay_s:g}s)",
            "fault",
            **slow,
            evidence="fault: reply to",
        ),
        Row(
            f"slow switch (every reply +{slow_delay_s:g}s)",
            "fault",
            **_fault(_canary, delay_s=slow_delay_s),
            evidence="fault: reply to",
            canary_error="did not answer in time",
            # the canary was not reached, so nothing was: the command could not do its job
            expected_exit=2,
        ),
        Row(
            "wrong credentials",
            "fault",
            env={"ROCE_LAB_PASSWORD": "wrong-password-for-drill"},
            canary_error="authentication failed",
            expected_exit=2,
        ),
        Row(
            "changed host key",
            "fault",
            inject=_rotate,
            undo=_repin,
            evidence="host key rotated",
            canary_error="has changed",
            expected_exit=2,
        ),
    ]
    return rows


def resolve_rows(drill: Drill, rows: list[Row]) -> list[Row]:
    """Fill ``{canary}`` in kill point targets."""
    for row in rows:
        row.env = {k: v.replace("{canary}", drill.canary) for k, v in row.env.items()}
    return rows


def select_rows(
    names: list[str] | None, slow_delay_s: float = SLOW_DELAY_S, platform: str = "arista_eos"
) -> list[Row]:
    rows = default_rows(slow_delay_s, platform)
    if not names:
        return rows
    known = {r.name: r for r in rows}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise DrillError(
            f"fault_drill.rows: unknown row(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(known)}"
        )
    return [known[n] for n in names]
