"""Reading, diffing and safely changing devices: the push path behind diff, apply and drift.

Per device: connect (retries with backoff on connect errors only — never after a line was
sent), read the state, diff it against the plan, and when asked to apply: render only the
changes, open the platform's transaction (the device rolls back by itself unless confirmed),
read back, confirm only if the readback equals the plan, otherwise roll back. Devices go
canary first, then in batches; a device that fails stops later batches.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import AgentError, CredentialError
from agent.intent import Device, FabricIntent
from agent.plan import Plan, build_plan
from agent.platforms import platform_for
from agent.platforms.base import Connection, Platform, PlatformError
from agent.state import Difference, QosState, diff

log = logging.getLogger("roce_agent")
DEFAULT_STATE_DIR = Path("/var/lib/roce-agent")
CONNECT_RETRIES = 3
CONNECT_BACKOFF_S = 1.0
DEFAULT_PARALLELISM = 32


class Unreachable(AgentError):
    """The device could not be connected to (after retries)."""

    exit_code = 1


class VerifyFailed(PlatformError):
    """After the change the device does not read back as planned."""


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where audit logs and reports live: flag, then $ROCE_AGENT_STATE_DIR, then the default."""
    chosen = override or os.environ.get("ROCE_AGENT_STATE_DIR") or DEFAULT_STATE_DIR
    return Path(chosen)


def operator() -> str:
    """Who runs the agent (the sudo caller when run under sudo)."""
    return os.environ.get("SUDO_USER") or getpass.getuser()


