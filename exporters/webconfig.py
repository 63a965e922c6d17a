"""TLS and basic auth configured like Prometheus exporters (exporter-toolkit's web config file).

The format is exporter-toolkit's ``docs/web-configuration.md`` (the file ``prometheus
--web.config.file`` and every official exporter read): ``tls_server_config`` with
``cert_file``/``key_file`` (or inline ``cert``/``key``), ``client_ca_file``,
``client_auth_type``, ``min_version``/``max_version``; ``http_server_config.headers``;
``basic_auth_users`` mapping user names to bcrypt hashes (``htpasswd -nBC 10 "" | tr -d ':\\n'``).
Relative paths are relative to the config file, as in exporter-toolkit. Keys that Python's ssl
module cannot honour (Go cipher suite and curve names, SAN allow-lists, rate limits) are
refused by name rather than silently ignored.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import ssl
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.errors import AgentError

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
BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")


@functools.cache
def _dummy_hash() -> bytes:
    """Checked against when the user is unknown, so a wrong user name costs the same bcrypt
    time as a wrong password (no user enumeration by timing)."""
    import bcrypt

    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(10))


class WebConfigError(AgentError):
    """The web config file cannot be used; exit code 2, nothing is served."""


@dataclass(frozen=True)
class TlsSettings:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
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


def build_ssl_context(tls: TlsSettings, source: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls.min_version
    context.maximum_version = tls.max_version
    try:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
        if tls.client_ca_file is not None:
            context.load_verify_locations(cafile=str(tls.client_ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(
            f"{source}: tls_server_config: cannot load the certificate/key: {exc}"
        ) from None
    context.verify_mode = tls.client_auth
    return context


def _mapping(value: Any, where: str, source: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WebConfigError(f"{source}: {where}: expected a mapping, got {type(value).__name__}")
    return value


def _unknown(keys: Mapping[str, Any], allowed: set[str], where: str, source: Path) -> None:
    extra = sorted(set(map(str, keys)) - allowed)
    if extra:
        raise WebConfigError(
            f"{source}: {where}: unknown field(s) {', '.join(extra)} "
            f"(known: {', '.join(sorted(allowed))})"
        )


def _inline_pem(text: Any, what: str, source: Path, holder: list[Path]) -> Path:
    """Inline PEM (``cert:``/``key:``) to a private temp file, since ssl only loads files."""
    if not isinstance(text, str) or "-----BEGIN" not in text:
        raise WebConfigError(f"{source}: tls_server_config.{what}: expected PEM text")
    with tempfile.NamedTemporaryFile("w", prefix=f"roce-webcfg-{what}-", delete=False) as handle:
        handle.write(text)
    path = Path(handle.name)
    path.chmod(0o600)
    holder.append(path)
    return path


def _path(value: Any, where: str, base: Path, source: Path) -> Path:
    if not isinstance(value, str) or not value:
        raise WebConfigError(f"{source}: {where}: expected a file name")
    path = Path(value)
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise WebConfigError(f"{source}: {where}: no such file {path}")
    return path


def _tls(section: Mapping[str, Any], source: Path) -> TlsSettings:
    unsupported = sorted(set(section) & TLS_UNSUPPORTED)
    if unsupported:
        raise WebConfigError(
            f"{source}: tls_server_config: {', '.join(unsupported)} not supported by this "
            "exporter (Python's ssl module has no Go cipher/curve names); remove it"
        )
    _unknown(section, TLS_KEYS, "tls_server_config", source)
    base = source.parent
    inline: list[Path] = []
    for file_key, text_key in (("cert_file", "cert"), ("key_file", "key")):
        if file_key in section and text_key in section:
            raise WebConfigError(
                f"{source}: tls_server_config: give {file_key} or {text_key}, not both"
            )
    if "cert_file" in section:
        cert = _path(section["cert_file"], "tls_server_config.cert_file", base, source)
    elif "cert" in section:
        cert = _inline_pem(section["cert"], "cert", source, inline)
    else:
        raise WebConfigError(f"{source}: tls_server_config: cert_file is required")
    if "key_file" in section:
        key = _path(section["key_file"], "tls_server_config.key_file", base, source)
    elif "key" in section:
        key = _inline_pem(section["key"], "key", source, inline)
    else:
        raise WebConfigError(f"{source}: tls_server_config: key_file is required")
    ca = None
    if "client_ca_file" in section:
        ca = _path(section["client_ca_file"], "tls_server_config.client_ca_file", base, source)
    elif "client_ca" in section:
        ca = _inline_pem(section["client_ca"], "client_ca", source, inline)
    auth_name = section.get("client_auth_type", "NoClientCert")
    if auth_name not in CLIENT_AUTH:
        raise WebConfigError(
            f"{source}: tls_server_config.client_auth_type: {auth_name!r} not supported "
            f"(use one of {', '.join(CLIENT_AUTH)})"
        )
    if CLIENT_AUTH[auth_name] != ssl.CERT_NONE and ca is None:
        raise WebConfigError(
            f"{source}: tls_server_config: client_auth_type {auth_name} needs client_ca_file"
        )
    versions = []
    for key_name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = section.get(key_name, default)
        if name not in TLS_VERSIONS:
            raise WebConfigError(
                f"{source}: tls_server_config.{key_name}: {name!r} is not one of "
                f"{', '.join(TLS_VERSIONS)}"
            )
        versions.append(TLS_VERSIONS[name])
    if versions[0] > versions[1]:
        raise WebConfigError(f"{source}: tls_server_config: min_version is above max_version")
    settings = TlsSettings(cert, key, ca, CLIENT_AUTH[auth_name], versions[0], versions[1])
    try:
        build_ssl_context(settings, source)  # fail at startup, not on the first scrape
    finally:
        for path in inline:
            if path not in (settings.cert_file, settings.key_file, settings.client_ca_file):
                path.unlink(missing_ok=True)
    return settings


def _users(section: Mapping[str, Any], source: Path) -> BasicAuth | None:
    users: dict[str, bytes] = {}
    for user, hashed in section.items():
        if not isinstance(hashed, str) or not hashed.startswith(BCRYPT_PREFIXES):
            raise WebConfigError(
                f"{source}: basic_auth_users.{user}: expected a bcrypt hash ($2y$..., e.g. "
                "from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`), not a plain password"
            )
        users[str(user)] = hashed.encode()
    return BasicAuth(users) if users else None


def load_web_config(path: Path) -> WebConfig:
    """Parse and check a web config file; every problem is a :class:`WebConfigError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WebConfigError(f"{path}: cannot read the web config: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{path}: not valid YAML: {exc}") from None
    top = _mapping(data, "top level", path)
    _unknown(top, TOP_KEYS, "top level", path)
    tls_section = _mapping(top.get("tls_server_config"), "tls_server_config", path)
    http_section = _mapping(top.get("http_server_config"), "http_server_config", path)
    _unknown(http_section, HTTP_KEYS, "http_server_config", path)
    if "http2" in http_section and not isinstance(http_section["http2"], bool):
        raise WebConfigError(f"{path}: http_server_config.http2: expected true or false")
    headers = _mapping(http_section.get("headers"), "http_server_config.headers", path)
    _unknown(headers, HEADER_NAMES, "http_server_config.headers", path)
    for name, value in headers.items():
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise WebConfigError(f"{path}: http_server_config.headers.{name}: one-line string")
    users = _mapping(top.get("basic_auth_users"), "basic_auth_users", path)
    return WebConfig(
        source=path,
        tls=_tls(tls_section, path) if tls_section else None,
        basic_auth=_users(users, path),
        headers={str(k): str(v) for k, v in headers.items() if v},
    )
