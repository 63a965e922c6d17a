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

known_hosts files are read line by line, each line on its own (OpenSSH skips a line it cannot
parse; paramiko's ``HostKeys.load`` raises ``InvalidHostKey`` for the whole file): a broken
line makes the device it names ``host key unreadable`` (file and line in the message) and no
other device. The trust-on-first-use file is rewritten whole and renamed into place (write a
temporary file, fsync, rename, fsync the directory), so a crash or a full disk leaves the old
file or the new one, never a torn line. :func:`trust_file_problems` lists every broken line of
the files a fabric's devices are checked against (``serve --check-config``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import functools
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agent.device.failures import (
    HOST_KEY_CHANGED,
    HOST_KEY_UNKNOWN,
    HOST_KEY_UNREADABLE,
    Unreachable,
    one_line,
)
from agent.errors import AgentError, printable
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


class HostKeyError(Unreachable):
    """A host key that does not match, is not known (and TOFU was not asked for), or cannot be
    read from its known_hosts line: the device is refused before anything is sent to it.

    An :class:`~agent.device.failures.Unreachable` of kind ``host key changed``, ``host key
    unknown`` or ``host key unreadable``: one device that could not be contacted safely, so
    the other devices proceed by the usual canary/batch rules.
    """


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


# ------------------------------------------------------------------ known_hosts files

# A known_hosts file larger than this is refused as a whole (bounded read: a FIFO or
# /dev/zero named as known_hosts must not hang or fill the agent).
MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class KnownHostsLine:
    """One non-comment line of a known_hosts file: the names it is about and its key, or why
    it cannot be used (``problem``)."""

    path: Path
    number: int
    names: tuple[str, ...]
    key: PKey | None = None
    problem: str | None = None

    def about(self, name: str) -> bool:
        """Whether the line names ``name`` (plainly or hashed, as ``ssh-keygen -H`` writes)."""
        return any(_name_matches(entry, name) for entry in self.names)

    def where(self) -> str:
        return f"{printable(str(self.path))}:{self.number}"


def _name_matches(entry: str, name: str) -> bool:
    if entry == name:
        return True
    if not entry.startswith("|1|"):
        return False
    import paramiko

    try:
        return bool(paramiko.HostKeys.hash_host(name, entry) == entry)
    except (binascii.Error, ValueError, TypeError):  # a hashed name that is not one
        return False


def _key_of(key_type: str, blob: str) -> tuple[PKey | None, str | None]:
    """The key of one line, or why there is none (None, None: a type paramiko cannot use,
    skipped as OpenSSH skips key types it does not know)."""
    import paramiko

    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return None, "the key is not valid base64 (a line cut short?)"
    try:
        key = paramiko.PKey.from_type_string(key_type, data)
    except paramiko.pkey.UnknownKeyType:
        return None, None
    except Exception as exc:  # paramiko's key classes raise many types on a bad blob
        return None, f"the key is not a valid {key_type} key ({type(exc).__name__})"
    if key.asbytes() != data:
        # paramiko reads a key from a prefix of a cut blob: such a line must not pass for a
        # (different) key, which would read as "host key changed".
        return None, f"the {key_type} key is cut short or has bytes after it"
    return key, None


def _parse_line(path: Path, number: int, text: str) -> KnownHostsLine | None:
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    if fields[0].startswith("@"):
        names = tuple(fields[1].split(",")) if len(fields) > 1 else ()
        return KnownHostsLine(
            path, number, names, problem=f"the marker {printable(fields[0][:40])} is not supported"
        )
    names = tuple(fields[0].split(","))
    if len(fields) < 3:
        return KnownHostsLine(
            path,
            number,
            names,
            problem=f"Expected: HOSTS KEYTYPE BASE64 Actual: {len(fields)} field(s) (a line cut "
            "short?)",
        )
    key, problem = _key_of(fields[1], fields[2])
    return KnownHostsLine(path, number, names, key=key, problem=problem)


@dataclass(frozen=True)
class KnownHostsFile:
    """A known_hosts file read line by line; ``problem`` when it cannot be read at all."""

    path: Path
    lines: tuple[KnownHostsLine, ...] = ()
    problem: str | None = None

    def keys_for(self, name: str) -> list[PKey]:
        return [line.key for line in self.lines if line.key is not None and line.about(name)]

    def broken_for(self, name: str) -> list[KnownHostsLine]:
        return [line for line in self.lines if line.problem is not None and line.about(name)]


def read_known_hosts(path: Path) -> KnownHostsFile:
    """``path`` parsed line by line (a missing file has no lines). Cached while the file's
    identity, size and modification time stay the same: a fleet run reads each file once."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return KnownHostsFile(path)
    except OSError as exc:
        return KnownHostsFile(path, problem=f"cannot read: {exc.strerror}")
    return _read_cached(str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_cached(path: str, *_identity: int) -> KnownHostsFile:
    from common.yamlsource import read_bounded  # the one bounded reader of regular files

    try:
        data = read_bounded(Path(path), MAX_KNOWN_HOSTS_BYTES)
    except AgentError as exc:
        why = str(exc).removeprefix(f"{path}: ")
        return KnownHostsFile(Path(path), problem=one_line(why))
    text = data.decode("utf-8", "replace")
    parsed = (_parse_line(Path(path), n, line) for n, line in enumerate(text.splitlines(), 1))
    return KnownHostsFile(Path(path), tuple(line for line in parsed if line is not None))


def _load_known_hosts(path: Path, name: str, device: str) -> list[PKey]:
    """The keys ``path`` holds for ``name``; :class:`HostKeyError` (unreadable) when the file
    cannot be read or a line about ``name`` is broken -- never for another host's line."""
    known = read_known_hosts(path)
    if known.problem is not None:
        raise HostKeyError(
            device,
            HOST_KEY_UNREADABLE,
            f"known_hosts {printable(str(path))}: {known.problem}",
            "make the file readable, or point known_hosts: at another file",
        )
    broken = known.broken_for(name)
    if broken:
        line = broken[0]
        raise HostKeyError(
            device,
            HOST_KEY_UNREADABLE,
            f"{line.where()}: the line about {name} cannot be used: {line.problem}",
            f"remove or repair that line (ssh-keygen -R '{name}' -f "
            f"{printable(str(path))}), then check the device's key again",
        )
    return known.keys_for(name)


def _searched_files(device: KeyedDevice) -> list[Path]:
    """The known_hosts files a device without a pinned key is checked against."""
    configured = device.known_hosts
    files = [configured] if configured else [USER_KNOWN_HOSTS.expanduser(), SYSTEM_KNOWN_HOSTS]
    return [*files, tofu_file()]


def trust_file_problems(devices: Iterable[KeyedDevice]) -> list[str]:
    """Every problem of the trust files ``devices`` are checked against (their known_hosts
    files, the user's and the system's, the trust-on-first-use file), one line each with
    FILE:LINE and the devices the line is about; empty when all can be read (a file that does
    not exist has no lines: a device's missing ``known_hosts:`` is its own error). For
    ``serve --check-config``: the run itself isolates each broken line to its device."""
    problems: dict[str, None] = {}
    names: dict[Path, list[tuple[str, str]]] = {}
    for device in devices:
        if device.host is None or device.host_key:
            continue
        for path in _searched_files(device):
            names.setdefault(path, []).append(
                (device.name, known_hosts_name(device.host, device.port))
            )
    for path, wanted in names.items():
        problems.update(dict.fromkeys(_file_problems(read_known_hosts(path), wanted)))
    return list(problems)


def _file_problems(known: KnownHostsFile, wanted: Sequence[tuple[str, str]]) -> Iterator[str]:
    if known.problem is not None:
        yield f"{printable(str(known.path))}: {known.problem}"
    for line in known.lines:
        if line.problem is None:
            continue
        about = [device for device, name in wanted if line.about(name)]
        whose = f" (device {', '.join(about)} will be refused)" if about else ""
        yield f"{line.where()}: {line.problem}{whose}"


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
            device.name,
            HOST_KEY_UNREADABLE,
            f"known_hosts: Expected: a readable file Actual: {printable(str(configured))} "
            "does not exist or is not a file",
            "fix known_hosts: of the device (or of the fabric's defaults)",
        )
    for path in _searched_files(device):
        expected.searched.append(str(path))
        expected.keys += [
            (key, str(path)) for key in _load_known_hosts(path, expected.name, device.name)
        ]
    return expected


