"""Opening a device's SSH session within one budget, and saying in one line why it failed.

Owns:

- **the connect budget**: TCP connect, the SSH banner, the key exchange and host key check,
  authentication and the shell channel, all within one deadline (``roce-agent
  --connect-timeout``, agent.yaml ``connect_timeout_s``; default :data:`CONNECT_TIMEOUT_S`),
  then the CLI's first prompt within the same time again. Quick refusals (nothing listening
  yet, a peer that drops the connection before its banner) are retried with backoff *inside*
  the budget; a timeout, a host key or an authentication failure is never retried. At the
  deadline the socket is shut down, whatever phase paramiko is in, and every netmiko read of
  the session set-up is cut to the time left: a device that never speaks SSH costs the
  budget, one that logs in and never prompts twice the budget (plus a few hundred
  milliseconds each);
- **the classification** of a failure (:mod:`agent.device.failures`): unreachable, timed out,
  protocol error, host key unreadable / unknown / changed, authentication failed (naming the
  user and where the secret came from, never the secret);
- **what a peer may send**: before its SSH version line, at most
  :data:`MAX_PRE_BANNER_LINES` lines of at most :data:`MAX_BANNER_LINE` bytes (OpenSSH's
  limits, ``ssh.h``/``kex.c``: ``SSH_MAX_BANNER_LEN``, ``SSH_MAX_PRE_BANNER_LINES``;
  paramiko's own banner read has no bound); in reply to one command, at most
  :data:`MAX_REPLY_BYTES` (netmiko keeps every byte until the prompt shows);
- **where paramiko's and netmiko's own log records go**: into the agent's logger
  (``roce_agent.ssh``) at debug level, so they are shown with ``--debug`` and never printed
  raw (paramiko logs a traceback at ERROR for every failed banner read).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agent.device.failures import (
    AUTH_FAILED,
    PROTOCOL_ERROR,
    TIMED_OUT,
    UNREACHABLE,
    CommandFailed,
    Unreachable,
    describe,
)
from agent.device.hostkeys import (
    CheckedHandle,
    Expectation,
    HostKeyError,
    checked_netmiko,
    expectation,
)
from agent.device.platforms.base import Connection, Platform
from agent.errors import AgentError, printable
from agent.intent.model import Device

log = logging.getLogger("roce_agent.ssh")

CONNECT_TIMEOUT_S = 10.0
MAX_CONNECT_TIMEOUT_S = 600.0
# Quick refusals are retried after 0.5 s, 1 s, 2 s, … while the budget lasts; an attempt is
# not started with less than this left (it could only time out).
RETRY_BACKOFF_S = 0.5
MIN_ATTEMPT_S = 0.5
MAX_BANNER_LINE = 8192  # OpenSSH ssh.h SSH_MAX_BANNER_LEN
MAX_PRE_BANNER_LINES = 1024  # OpenSSH ssh.h SSH_MAX_PRE_BANNER_LINES
MAX_REPLY_BYTES = 16 * 1024 * 1024


# --------------------------------------------------------------------------- settings


@dataclass
class Budget:
    """The process-wide connect budget (the command line or agent.yaml sets it)."""

    connect_timeout_s: float = CONNECT_TIMEOUT_S


_budget = Budget()


def configure(*, connect_timeout_s: float | None = None) -> None:
    """Set what ``--connect-timeout`` (or agent.yaml's ``connect_timeout_s``) asked for."""
    if connect_timeout_s is None:
        return
    if not 0 < connect_timeout_s <= MAX_CONNECT_TIMEOUT_S:
        raise AgentError(
            f"connect timeout: Expected: more than 0 s and at most {MAX_CONNECT_TIMEOUT_S:g} s "
            f"Actual: {connect_timeout_s:g} s"
        )
    _budget.connect_timeout_s = connect_timeout_s


def connect_timeout_s() -> float:
    return _budget.connect_timeout_s


# --------------------------------------------------------------------------- library logs


class _IntoAgentLog(logging.Handler):
    """paramiko's and netmiko's records, re-logged by the agent's logger at debug level."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log.debug("%s: %s", record.name, record.getMessage())
        except Exception:  # a record that cannot be formatted must not break a connection
            self.handleError(record)


def route_library_logs() -> None:
    """Send the SSH libraries' logging to ``roce_agent.ssh`` (idempotent). Without it Python's
    last-resort handler prints paramiko's tracebacks of failed banner reads on stderr."""
    for name in ("paramiko", "netmiko"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, _IntoAgentLog) for h in logger.handlers):
            logger.addHandler(_IntoAgentLog())
        logger.propagate = False


