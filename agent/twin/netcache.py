"""The twin's network, kept between runs: a fabric file loaded once is not loaded again while
neither it, its profile nor the code that builds the network changed.

Loading a fabric (YAML with positions, the intent's pydantic models, the plan, the rules) costs
a one-shot ``roce-agent twin`` more CPU than its whole start-up budget (docs/twin-speed.md,
"Start-up"), and the network it yields is plain dataclasses.  So :func:`agent.twin.network.
load_network` keeps that network in a file of this cache and, next time, reads it back without
importing the loader.

What a kept network is valid for, all checked before one is used:

* the key: SHA-256 of the fabric file's bytes, its resolved path (a ``profile:`` file is found
  relative to it), ``CREDENTIALS_DIRECTORY`` (the loader expands it into paths), and the code --
  the size and modification time of every module of the intent, the network builder and the
  lossless model (a reinstall or an edit changes them);
* the profile: the fabric's ``profile:`` is looked up again (:func:`agent.intent.profiles.
  resolve_profile`, the loader's own rule), must name the same file, and that file's SHA-256
  must be the one recorded.

Only a fabric that loaded without error is kept, so a bad file gives the same error every
time, and only when neither file changed between the look-up's read of the fabric and the
keeping (what the loader read is then what the key and the recorded digest say).  A fabric
path that is not a regular file of at most :data:`MAX_FABRIC_BYTES` is not looked up (it is
opened without blocking, so a FIFO cannot hold the command): the loader reads it, and refuses
it with its own error.

The cache is a folder of the user's (``$ROCE_AGENT_CACHE_DIR``, else
``$XDG_CACHE_HOME/roce-agent``, else ``~/.cache/roce-agent``), created private (0700).  A kept
network is a pickle, and reading a pickle runs code it names: a folder or file that another
user owns or may write is not read (nor written), and the cache is skipped.  At most
:data:`MAX_ENTRIES` networks are kept, the least recently used removed first.
``ROCE_AGENT_CACHE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.intent.profiles import resolve_profile

MAX_ENTRIES: Final = 64
# More than the loader accepts (common.yamlsource's max_bytes, 4 MiB): a larger file is the
# loader's to refuse.
MAX_FABRIC_BYTES: Final = 8 << 20
# A file's modification time comes from the kernel's coarse clock, up to a tick behind the
# wall clock: a change within this much before the look-up counts as during the load.
_CLOCK_SLACK_NS: Final = 50_000_000
# Bumped when a kept network's shape changes in a way the code's stamp would not show.
FORMAT: Final = 1
_PREFIX: Final = "twin-network-"
# What builds a network from a fabric file, relative to the packages' root: every module under
# these is part of the code's stamp (the profile file is checked by its own digest).
_CODE: Final = ("agent/intent", "agent/twin/network.py", "lossless")


@dataclass(frozen=True)
class Entry:
    """A kept network and what it was loaded from besides the fabric file (the network is
    whatever the caller kept: :func:`agent.twin.network.load_network` checks its type, and
    this module does not import the one that imports it)."""

    format: int
    profile_reference: str
    profile_file: str
    profile_sha256: str
    network: object


@dataclass(frozen=True)
class Lookup:
    """What :func:`lookup` found: the kept network (None: load the fabric), and what a network
    loaded now may be kept under -- the key of the bytes it read (None: nothing may be kept) and
    the time before it read them."""

    fabric: Path
    network: object | None
    key: str | None
    since_ns: int


def enabled() -> bool:
    return os.environ.get("ROCE_AGENT_CACHE", "on").lower() not in ("off", "0", "no", "false")


def cache_dir() -> Path:
    explicit = os.environ.get("ROCE_AGENT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "roce-agent"


def _private(info: os.stat_result) -> bool:
    """Ours, and no one else may write it (a pickle runs what it names)."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _usable_dir(create: bool) -> Path | None:
    folder = cache_dir()
    try:
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError:
        return None
    return folder if stat.S_ISDIR(info.st_mode) and _private(info) else None


