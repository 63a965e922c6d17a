"""TLS and basic auth configured like Prometheus exporters (exporter-toolkit's web config file).

The format is exporter-toolkit's ``docs/web-configuration.md`` (the file ``prometheus
--web.config.file`` and every official exporter read): ``tls_server_config`` with
``cert_file``/``key_file`` (or inline ``cert``/``key``), ``client_ca_file``,
``client_auth_type``, ``min_version``/``max_version``; ``http_server_config.headers``;
``basic_auth_users`` mapping user names to bcrypt hashes (``htpasswd -nBC 10 "" | tr -d ':\\n'``).
Relative paths are relative to the config file, as in exporter-toolkit. Keys that Python's ssl
module cannot honour (Go cipher suite and curve names, SAN allow-lists, rate limits) are
refused by name rather than silently ignored.

Every error names ``FILE:LINE:COL: field`` (the file is read with :func:`agent.yamlsource.
load_yaml`, which keeps positions and refuses duplicate keys). Inline PEM (``cert:``/``key:``)
never touches the disk: ``ssl`` only loads files, so it is handed an anonymous memory file
(``memfd_create``) through ``/proc/self/fd/N`` for the duration of the load.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import secrets
import ssl
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import AgentError, IntentError
from agent.yamlsource import SourceMap, dotted_path, load_yaml

TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users"}
TLS_KEYS = {
    "cert_file", "key_file", "cert", "key", "client_ca_file", "client_ca", "client_auth_type",
    "min_version", "max_version",
}  # fmt: skip
TLS_UNSUPPORTED = {
    "cipher_suites", "curve_preferences", "prefer_server_cipher_suites", "client_allowed_sans",
}  # fmt: skip
HTTP_KEYS = {"http2", "headers"}
HEADER_NAMES = {
    "Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options",
    "X-XSS-Protection", "Strict-Transport-Security",
}  # fmt: skip
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's crypto/tls ClientAuthType names; RequireAnyClientCert (a certificate required but not
# verified) has no equivalent in Python's ssl module.
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Modular crypt format: $2a|b|y$, two-digit cost, 22 salt + 31 hash characters of bcrypt's
# base64 alphabet. A cost above 16 (~5 s per check at ~70 ms for cost 10) would let every
# scrape with a known user name pin a thread for seconds, so it is refused too.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}")
BCRYPT_COST = range(4, 17)


@functools.cache
def _dummy_hash() -> bytes:
    """Checked against when the user is unknown, so a wrong user name costs the same bcrypt
    time as a wrong password (no user enumeration by timing)."""
    import bcrypt

    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(10))


class WebConfigError(AgentError):
    """The web config file cannot be used; exit code 2, nothing is served."""


@dataclass(frozen=True)
class Pem:
    """Inline PEM text from the web config (``cert:``, ``key:``, ``client_ca:``)."""

    text: str = field(repr=False)
    what: str


PemSource = Path | Pem


@dataclass(frozen=True)
class TlsSettings:
    cert_file: PemSource
    key_file: PemSource
    client_ca_file: PemSource | None = None
    client_auth: ssl.VerifyMode = ssl.CERT_NONE
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3


@dataclass
class BasicAuth:
    """bcrypt-checked users; successful checks are cached (as exporter-toolkit does) so a
    scrape every few seconds does not pay ~70 ms of bcrypt each time."""

    users: Mapping[str, bytes]
    _cache: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, user: str, password: str) -> bool:
        import bcrypt

        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join([user.encode(), hashed or b"", password.encode()]))
        digest = key.digest()
        with self._lock:
            if any(hmac.compare_digest(digest, known) for known in self._cache):
                return True
        try:
            valid = (
                bcrypt.checkpw(password.encode(), hashed or _dummy_hash()) and hashed is not None
            )
        except ValueError:
            return False
        if valid:
            with self._lock:
                if len(self._cache) > 1024:
                    self._cache.clear()
                self._cache.add(digest)
        return valid


@dataclass(frozen=True)
class WebConfig:
    source: Path
    tls: TlsSettings | None = None
    basic_auth: BasicAuth | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        return build_ssl_context(self.tls, self.source)


@contextlib.contextmanager
def _as_file(source: PemSource) -> Iterator[str]:
    """A path ``ssl`` can open: the file itself, or an anonymous memory file for inline PEM
    (no name in any directory, gone when closed; nothing is left in /tmp)."""
    if isinstance(source, Path):
        yield str(source)
        return
    fd = os.memfd_create(f"roce-webcfg-{source.what}", os.MFD_CLOEXEC)
    try:
        os.write(fd, source.text.encode())
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def build_ssl_context(tls: TlsSettings, source: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls.min_version
    context.maximum_version = tls.max_version
    try:
        with _as_file(tls.cert_file) as cert, _as_file(tls.key_file) as key:
            context.load_cert_chain(cert, key)
        if tls.client_ca_file is not None:
            with _as_file(tls.client_ca_file) as ca:
                context.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(
            f"{source}: tls_server_config: cannot load the certificate/key: {exc}"
        ) from None
    context.verify_mode = tls.client_auth
    return context


class _Source:
    """Where the web config's values are, for ``FILE:LINE:COL: field: message`` errors."""

    def __init__(self, path: Path, where: SourceMap) -> None:
        self.path = path
        self.where = where

    def error(self, loc: Sequence[str | int], message: str) -> WebConfigError:
        position = self.where.locate(loc)
        prefix = str(position) if position else str(self.path)
        field_name = dotted_path(loc)
        return WebConfigError(f"{prefix}: {field_name or 'top level'}: {message}")

    def key_error(self, loc: Sequence[str | int], message: str) -> WebConfigError:
        position = self.where.keys.get(tuple(loc)) or self.where.locate(loc)
        prefix = str(position) if position else str(self.path)
        return WebConfigError(f"{prefix}: {dotted_path(loc)}: {message}")