route_library_logs()


# --------------------------------------------------------------------------- the socket


class _GuardedSocket:
    """The TCP socket paramiko talks through: it holds the peer to OpenSSH's limits until the
    SSH version line has arrived, and can be shut down at the deadline from another thread.
    Everything else is the socket's own (paramiko uses ``recv``, ``send``, ``settimeout``,
    ``close`` and ``_closed``)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._line = bytearray()  # the pre-banner line being received
        self.lines = 0
        self.banner: str | None = None
        self.violation: str | None = None
        self.expired = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def recv(self, size: int) -> bytes:
        data = self._sock.recv(size)
        if self.banner is None and data:
            self._check(data)
        return data

    def _check(self, data: bytes) -> None:
        self._line += data
        while self.banner is None and b"\n" in self._line:
            line, _, rest = bytes(self._line).partition(b"\n")
            if line.startswith(b"SSH-"):
                self.banner = printable(line.rstrip(b"\r").decode("ascii", "replace"))[:120]
            self.lines += 1
            self._line = bytearray(rest)
            if self.lines > MAX_PRE_BANNER_LINES and self.banner is None:
                self._refuse(f"more than {MAX_PRE_BANNER_LINES} lines before any SSH version line")
        if self.banner is None and len(self._line) > MAX_BANNER_LINE:
            self._refuse(
                f"a line of more than {MAX_BANNER_LINE} bytes before any SSH version line "
                f"(starting {_shown(bytes(self._line[:24]))})"
            )

    def _refuse(self, why: str) -> None:
        self.violation = why
        raise ConnectionAbortedError(why)

    def expire(self) -> None:
        """The budget is spent: end every read and write on this connection now."""
        self.expired = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)


def _shown(data: bytes) -> str:
    return repr(printable(data.decode("latin-1")))


# --------------------------------------------------------------------------- connecting


class _Retry(Exception):
    """A quick refusal worth another attempt while the budget lasts; ``failure`` is what to
    report when it does not."""

    def __init__(self, failure: Unreachable) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass
class _Attempt:
    """One connection attempt and how far it got (for naming its failure)."""

    device: Device
    expected: Expectation
    deadline: float
    budget_s: float
    guard: _GuardedSocket | None = None
    checked: CheckedHandle | None = None
    logged_in: bool = False

    @property
    def address(self) -> str:
        return f"{self.device.host}:{self.device.port}"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def failed(self, kind: str, detail: str, hint: str) -> Unreachable:
        return Unreachable(self.device.name, kind, detail, hint)


def credential_source(device: Device) -> str:
    """Where the device's secret comes from, never the secret: ``password from $ROCE_PW``,
    ``password from /etc/roce-agent/pw``, ``key /root/.ssh/id_ed25519``."""
    credentials = device.credentials
    if credentials is None:
        return "no credentials"
    parts = []
    if credentials.password_env:
        parts.append(f"password from ${credentials.password_env}")
    elif credentials.password_file:
        parts.append(f"password from {printable(str(credentials.password_file))}")
    if credentials.ssh_key:
        parts.append(f"key {printable(str(credentials.ssh_key))}")
    return ", ".join(parts) or "no credentials"


def connect(device: Device, platform: Platform) -> Connection:
    """An SSH session to ``device`` with its CLI ready, within the connect budget; raises
    :class:`~agent.device.failures.Unreachable` (a :class:`HostKeyError` for host keys) with
    the failure's kind, one line and a fix hint."""
    assert device.credentials is not None and device.host is not None
    password = device.credentials.resolve_password(device.name)
    secret = password.get_secret_value() if password else ""
    # The keys the device may present, before anything is sent to it: a device whose trust
    # cannot be read (a broken known_hosts line) is not contacted at all.
    expected = expectation(device)
    budget = _budget.connect_timeout_s
    started = time.monotonic()
    deadline = started + budget
    tries = 0
    while True:
        tries += 1
        try:
            handle = _open(_Attempt(device, expected, deadline, budget), platform, secret)
            return cap_replies(Connection(handle, device.name))
        except _Retry as retry:
            pause = RETRY_BACKOFF_S * 2 ** (tries - 1)
            if time.monotonic() + pause + MIN_ATTEMPT_S > deadline:
                raise _after_tries(retry.failure, tries, time.monotonic() - started) from None
            time.sleep(pause)


