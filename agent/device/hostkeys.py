"""SSH host key checking for every SSH connection the agent opens.

A device's expected host keys come from exactly one place, the first that applies:

1. ``host_key:`` pinned on the device in the fabric file (one key or a list);
2. otherwise the device's (or the fabric defaults') ``known_hosts:`` file, else the user's
   ``~/.ssh/known_hosts`` and the system's ``/etc/ssh/ssh_known_hosts``;
   plus, in both cases, the keys learnt by trust-on-first-use in ``<state dir>/known_hosts``.

A key that differs refuses the connection before authentication (no password is ever sent
to an impostor). A host with no known key is refused too, unless trust-on-first-use was asked
for (``--trust-on-first-use`` or ``host_key_policy: tofu``): then its key is recorded in
``<state dir>/known_hosts`` and enforced from then on.

netmiko (4.x, ``netmiko/base_connection.py``: ``_build_ssh_client``) only offers
``ssh_strict`` (paramiko's RejectPolicy) with one ``alt_key_file``, and it turns paramiko's
``BadHostKeyException`` into a ``NetmikoTimeoutException`` carrying only text. So the agent
loads no keys into paramiko's client at all: paramiko then hands every server key to the
missing-host-key policy (``paramiko/client.py``, ``SSHClient.connect``), and our policy
decides with all sources at hand and a structured error. Host key algorithms are limited to
the types we hold keys for, so a server offering several types never negotiates one we
cannot check (what OpenSSH's ordering of HostKeyAlgorithms achieves).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agent.errors import AgentError
from agent.intent.tokens import KEY_ALGORITHMS


class KeyedDevice(Protocol):
    """What host key checking needs of a device (``agent.intent.model.Device`` has it).

    A protocol, not the intent class: the intent validates host key lines with this module,
    so importing the intent here would tie the two modules into one.
    """

    @property
    def name(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def port(self) -> int: ...
    @property
    def host_key(self) -> list[str] | None: ...
    @property
    def known_hosts(self) -> Path | None: ...
    @property
    def host_key_policy(self) -> str: ...


PKey = Any  # paramiko.PKey; paramiko ships no type information

HostKeyPolicy = Literal["strict", "tofu"]
TOFU_FILE = "known_hosts"
USER_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
SYSTEM_KNOWN_HOSTS = Path("/etc/ssh/ssh_known_hosts")
DEFAULT_STATE_DIR = Path("/var/lib/roce-agent")


# Key types paramiko can verify, and the host key algorithms each one is negotiated with.
class HostKeyError(AgentError):
    """A host key that does not match, or is not known (and TOFU was not asked for).

    ``exit_code`` 1: for the push path this is one device that could not be contacted
    safely — the same outcome as an unreachable device (the fabric file is valid; the world
    changed), so the other devices proceed by the usual canary/batch rules.
    """

    exit_code = 1


@dataclass
class Settings:
    """Process-wide choices made by the command line (the fabric can ask for TOFU too)."""

    trust_on_first_use: bool = False
    state_dir: Path | None = None


_settings = Settings()
_tofu_lock = threading.Lock()  # threads of one apply; other processes are kept out by flock


def configure(*, trust_on_first_use: bool | None = None, state_dir: Path | None = None) -> None:
    """Set what ``--trust-on-first-use`` and ``--state-dir`` asked for."""
    if trust_on_first_use is not None:
        _settings.trust_on_first_use = trust_on_first_use
    if state_dir is not None:
        _settings.state_dir = Path(state_dir)


def tofu_file() -> Path:
    """Where trust-on-first-use records keys: ``<state dir>/known_hosts``."""
    directory = _settings.state_dir or os.environ.get("ROCE_AGENT_STATE_DIR") or DEFAULT_STATE_DIR
    return Path(directory) / TOFU_FILE


def fingerprint(key: PKey) -> str:
    """OpenSSH's fingerprint: ``SHA256:`` + unpadded base64 of the key blob's SHA-256."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names a host (``[host]:port`` unless the port is 22)."""
    return host if port == 22 else f"[{host}]:{port}"


def _parse_key(line: str) -> PKey:
    import paramiko  # type: ignore[import-untyped]

    key_type, blob = line.split()[:2]
    return paramiko.PKey.from_type_string(key_type, base64.b64decode(blob))