def _mapping(value: Any, loc: tuple[str, ...], src: _Source) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise src.error(loc, f"expected a mapping, got {type(value).__name__}")
    return value


def _unknown(
    keys: Mapping[str, Any], allowed: set[str], loc: tuple[str, ...], src: _Source
) -> None:
    extra = sorted(set(map(str, keys)) - allowed)
    if extra:
        raise src.key_error(
            (*loc, extra[0]),
            f"unknown field(s) {', '.join(extra)} (known: {', '.join(sorted(allowed))})",
        )


def _inline_pem(text: Any, what: str, src: _Source) -> Pem:
    if not isinstance(text, str) or "-----BEGIN" not in text:
        raise src.error(("tls_server_config", what), "expected PEM text")
    return Pem(text, what)


def _path(value: Any, key: str, src: _Source) -> Path:
    loc = ("tls_server_config", key)
    if not isinstance(value, str) or not value:
        raise src.error(loc, "expected a file name")
    path = Path(value)
    path = path if path.is_absolute() else src.path.parent / path
    if not path.is_file():
        raise src.error(loc, f"no such file {path}")
    return path


def _tls(section: Mapping[str, Any], src: _Source) -> TlsSettings:
    top = ("tls_server_config",)
    unsupported = sorted(set(section) & TLS_UNSUPPORTED)
    if unsupported:
        raise src.key_error(
            (*top, unsupported[0]),
            f"{', '.join(unsupported)} not supported by this exporter (Python's ssl module "
            "has no Go cipher/curve names); remove it",
        )
    _unknown(section, TLS_KEYS, top, src)
    chosen: dict[str, PemSource | None] = {}
    for file_key, text_key in (
        ("cert_file", "cert"),
        ("key_file", "key"),
        ("client_ca_file", "client_ca"),
    ):
        if file_key in section and text_key in section:
            raise src.error(top, f"give {file_key} or {text_key}, not both")
        if file_key in section:
            chosen[file_key] = _path(section[file_key], file_key, src)
        elif text_key in section:
            chosen[file_key] = _inline_pem(section[text_key], text_key, src)
        elif file_key != "client_ca_file":
            raise src.error(top, f"{file_key} is required")
    auth_name = section.get("client_auth_type", "NoClientCert")
    if auth_name not in CLIENT_AUTH:
        raise src.error(
            (*top, "client_auth_type"),
            f"{auth_name!r} not supported (use one of {', '.join(CLIENT_AUTH)})",
        )
    ca = chosen.get("client_ca_file")
    if CLIENT_AUTH[auth_name] != ssl.CERT_NONE and ca is None:
        raise src.error(
            (*top, "client_auth_type"), f"client_auth_type {auth_name} needs client_ca_file"
        )
    versions = []
    for key_name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = section.get(key_name, default)
        if name not in TLS_VERSIONS:
            raise src.error((*top, key_name), f"{name!r} is not one of {', '.join(TLS_VERSIONS)}")
        versions.append(TLS_VERSIONS[name])
    if versions[0] > versions[1]:
        raise src.error((*top, "min_version"), "min_version is above max_version")
    cert, key = chosen["cert_file"], chosen["key_file"]
    assert cert is not None and key is not None
    settings = TlsSettings(cert, key, ca, CLIENT_AUTH[auth_name], versions[0], versions[1])
    try:
        build_ssl_context(settings, src.path)  # fail at startup, not on the first scrape
    except WebConfigError as exc:
        raise src.error(top, str(exc).split(": tls_server_config: ", 1)[-1]) from None
    return settings