def _after_tries(failure: Unreachable, tries: int, elapsed_s: float) -> Unreachable:
    if tries == 1:
        return failure
    return Unreachable(
        failure.device,
        failure.kind,
        f"{failure.detail} ({tries} attempts in {elapsed_s:.1f} s)",
        failure.hint,
    )


def _open(attempt: _Attempt, platform: Platform, secret: str) -> Any:
    """One attempt: TCP, then netmiko over the guarded socket, the deadline armed."""
    attempt.guard = _GuardedSocket(_tcp(attempt))
    with _alarm(attempt):
        attempt.checked = checked_netmiko(attempt.expected, **_params(attempt, platform, secret))
        return _log_in(attempt)


@contextlib.contextmanager
def _alarm(attempt: _Attempt) -> Iterator[None]:
    """The connection shut down at ``attempt.deadline`` if the block is still in it then
    (the deadline may move later inside the block: the alarm follows it)."""
    guard = attempt.guard
    assert guard is not None
    done = threading.Event()

    def watch() -> None:
        while not done.wait(max(0.0, attempt.left())):
            if attempt.left() <= 0:
                guard.expire()
                return

    watcher = threading.Thread(target=watch, name="ssh-connect-deadline", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


def _tcp(attempt: _Attempt) -> socket.socket:
    host, port = attempt.device.host, attempt.device.port
    try:
        sock = socket.create_connection((host, port), timeout=max(0.05, attempt.left()))
    except TimeoutError:
        raise attempt.failed(
            UNREACHABLE,
            f"{attempt.address} did not answer the TCP connection within the "
            f"{attempt.budget_s:g} s connect budget",
            "check the device's address and that a firewall lets SSH through, or raise "
            "--connect-timeout",
        ) from None
    except socket.gaierror as exc:
        raise attempt.failed(
            UNREACHABLE,
            f"the name {printable(str(host))} does not resolve ({exc.strerror})",
            f"fix host: of {attempt.device.name} in the fabric file",
        ) from None
    except OSError as exc:
        raise _Retry(
            attempt.failed(
                UNREACHABLE,
                f"{attempt.address} refused or dropped the TCP connection "
                f"({exc.strerror or type(exc).__name__})",
                f"check host and port of {attempt.device.name} in the fabric file and that "
                "SSH is enabled on the device",
            )
        ) from None
    sock.settimeout(None)  # paramiko sets its own
    return sock


def _params(attempt: _Attempt, platform: Platform, secret: str) -> dict[str, Any]:
    device = attempt.device
    assert device.credentials is not None and attempt.guard is not None
    left = max(0.05, attempt.left())
    key = device.credentials.ssh_key
    return {
        "device_type": platform.netmiko_device_type,
        "host": device.host,
        "port": device.port,
        "username": device.username,
        "password": secret,
        "use_keys": key is not None,
        "key_file": str(key) if key else None,
        "allow_agent": False,
        "fast_cli": True,
        "sock": attempt.guard,
        # Each of paramiko's waits is given what is left; the alarm bounds them together.
        "conn_timeout": left,
        "banner_timeout": left,
        "auth_timeout": left,
    }


def _log_in(attempt: _Attempt) -> Any:
    """Key exchange, host key, authentication and shell (netmiko's ``establish_connection``)
    within the budget, then the CLI's first prompt (its ``session_preparation``) within the
    same time again: a shell that starts slowly (login scripts, an emulated host) is not a
    dead one. Each failure classified."""
    checked = attempt.checked
    assert checked is not None
    handle = checked.handle
    try:
        handle._modify_connection_params()
        handle.establish_connection()
        attempt.logged_in = True
        attempt.deadline = time.monotonic() + attempt.budget_s
        with _reads_until(handle, attempt.deadline):
            handle._try_session_preparation()
        if attempt.guard is not None and attempt.guard.expired:  # the alarm won the race
            raise TimeoutError("connect budget spent")
    except HostKeyError:
        checked.discard()
        raise
    except Exception as exc:
        checked.discard()
        raise _classified(attempt, exc) from None
    return handle


@contextlib.contextmanager
def _reads_until(handle: Any, deadline: float) -> Iterator[None]:
    """Every netmiko read of the session set-up ends by ``deadline``: its own timeouts (20 s
    per prompt read, more for some drivers) are replaced by the time left."""
    names = ("read_until_pattern", "read_channel_timing")
    originals = {name: getattr(handle, name) for name in names}

    def bounded(read: Callable[..., str]) -> Callable[..., str]:
        def call(*args: Any, **kwargs: Any) -> str:
            handle.read_timeout_override = max(0.01, deadline - time.monotonic())
            return read(*args, **kwargs)

        return call

    for name, read in originals.items():
        setattr(handle, name, bounded(read))
    try:
        yield
    finally:
        for name in originals:
            with contextlib.suppress(AttributeError):
                delattr(handle, name)
        handle.read_timeout_override = None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (netmiko re-raises paramiko's
    as text; the original is still here)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _classified(attempt: _Attempt, exc: BaseException) -> Exception:
    """What a failed login was, in the order the checks can tell it."""
    checked, guard = attempt.checked, attempt.guard
    assert checked is not None and guard is not None
    refusal = checked.refusal(exc)
    if refusal is not None:
        return refusal
    if guard.violation is not None:
        return attempt.failed(
            PROTOCOL_ERROR,
            f"{attempt.address} is not an SSH server: it sent {guard.violation}",
            f"check the port of {attempt.device.name} in the fabric file (the device's SSH "
            "port, usually 22)",
        )
    if guard.expired or attempt.left() <= 0:
        return _timed_out(attempt)
    auth = _auth_failure(attempt, exc)
    if auth is not None:
        return auth
    return _dropped_or_garbled(attempt, exc)


def _timed_out(attempt: _Attempt) -> Unreachable:
    guard, checked = attempt.guard, attempt.checked
    assert guard is not None and checked is not None
    budget = f"the {attempt.budget_s:g} s connect budget"
    if guard.banner is None:
        what = f"{attempt.address} accepted TCP but sent no SSH banner within {budget}"
    elif not checked.key_checked:
        what = f"{attempt.address} ({guard.banner}) did not finish the key exchange within {budget}"
    elif not attempt.logged_in:
        what = f"{attempt.address} did not finish the login within {budget}"
    else:
        what = (
            f"logged in to {attempt.address} but its CLI did not answer in time (no prompt "
            f"within {attempt.budget_s:g} s after the login)"
        )
    return attempt.failed(
        TIMED_OUT,
        what,
        "check that the port is the device's SSH port and the device is not overloaded, or "
        "raise --connect-timeout",
    )


def _auth_failure(attempt: _Attempt, exc: BaseException) -> Exception | None:
    """An authentication refusal (user and credential source named), or a peer that hung up
    during authentication (worth another attempt); None when it was neither."""
    from netmiko.exceptions import NetmikoAuthenticationException
    from paramiko.ssh_exception import (  # type: ignore[import-untyped]
        AuthenticationException,
        BadAuthenticationType,
    )

    chain = _chain(exc)
    refused = AuthenticationException | NetmikoAuthenticationException
    if not any(isinstance(e, refused) for e in chain):
        return None
    if any("transport shut down or saw EOF" in str(e) for e in chain):
        return _Retry(
            attempt.failed(
                UNREACHABLE,
                f"{attempt.address} closed the connection during authentication",
                "the device may limit concurrent SSH logins: lower --parallelism",
            )
        )
    device = attempt.device
    source = credential_source(device)
    allowed = next((e for e in chain if isinstance(e, BadAuthenticationType)), None)
    accepts = f"; it accepts only {', '.join(allowed.allowed_types)}" if allowed else ""
    return attempt.failed(
        AUTH_FAILED,
        f"{attempt.address} refused user {printable(str(device.username))!r} ({source}){accepts}",
        f"check the user and the secret ({source}) of {device.name}",
    )


def _dropped_or_garbled(attempt: _Attempt, exc: BaseException) -> Exception:
    """The peer hung up (worth another attempt), or answered with something that is not SSH."""
    chain = _chain(exc)
    guard = attempt.guard
    assert guard is not None
    dropped = any(isinstance(e, EOFError | ConnectionError) for e in chain)
    if dropped and guard.banner is None:
        return _Retry(
            attempt.failed(
                UNREACHABLE,
                f"{attempt.address} closed the connection before its SSH banner",
                "the device's SSH server may be starting or limiting connections; check it",
            )
        )
    if dropped and attempt.logged_in:
        return attempt.failed(
            UNREACHABLE,
            f"{attempt.address} closed the session right after the login",
            "the device may limit sessions per user; check its SSH and AAA settings",
        )
    root = chain[-1]
    if guard.banner is None and "Indecipherable protocol version" in str(root):
        # paramiko read 100 lines and none was "SSH-…": the last one is in its message
        said = str(root).partition('"')[2].rpartition('"')[0]
        return attempt.failed(
            PROTOCOL_ERROR,
            f"{attempt.address} is not an SSH server: no SSH version line (it sent "
            f"{printable(said[:60])!r} …)",
            f"check the port of {attempt.device.name} in the fabric file (the device's SSH "
            "port, usually 22)",
        )
    return attempt.failed(
        PROTOCOL_ERROR,
        f"{attempt.address} broke off the SSH exchange: {type(root).__name__}: {describe(root)}",
        "check that the port is the device's SSH port; re-run with --debug for the exchange",
    )


# --------------------------------------------------------------------------- replies


class ReplyMeter:
    """Counts what one command's reply has brought so far and stops it at
    :data:`MAX_REPLY_BYTES`: a device that never stops answering cannot fill the agent's
    memory. It replaces the netmiko channel's ``read_channel``, which reads until the socket
    has nothing more *right now* -- for a peer that never pauses, never -- by the same loop
    counting each buffer (and joining them once, where netmiko's ``+=`` copies the reply so
    far for every buffer), and wraps the connection's ``write_channel``: a new command
    resets the count."""

    def __init__(self, handle: Any, device: str, limit: int = MAX_REPLY_BYTES) -> None:
        self.device = device
        self.limit = limit
        self.size = 0
        self.command = ""
        self._write = handle.write_channel
        self._read_buffer = handle.channel.read_buffer
        handle.write_channel = self.write_channel
        handle.channel.read_channel = self.read_channel

    def write_channel(self, out_data: str) -> None:
        self.size = 0
        if out_data.strip():
            self.command = out_data.strip().splitlines()[0]
        self._write(out_data)

    def read_channel(self) -> str:
        parts: list[str] = []
        while chunk := self._read_buffer():
            self.size += len(chunk)
            if self.size > self.limit:
                raise CommandFailed(
                    self.device,
                    f"the reply to {printable(self.command[:80])!r} exceeded the "
                    f"{self.limit // (1024 * 1024)} MiB reply cap; not read further",
                    "the device keeps sending: check the command's output on the device",
                )
            parts.append(chunk)
        return "".join(parts)


def cap_replies(connection: Connection, limit: int = MAX_REPLY_BYTES) -> Connection:
    """``connection`` with its replies capped (:class:`ReplyMeter`)."""
    ReplyMeter(connection.netmiko, connection.device, limit)
    return connection
