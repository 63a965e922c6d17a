"""Who else may change or read the files the agent reads: OpenSSH's and libpq's rules.

- **Configuration** (agent.yaml, fabric files, profiles, playbooks, web configs): a file that
  anyone on the host can write is refused, because whoever changes it decides which
  switches the agent logs in to, with which credentials, and what it pushes. OpenSSH refuses
  a group- or world-writable ``~/.ssh/config`` or ``authorized_keys`` the same way ("Bad
  owner or permissions", ``StrictModes`` in sshd_config(5)). Group-writable stays allowed:
  an operators' group that edits the fabric together is the common case.
- **Secrets** (``password_file``, ``ssh_key``): read only from a regular file (opened with
  ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``: no symlink, FIFO, device or directory, and no
  swap between a check and the read) of bounded size, owned by the agent's user or root, that
  no one else can read: mode 0600 or stricter, or 0640 when root owns it and a service group
  shares it. That is libpq's rule for a client key (``sslkey``: "u=rw (0600) or less if owned
  by the current user, or u=rw,g=r (0640) or less if owned by root"), which also ignores a
  ``~/.pgpass`` with group or world access; OpenSSH refuses a private key others can read
  ("UNPROTECTED PRIVATE KEY FILE! ... Permissions 0644 ... are too open", ``sshkey_perm_ok()``).
  The content must look like what it holds (:class:`SecretKind`): a password is one line, a
  key a ``-----BEGIN ... PRIVATE KEY-----`` block, so ``/etc/shadow`` or a private key named
  as a ``password_file`` is never sent to a switch as a password.

``roce-agent --insecure-permissions`` (or ``insecure_permissions: true`` in agent.yaml, for
the files it names) turns the owner and mode refusals into a warning that names the file,
logged on the ``roce_agent.files`` logger (stderr for a command, the daemon's JSON log). The
file type, size and shape checks always hold. Messages never show a secret's content.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common.errors import AgentError, printable

log = logging.getLogger("roce_agent.files")


_FILE_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for "Expected: a regular file Actual: a …"."""
    for test, kind in _FILE_KINDS:
        if test(mode):
            return kind
    return "special file"


class FileRefused(AgentError):
    """A file the agent will not read as it is; the message names the file and the fix."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{printable(str(path))}: {message}")


@dataclass
class _Overrides:
    cli: bool = False  # roce-agent --insecure-permissions
    config: Path | None = None  # the agent.yaml that says insecure_permissions: true


_OVERRIDES = _Overrides()
_WARNED: set[tuple[Path, str]] = set()


def allow_insecure_permissions(allowed: bool = True) -> None:
    """``roce-agent --insecure-permissions``: for every file this process reads."""
    _OVERRIDES.cli = allowed


def set_config_override(agent_yaml: Path | None) -> Path | None:
    """``insecure_permissions: true`` in ``agent_yaml`` (None: not set); the previous value,
    so a refused reload can put it back."""
    previous, _OVERRIDES.config = _OVERRIDES.config, agent_yaml
    return previous


def _override() -> str | None:
    if _OVERRIDES.cli:
        return "--insecure-permissions"
    if _OVERRIDES.config is not None:
        return f"insecure_permissions: true in {_OVERRIDES.config}"
    return None


def _refuse_or_warn(path: Path, message: str) -> None:
    why = _override()
    if why is None:
        raise FileRefused(path, f"{message} (or run with --insecure-permissions)")
    if (path, message) in _WARNED:  # once per file and finding, not once per read
        return
    _WARNED.add((path, message))
    log.warning("insecure permissions accepted (%s): %s: %s", why, printable(str(path)), message)


def _mode(info: os.stat_result) -> str:
    return f"{stat.S_IMODE(info.st_mode):04o}"


def check_config_file(path: Path, info: os.stat_result) -> None:
    """Refuse (or, overridden, log) a configuration file anyone on the host can change."""
    if info.st_mode & stat.S_IWOTH:
        _refuse_or_warn(
            path,
            f"Expected: a file only its owner (and group) can change Actual: mode "
            f"{_mode(info)}, anyone on this host can write it; fix: chmod o-w "
            f"{shlex.quote(str(path))}",
        )


def _one_line(data: bytes) -> str | None:
    """None for one line of printable UTF-8 text (a newline at its end allowed); else what
    was expected and, without showing it, what the file holds instead."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "UTF-8 text Actual: not UTF-8"
    line = text.removesuffix("\n").removesuffix("\r")
    if not line:
        return "one line of text Actual: an empty file"
    if "\n" in line or "\r" in line:
        lines = len(line.splitlines())
        return f"one line of text Actual: {lines} lines (a key, a list or a system file?)"
    if not line.isprintable():
        return "one line of printable text Actual: control characters"
    return None