def _describe(key: PKey) -> str:
    return f"{fingerprint(key)} ({key.get_name()})"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Other processes' trust-on-first-use writes kept out: an exclusive ``flock`` on
    ``known_hosts.lock`` beside the file (the file itself is replaced by rename, so a lock on
    it would be on an inode that is gone after the first write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` by ``data`` so that a crash or a full disk at any point leaves either
    the old file or the new one: a temporary file in the same directory, fsync, rename over
    ``path``, fsync the directory (the rename itself must survive a crash too)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _tofu_line(expected: Expectation, key: PKey) -> bytes:
    return f"{expected.name} {key.get_name()} {key.get_base64()}\n".encode("ascii")


def _own_file(path: Path) -> bytes:
    """The TOFU file's bytes as they are (empty when there is none), read bounded."""
    from common.yamlsource import read_bounded

    if not path.exists():
        return b""
    try:
        return read_bounded(path, MAX_KNOWN_HOSTS_BYTES)
    except AgentError as exc:
        raise OSError(str(exc)) from None


def _record_tofu(expected: Expectation, key: PKey) -> None:
    """Record the key in the TOFU file (rewritten whole, atomically), unless another run
    recorded one for the host meanwhile: then that key decides."""
    path = expected.tofu_path
    try:
        with _tofu_lock, _locked(path):
            recorded = _load_known_hosts(path, expected.name, expected.device)
            if recorded and not any(k == key for k in recorded):
                raise _changed(expected, key, [(k, str(path)) for k in recorded])
            if recorded:
                return
            old = _own_file(path)
            if old and not old.endswith(b"\n"):  # a line cut by an older writer stays apart
                old += b"\n"
            mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o644
            write_atomically(path, old + _tofu_line(expected, key), mode)
    except OSError as exc:
        raise HostKeyError(
            expected.device,
            HOST_KEY_UNKNOWN,
            f"trust-on-first-use: cannot write {printable(str(path))}: "
            f"{exc.strerror or type(exc).__name__}",
            "make the state directory writable (--state-dir or $ROCE_AGENT_STATE_DIR)",
        ) from None


PINNED = "host_key in the fabric file"


def _changed(expected: Expectation, actual: PKey, keys: Iterable[tuple[PKey, str]]) -> HostKeyError:
    listed = list(keys)
    wanted = "; ".join(f"{_describe(k)} from {source}" for k, source in listed)
    update = _how_to_update(expected, listed[0][1] if listed else PINNED)
    return HostKeyError(
        expected.device,
        HOST_KEY_CHANGED,
        f"the host key of {expected.host}:{expected.port} has changed, refusing to connect "
        f"(a replaced switch, or someone in the middle). Expected: {wanted} Actual: "
        f"{_describe(actual)}",
        f"if the change is legitimate, {update}",
    )


def _how_to_update(expected: Expectation, source: str) -> str:
    if source == PINNED:
        return f"update host_key of {expected.device} in the fabric file"
    return f"replace the {expected.name} entry in {source}"


def _unknown(expected: Expectation, actual: PKey) -> HostKeyError:
    return HostKeyError(
        expected.device,
        HOST_KEY_UNKNOWN,
        f"the host key of {expected.host}:{expected.port} is not known, refusing to connect. "
        f"Expected: a key for {expected.name} in {', '.join(expected.searched)} Actual: "
        f"{_describe(actual)}",
        "check the fingerprint on the device, then pin it (host_key: in the fabric file) or "
        "run once with --trust-on-first-use",
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
    """The server offered no key of a type we hold: as good as a changed key (a host key
    type downgrade is refused, never taken for an unknown host)."""
    wanted = "; ".join(f"{_describe(k)} from {source}" for k, source in expected.keys)
    return HostKeyError(
        expected.device,
        HOST_KEY_CHANGED,
        f"the host key of {expected.host}:{expected.port} has changed, refusing to connect. "
        f"Expected: {wanted} Actual: no key of that type offered",
        f"if the change is legitimate, {_how_to_update(expected, expected.keys[0][1])}",
    )


@dataclass
class CheckedHandle:
    """A netmiko connection object, not connected yet, whose host key policy is ours."""

    handle: Any
    verifier: Any

    @property
    def key_checked(self) -> bool:
        """Whether the server's host key was seen (the key exchange got that far)."""
        return getattr(self.verifier, "seen", None) is not None

    def refusal(self, exc: BaseException) -> HostKeyError | None:
        """The host key refusal hidden in a failed connection's error, if that is what it
        was: the server offered no key of the types we hold (a type downgrade)."""
        expected = self.verifier.expected
        if expected.keys and not self.key_checked and "no acceptable host key" in str(exc):
            return no_acceptable_key(expected)
        return None

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.handle.disconnect()


def checked_netmiko(
    expected: Expectation, factory: Callable[..., Any] | None = None, **params: Any
) -> CheckedHandle:
    """``netmiko.ConnectHandler(**params)``, not connected, with the host key policy for
    ``expected`` (:func:`expectation`, gathered before anything is contacted) in place before
    the first packet (the caller opens it: :mod:`agent.device.ssh`)."""
    if factory is None:
        from netmiko import ConnectHandler

        factory = ConnectHandler
    disabled = expected.disabled_host_key_algorithms()
    if disabled:
        params["disabled_algorithms"] = {"keys": disabled}
    # auto_connect=False: the two-step start netmiko's own ConnUnify uses
    # (netmiko/ssh_dispatcher.py), so the policy is in place before the first packet.
    handle = factory(**params, system_host_keys=False, alt_host_keys=False, auto_connect=False)
    verifier = _policy_class()(expected)
    handle.key_policy = verifier
    return CheckedHandle(handle, verifier)