class AuditLog:
    """Append-only JSONL of every change attempt. Holds diffs and results, never a secret."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "audit.jsonl"

    def write(self, **record: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "operator": operator(), **record}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")


@dataclass
class DeviceResult:
    device: str
    platform: str
    result: str  # no-change | changes | applied | failed | unreachable | skipped
    differences: list[Difference] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    session: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    before: QosState | None = None  # the state found before the change (for restores)

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "platform": self.platform,
            "result": self.result,
            "changes": len(self.differences),
            "differences": [d.as_dict() for d in self.differences],
            "lines": self.lines,
            "session": self.session,
            "error": self.error,
            "duration_s": round(self.duration_s, 3),
        }


def check_credentials(devices: Iterable[Device]) -> None:
    """Every secret must be readable before the first connection (nothing half-done)."""
    for device in devices:
        if device.credentials is None:
            raise CredentialError(f"device {device.name}: no credentials")
        device.credentials.resolve_password(device.name)
        device.credentials.check_key(device.name)


def connect(device: Device, platform: Platform) -> Connection:
    """Open a netmiko session, retrying connect errors with exponential backoff."""
    from netmiko import ConnectHandler
    from netmiko.exceptions import NetmikoAuthenticationException, NetmikoTimeoutException

    assert device.credentials is not None
    password = device.credentials.resolve_password(device.name)
    last: Exception | None = None
    for attempt in range(CONNECT_RETRIES):
        try:
            handle = ConnectHandler(
                device_type=platform.netmiko_device_type,
                host=device.host,
                port=device.port,
                username=device.username,
                password=password.get_secret_value() if password else "",
                use_keys=device.credentials.ssh_key is not None,
                key_file=str(device.credentials.ssh_key) if device.credentials.ssh_key else None,
                allow_agent=False,
                fast_cli=True,
                conn_timeout=10,
            )
            return Connection(handle, device.name)
        except NetmikoAuthenticationException as exc:
            raise Unreachable(
                f"{device.name}: authentication failed ({exc.__class__.__name__})"
            ) from None
        except (NetmikoTimeoutException, OSError, EOFError) as exc:
            last = exc
            time.sleep(CONNECT_BACKOFF_S * (2**attempt))
    raise Unreachable(
        f"{device.name}: cannot connect to {device.host}:{device.port} after "
        f"{CONNECT_RETRIES} attempts ({type(last).__name__}: {last})"
    )


def close_quietly(conn: Connection) -> None:
    """Disconnect; a session that already died must not hide the result."""
    try:
        conn.close()
    except Exception as exc:  # any transport error here is moot
        log.debug("closing %s: %s", conn.device, exc)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@dataclass
class Pusher:
    """The push path over one fabric."""

    intent: FabricIntent
    plan: Plan
    audit: AuditLog | None = None
    confirm_timeout_s: int = 300
    include_hosts: bool = False
    hold_before_confirm_s: float = 0.0  # rollback drills: keep the change unconfirmed longer

    @classmethod
    def for_intent(
        cls, intent: FabricIntent, audit_dir: Path | None = None, **options: Any
    ) -> Pusher:
        return cls(
            intent, build_plan(intent), AuditLog(audit_dir) if audit_dir else None, **options
        )

    def select(self, names: Sequence[str]) -> list[Device]:
        """The devices to act on (all switches by default); unknown names are an error."""
        known = {d.name: d for d in self.intent.devices}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise AgentError(
                f"--device: no device named {', '.join(map(repr, unknown))} in fabric "
                f"{self.intent.name}"
            )
        chosen = [known[n] for n in names] if names else list(self.intent.devices)
        if not self.include_hosts:
            chosen = [d for d in chosen if d.role != "host"]
        for device in chosen:
            platform_for(device.platform)  # unsupported platforms fail before any connection
        check_credentials(chosen)
        return chosen

    def _desired(self, device: Device, platform: Platform) -> QosState:
        device_plan = self.plan.device(device.name)
        assert device_plan is not None
        return platform.desired(device_plan)

    def inspect(self, device: Device) -> DeviceResult:
        """Read and diff one device (no change, no session): a dry run of :meth:`apply_one`."""
        return self.apply_one(device, dry_run=True)

    def apply_one(
        self, device: Device, dry_run: bool = False, target: QosState | None = None
    ) -> DeviceResult:
        """Bring one device to the plan (or to ``target``, e.g. the state it had before a
        rollout) inside a self-rolling-back transaction."""
        started = time.monotonic()
        platform = platform_for(device.platform)
        result = DeviceResult(device.name, device.platform, "no-change")
        try:
            conn = connect(device, platform)
        except Unreachable as exc:
            result.result, result.error = "unreachable", str(exc)
            if not dry_run:
                self._audit(result)
            return result
        try:
            desired = target if target is not None else self._desired(device, platform)
            actual = platform.read_state(conn)
            result.before = actual
            result.differences = diff(device.name, desired, actual, platform.managed)
            if not result.differences:
                return result  # idempotent: no session opened
            result.lines = platform.render_changes(desired, actual)
            if dry_run:
                result.result = "changes"
                return result
            with platform.transaction(conn, result.lines, self.confirm_timeout_s) as txn:
                result.session = txn.name
                if self.hold_before_confirm_s:
                    time.sleep(self.hold_before_confirm_s)
                readback = platform.read_state(conn)
                remaining = diff(device.name, desired, readback, platform.managed)
                if remaining:
                    raise VerifyFailed(
                        f"{device.name}: readback differs from the plan after the change "
                        f"({len(remaining)} setting(s), first: {remaining[0]})"
                    )
                platform.confirm(conn, txn)
            result.result = "applied"
        except Exception as exc:
            result.result, result.error = "failed", _one_line(exc)
        finally:
            close_quietly(conn)
            result.duration_s = time.monotonic() - started
            if not dry_run and result.result != "no-change":
                self._audit(result)
        return result

    def restore(self, device: Device, before: QosState) -> DeviceResult:
        """Put a device back to the state it had (rollback of a confirmed rollout step)."""
        return self.apply_one(device, target=before)

    def _audit(self, result: DeviceResult) -> None:
        if self.audit is None:
            return
        self.audit.write(
            fabric=self.intent.name,
            device=result.device,
            platform=result.platform,
            session=result.session,
            diff=[d.as_dict() for d in result.differences],
            lines=result.lines,
            result=result.result,
            error=result.error,
            duration_s=round(result.duration_s, 3),
        )

    def inspect_all(
        self, devices: Sequence[Device], parallelism: int = DEFAULT_PARALLELISM
    ) -> list[DeviceResult]:
        with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(devices)))) as pool:
            return list(pool.map(self.inspect, devices))

    def apply_all(
        self,
        devices: Sequence[Device],
        canary: int = 1,
        batch_size: int = 8,
        parallelism: int = DEFAULT_PARALLELISM,
        dry_run: bool = False,
        on_result: Callable[[DeviceResult], None] | None = None,
    ) -> list[DeviceResult]:
        """Canary devices first (one by one), then batches in parallel; stop on failure."""
        if canary < 0 or batch_size < 1 or parallelism < 1:
            raise AgentError("--canary must be >= 0, --batch-size and parallelism >= 1")
        results: list[DeviceResult] = []
        remaining = list(devices)
        stop_reason: str | None = None
        canaries, remaining = remaining[:canary], remaining[canary:]
        for device in canaries:
            result = self.apply_one(device, dry_run)
            results.append(result)
            if on_result:
                on_result(result)
            if result.result in ("failed", "unreachable"):
                stop_reason = f"canary {device.name} {result.result}"
                break
        while remaining and stop_reason is None:
            batch, remaining = remaining[:batch_size], remaining[batch_size:]
            workers = max(1, min(parallelism, len(batch)))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for result in pool.map(lambda d: self.apply_one(d, dry_run), batch):
                    results.append(result)
                    if on_result:
                        on_result(result)
            failed = [r.device for r in results[-len(batch) :] if r.result == "failed"]
            if failed:
                stop_reason = f"{', '.join(failed)} failed"
        done = {r.device for r in results}
        for device in devices:
            if device.name not in done:
                skipped = DeviceResult(
                    device.name, device.platform, "skipped", error=f"not started: {stop_reason}"
                )
                results.append(skipped)
                if on_result:
                    on_result(skipped)
        return results