def _small_file(path: Path) -> bytes | None:
    """The bytes of a regular file of at most MAX_FABRIC_BYTES, else None (the loader then
    reads it and says what is wrong with it)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        handle = os.open(path, flags)
    except OSError:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            return None
        while size <= MAX_FABRIC_BYTES:
            chunk = os.read(handle, MAX_FABRIC_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(handle)
    return b"".join(chunks) if size <= MAX_FABRIC_BYTES else None


def _sha256(path: Path) -> str | None:
    content = _small_file(path)
    return None if content is None else hashlib.sha256(content).hexdigest()


def _code_stamp() -> bytes:
    """Size and modification time of every file that decides what a fabric loads into."""
    root = Path(__file__).resolve().parents[2]
    lines = []
    for part in _CODE:
        top = root / part
        paths = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in paths:
            if path.suffix == ".py":
                info = path.stat()
                lines.append(f"{path.relative_to(root)} {info.st_size} {info.st_mtime_ns}")
    return "\n".join(lines).encode()


def _key(fabric: Path, content: bytes) -> str:
    digest = hashlib.sha256(content)
    for part in (
        str(fabric.resolve()).encode(),
        os.environ.get("CREDENTIALS_DIRECTORY", "").encode(),
        _code_stamp(),
    ):
        digest.update(b"\0" + part)
    return digest.hexdigest()


def _still_valid(entry: object, fabric: Path) -> bool:
    if not isinstance(entry, Entry) or entry.format != FORMAT:
        return False
    resolved = resolve_profile(entry.profile_reference, fabric)
    if isinstance(resolved, str) or str(resolved) != entry.profile_file:
        return False
    return _sha256(resolved) == entry.profile_sha256


def lookup(fabric: Path) -> Lookup:
    """The network kept for this fabric file, if it is still what loading it would give."""
    since = time.time_ns() - _CLOCK_SLACK_NS
    content = _small_file(fabric) if enabled() else None
    if content is None:
        return Lookup(fabric, None, None, since)
    key = _key(fabric, content)
    folder = _usable_dir(create=False)
    if folder is None:  # none yet (store makes it), or not private (store refuses it too)
        return Lookup(fabric, None, key, since)
    try:
        kept = folder / f"{_PREFIX}{key}.pickle"
        with kept.open("rb") as handle:
            if not _private(os.fstat(handle.fileno())):
                return Lookup(fabric, None, None, since)
            entry = pickle.load(handle)
        os.utime(kept)  # recently used: kept longest
    except Exception:  # absent, torn or from other code: the fabric is loaded instead
        return Lookup(fabric, None, key, since)
    return Lookup(fabric, entry.network if _still_valid(entry, fabric) else None, key, since)


def _changed_since(path: Path, since_ns: int) -> bool:
    try:
        return os.stat(path).st_mtime_ns >= since_ns
    except OSError:
        return True


def store(found: Lookup, profile_reference: str, profile_file: Path, network: object) -> None:
    """Keep a network loaded after ``found`` (best effort: a cache that cannot be written is
    skipped, never an error of the command)."""
    if found.key is None or any(
        _changed_since(p, found.since_ns) for p in (found.fabric, profile_file)
    ):
        return
    folder = _usable_dir(create=True)
    profile_sha256 = _sha256(profile_file)
    if folder is None or profile_sha256 is None:
        return
    import tempfile  # here: a run that finds its network kept never writes

    try:
        entry = Entry(FORMAT, profile_reference, str(profile_file), profile_sha256, network)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pickle")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, folder / f"{_PREFIX}{found.key}.pickle")
        _trim(folder)
    except (OSError, pickle.PicklingError):
        Path(temporary).unlink(missing_ok=True)


def _trim(folder: Path) -> None:
    """At most MAX_ENTRIES networks: the least recently used go first."""
    kept = sorted(folder.glob(f"{_PREFIX}*.pickle"), key=lambda p: p.stat().st_mtime_ns)
    for old in kept[: max(0, len(kept) - MAX_ENTRIES)]:
        old.unlink(missing_ok=True)