def _private_key(data: bytes) -> str | None:
    first = data.lstrip().split(b"\n", 1)[0].strip()
    if first.startswith(b"-----BEGIN ") and first.endswith(b"PRIVATE KEY-----"):
        return None
    return "a -----BEGIN ... PRIVATE KEY----- block Actual: something else"


@dataclass(frozen=True)
class SecretKind:
    """What a secret file holds: its name in messages, its size limit and its shape."""

    what: str
    max_bytes: int
    shape: Callable[[bytes], str | None]  # None, or what was expected instead

    def check(self, path: Path, data: bytes) -> None:
        expected = self.shape(data)
        if expected is not None:
            raise FileRefused(path, f"Expected: {self.what}: {expected}")


# A password of 4 KiB is far longer than any device takes; a key of 64 KiB holds RSA 16384.
PASSWORD = SecretKind("a password file", 4096, _one_line)
PRIVATE_KEY = SecretKind("an SSH private key file", 64 * 1024, _private_key)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _owners(me: int) -> str:
    return "root (the agent's user)" if me == 0 else f"{_user(me)} (the agent's user) or root"


def _check_owner_and_mode(path: Path, info: os.stat_result) -> None:
    me = os.geteuid()
    quoted = shlex.quote(str(path))
    if info.st_uid not in (me, 0):
        _refuse_or_warn(
            path,
            f"Expected: owned by {_owners(me)} Actual: owned by {_user(info.st_uid)}, who "
            f"can change it; fix: chown {_user(me)} {quoted}",
        )
        return
    # libpq's sslkey rule: a root-owned file may be read by its group (a service group).
    shared = info.st_uid == 0 and me != 0
    forbidden = (stat.S_IWGRP | stat.S_IXGRP | stat.S_IRWXO) if shared else 0o077
    if info.st_mode & forbidden:
        allowed = "0640" if shared else "0600"
        _refuse_or_warn(
            path,
            f"Expected: readable by its owner only (mode {allowed} or stricter) Actual: mode "
            f"{_mode(info)}, others can read it; fix: chmod {allowed[1:]} {quoted}",
        )


_SECRET_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
)


def _open_secret(path: Path) -> int:
    try:
        return os.open(path, _SECRET_FLAGS)
    except FileNotFoundError:
        raise FileRefused(path, "no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(
                path,
                "Expected: a regular file Actual: a symbolic link (a secret is read from the "
                "file itself, never through a link that could be pointed elsewhere)",
            ) from None
        raise FileRefused(path, f"cannot read: {exc.strerror}") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_secret(path: Path, kind: SecretKind) -> bytes:
    """The content of a secret file that passes every check above; :class:`FileRefused`
    (naming the file, never its content) otherwise."""
    fd = _open_secret(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(path, f"Expected: a regular file Actual: a {file_kind(info.st_mode)}")
        _check_owner_and_mode(path, info)
        if info.st_size > kind.max_bytes:
            raise FileRefused(
                path, f"Expected: {kind.what} of at most {kind.max_bytes} bytes Actual: larger"
            )
        data = _read_at_most(fd, kind.max_bytes + 1)
    except OSError as exc:
        raise FileRefused(path, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > kind.max_bytes:  # grown since the fstat
        raise FileRefused(
            path, f"Expected: {kind.what} of at most {kind.max_bytes} bytes Actual: larger"
        )
    kind.check(path, data)
    return data