def _load_known_hosts(path: Path, name: str, device: str) -> list[PKey]:
    import paramiko

    try:
        keys = paramiko.HostKeys(str(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except (OSError, paramiko.SSHException) as exc:
        raise HostKeyError(f"{device}: known_hosts {path}: cannot read: {exc}") from None
    found = keys.lookup(name)
    return list(found.values()) if found else []


@dataclass
class Expectation:
    """The keys a device may present and where each came from."""

    device: str
    host: str
    port: int
    keys: list[tuple[PKey, str]] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)
    trust_on_first_use: bool = False
    tofu_path: Path = field(default_factory=tofu_file)

    @property
    def name(self) -> str:
        return known_hosts_name(self.host, self.port)

    def disabled_host_key_algorithms(self) -> list[str]:
        """Algorithms to switch off so only the types we hold a key for are negotiated."""
        if not self.keys:
            return []
        allowed = {a for key, _ in self.keys for a in KEY_ALGORITHMS.get(key.get_name(), ())}
        every = {a for algorithms in KEY_ALGORITHMS.values() for a in algorithms}
        return sorted(every - allowed)


def expectation(device: KeyedDevice) -> Expectation:
    """Gather the expected keys for ``device`` from its sources (see the module doc)."""
    assert device.host is not None
    expected = Expectation(
        device.name,
        device.host,
        device.port,
        trust_on_first_use=_settings.trust_on_first_use or device.host_key_policy == "tofu",
    )
    pinned = list(device.host_key or [])
    if pinned:
        expected.searched.append(f"host_key of {device.name} in the fabric file")
        expected.keys = [(_parse_key(line), PINNED) for line in pinned]
        return expected
    configured = device.known_hosts
    if configured is not None and not configured.is_file():
        raise HostKeyError(
            f"{device.name}: known_hosts: Expected: a readable file Actual: {configured} "
            "does not exist or is not a file"
        )
    files = [configured] if configured else [USER_KNOWN_HOSTS.expanduser(), SYSTEM_KNOWN_HOSTS]
    files.append(expected.tofu_path)
    for path in files:
        expected.searched.append(str(path))
        expected.keys += [
            (key, str(path)) for key in _load_known_hosts(path, expected.name, device.name)
        ]
    return expected


def _describe(key: PKey) -> str:
    return f"{fingerprint(key)} ({key.get_name()})"


def _record_tofu(expected: Expectation, key: PKey) -> None:
    """Append the key to the TOFU file, unless another run recorded one meanwhile."""
    path = expected.tofu_path
    with _tofu_lock:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise HostKeyError(
                f"{expected.device}: trust-on-first-use: cannot write {path}: {exc.strerror}"
            ) from None
        with os.fdopen(fd, "r+", encoding="ascii") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            recorded = _load_known_hosts(path, expected.name, expected.device)
            if recorded and not any(k == key for k in recorded):
                raise _changed(expected, key, [(k, str(path)) for k in recorded])
            if not recorded:
                handle.write(f"{expected.name} {key.get_name()} {key.get_base64()}\n")
                handle.flush()
                os.fsync(handle.fileno())


def _changed(expected: Expectation, actual: PKey, keys: Iterable[tuple[PKey, str]]) -> HostKeyError:
    listed = list(keys)
    wanted = "; ".join(f"{_describe(k)} from {source}" for k, source in listed)
    return HostKeyError(
        f"{expected.device}: host key of {expected.host}:{expected.port} has changed, "
        f"refusing to connect (a replaced switch, or someone in the middle). "
        f"Expected: {wanted} Actual: {_describe(actual)}. If the change is legitimate, "
        f"{_how_to_update(expected, listed[0][1] if listed else PINNED)}."
    )


PINNED = "host_key in the fabric file"


def _how_to_update(expected: Expectation, source: str) -> str:
    if source == PINNED:
        return f"update host_key of {expected.device} in the fabric file"
    return f"replace the {expected.name} entry in {source}"


def _unknown(expected: Expectation, actual: PKey) -> HostKeyError:
    return HostKeyError(
        f"{expected.device}: host key of {expected.host}:{expected.port} is not known, "
        f"refusing to connect. Expected: a key for {expected.name} in "
        f"{', '.join(expected.searched)} Actual: {_describe(actual)}. Check the fingerprint "
        f"on the device, then pin it (host_key: in the fabric file) or run once with "
        f"--trust-on-first-use."
    )


@functools.cache
def _policy_class() -> Any:
    import paramiko

    class Verifier(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
        """Paramiko calls this for every server key (the client holds none of its own)."""

        def __init__(self, expected: Expectation) -> None:
            self.expected = expected
            self.seen: PKey | None = None

        def missing_host_key(self, client: Any, hostname: str, key: PKey) -> None:
            self.seen = key
            expected = self.expected
            if any(known == key for known, _ in expected.keys):
                return
            if expected.keys:
                raise _changed(expected, key, expected.keys)
            if not expected.trust_on_first_use:
                raise _unknown(expected, key)
            _record_tofu(expected, key)

    return Verifier


def no_acceptable_key(expected: Expectation) -> HostKeyError:
    """The server offered no key of a type we hold: as good as a changed key."""
    wanted = "; ".join(f"{_describe(k)} from {source}" for k, source in expected.keys)
    return HostKeyError(
        f"{expected.device}: host key of {expected.host}:{expected.port} has changed, "
        f"refusing to connect. Expected: {wanted} Actual: no key of that type offered. "
        f"If the change is legitimate, {_how_to_update(expected, expected.keys[0][1])}."
    )


def open_netmiko(
    device: KeyedDevice, factory: Callable[..., Any] | None = None, **params: Any
) -> Any:
    """``netmiko.ConnectHandler(**params)`` with the device's host key checked first.

    Raises :class:`HostKeyError` (never retried: waiting does not change a key) or whatever
    netmiko raises for transport and authentication problems.
    """
    if factory is None:
        from netmiko import ConnectHandler

        factory = ConnectHandler
    expected = expectation(device)
    disabled = expected.disabled_host_key_algorithms()
    if disabled:
        params["disabled_algorithms"] = {"keys": disabled}
    # auto_connect=False, then _open(): the two-step start netmiko's own ConnUnify uses
    # (netmiko/ssh_dispatcher.py), so the policy is in place before the first packet.
    handle = factory(**params, system_host_keys=False, alt_host_keys=False, auto_connect=False)
    verifier = _policy_class()(expected)
    handle.key_policy = verifier
    try:
        handle._open()
    except HostKeyError:
        _discard(handle)
        raise
    except Exception as exc:
        _discard(handle)
        if (
            expected.keys
            and getattr(verifier, "seen", None) is None
            and ("no acceptable host key" in str(exc))
        ):
            raise no_acceptable_key(expected) from None
        raise
    return handle


def _discard(handle: Any) -> None:
    with contextlib.suppress(Exception):
        handle.disconnect()