def _users(section: Mapping[str, Any], src: _Source) -> BasicAuth | None:
    import bcrypt

    users: dict[str, bytes] = {}
    for user, hashed in section.items():
        loc = ("basic_auth_users", str(user))
        match = BCRYPT_HASH.fullmatch(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise src.error(
                loc,
                'expected a bcrypt hash ($2y$..., e.g. from `htpasswd -nBC 10 "" | '
                "tr -d ':\\n'`), not a plain password or a truncated hash",
            )
        assert isinstance(hashed, str)
        cost = int(match["cost"])
        if cost not in BCRYPT_COST:
            raise src.error(
                loc,
                f"bcrypt cost Expected: {BCRYPT_COST.start}..{BCRYPT_COST.stop - 1} "
                f"Actual: {cost} (each login would cost 2^{cost} rounds)",
            )
        # The same salt at the lowest cost: bcrypt parses it exactly as it will at login,
        # for a few milliseconds, so a hash it would refuse is refused now, not per scrape.
        try:
            bcrypt.checkpw(b"", f"{hashed[:4]}04{hashed[6:]}".encode())
        except ValueError as exc:
            raise src.error(loc, f"bcrypt refuses this hash: {exc}") from None
        users[str(user)] = hashed.encode()
    return BasicAuth(users) if users else None


def load_web_config(path: Path) -> WebConfig:
    """Parse and check a web config file; every problem is a :class:`WebConfigError`
    naming ``FILE:LINE:COL`` and the field."""
    try:
        data, where = load_yaml(path)
    except IntentError as exc:
        first = exc.problems[0]
        if first.position is None:  # about the whole file: unreadable, not text, not YAML
            reason = first.message.removeprefix(f"{path}: ")
            raise WebConfigError(f"{path}: cannot read the web config: {reason}") from None
        raise WebConfigError(f"{first} (web config)") from None
    src = _Source(path, where)
    top = _mapping(data, (), src)
    _unknown(top, TOP_KEYS, (), src)
    tls_section = _mapping(top.get("tls_server_config"), ("tls_server_config",), src)
    http_section = _mapping(top.get("http_server_config"), ("http_server_config",), src)
    _unknown(http_section, HTTP_KEYS, ("http_server_config",), src)
    if "http2" in http_section and not isinstance(http_section["http2"], bool):
        raise src.error(("http_server_config", "http2"), "expected true or false")
    headers_loc = ("http_server_config", "headers")
    headers = _mapping(http_section.get("headers"), headers_loc, src)
    _unknown(headers, HEADER_NAMES, headers_loc, src)
    for name, value in headers.items():
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise src.error((*headers_loc, name), "expected a one-line string")
    users = _mapping(top.get("basic_auth_users"), ("basic_auth_users",), src)
    return WebConfig(
        source=path,
        tls=_tls(tls_section, src) if tls_section else None,
        basic_auth=_users(users, src),
        headers={str(k): str(v) for k, v in headers.items() if v},
    )
