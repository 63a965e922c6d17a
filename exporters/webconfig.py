"""TLS and basic auth configured like Prometheus exporters (exporter-toolkit's web config file).

The format is exporter-toolkit's ``docs/web-configuration.md`` (the file ``prometheus
--web.config.file`` and every official exporter read): ``tls_server_config`` with
``cert_file``/``key_file`` (or inline ``cert``/``key``), ``client_ca_file``,
``client_auth_type``, ``min_version``/``max_version``; ``http_server_config.headers``;
``basic_auth_users`` mapping user names to bcrypt hashes (``htpasswd -nBC 10 "" | tr -d ':\\n'``).
Relative paths are relative to the config file, as in exporter-toolkit. Keys that Python's ssl
module cannot honour (Go cipher suite and curve names, SAN allow-lists) are refused by name
with the reason, and any other unknown key (a newer toolkit's ``rate_limit``, a typo) is
refused with the list of known ones, rather than silently ignored.

Every error names ``FILE:LINE:COL: field`` (the file is read with :func:`common.yamlsource.
load_yaml`, which keeps positions and refuses duplicate keys, and validated by the pydantic
models below, whose errors :func:`common.validation.field_errors` places back in the file).
Inline PEM (``cert:``/``key:``) never touches the disk: ``ssl`` only loads files, so it is
handed an anonymous memory file (``memfd_create``) through ``/proc/self/fd/N`` for the
duration of the load.
"""

from __future__ import annotations

import contextlib
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
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from common.errors import AgentError, IntentError, Problem, printable
from common.validation import field_errors
from common.yamlsource import PathKey, SourceMap, dotted_path, load_yaml

# exporter-toolkit keys Python's ssl module cannot honour: refused by name, with the reason.
TLS_UNSUPPORTED = {
    "cipher_suites": "Python's ssl module has no Go cipher suite names",
    "curve_preferences": "Python's ssl module has no Go curve names",
    "prefer_server_cipher_suites": "it only orders Go's cipher suites",
    "client_allowed_sans": "Python's ssl module has no SAN allow-list for client certificates",
}
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
# base64 alphabet. A cost above 16 (each step doubles bcrypt's time) would let every scrape
# with a known user name pin a thread for seconds, so it is refused too.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}")
BCRYPT_COST = range(4, 17)


def dummy_hash(users: Mapping[str, bytes]) -> bytes:
    """A hash of a random secret at the cost of the users' hashes (the highest, where they
    differ): checked when the user name is unknown, so an unknown user costs the same bcrypt
    time as a known one with a wrong password (no user enumeration by timing). Made when the
    config is loaded, not at the first unknown user."""
    import bcrypt

    costs = [int(hashed[4:6]) for hashed in users.values()] or [10]
    return bytes(bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(max(costs))))


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
    scrape every few seconds does not pay for bcrypt each time. A wrong user name is checked
    against :func:`dummy_hash` at the users' cost, so it takes as long as a wrong password."""

    users: Mapping[str, bytes]
    _cache: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _dummy: bytes = b""

    def __post_init__(self) -> None:
        if not self._dummy:
            self._dummy = dummy_hash(self.users)

    def __getstate__(self) -> dict[str, Any]:
        # The daemon's reload worker sends a loaded config to the daemon: no lock, no cache
        # of who logged in.
        return {"users": dict(self.users), "_dummy": self._dummy}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.users, self._dummy = state["users"], state["_dummy"]
        self._cache, self._lock = set(), threading.Lock()

    def _digest(self, user: str, password: str) -> bytes:
        hashed = self.users.get(user) or b""
        return hashlib.sha256(b"\0".join([user.encode(), hashed, password.encode()])).digest()

    def remembers(self, user: str, password: str) -> bool:
        """This user logged in with this password before: no bcrypt needed (the server lets a
        known scrape past the queue of password checks)."""
        digest = self._digest(user, password)
        with self._lock:
            return any(hmac.compare_digest(digest, known) for known in self._cache)

    def check(self, user: str, password: str) -> bool:
        import bcrypt

        if self.remembers(user, password):
            return True
        hashed = self.users.get(user)
        digest = self._digest(user, password)
        try:
            valid = bcrypt.checkpw(password.encode(), hashed or self._dummy) and hashed is not None
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


class _TlsLoadError(Exception):
    """``ssl`` refused a file of ``tls_server_config``; ``key`` is the field that names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _key_name(source: PemSource, role: str) -> str:
    return source.what if isinstance(source, Pem) else f"{role}_file"


def _has_certificate(file: str) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=file)
    except (OSError, ssl.SSLError):
        return False
    return True


def _load_tls(context: ssl.SSLContext, tls: TlsSettings) -> None:
    """Load the certificate, key and client CA into ``context``; a failure names the field.

    OpenSSL's error for a bad pair ("PEM lib") does not say which file is wrong, so the cert
    is loaded alone to tell "not a certificate" from "a key that is bad or does not match".
    """
    with _as_file(tls.cert_file) as cert, _as_file(tls.key_file) as key:
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            if not _has_certificate(cert):
                raise _TlsLoadError(
                    _key_name(tls.cert_file, "cert"), f"cannot load the certificate: {exc}"
                ) from None
            raise _TlsLoadError(
                _key_name(tls.key_file, "key"),
                f"cannot load the key, or it does not match the certificate: {exc}",
            ) from None
    if tls.client_ca_file is not None:
        with _as_file(tls.client_ca_file) as ca:
            try:
                context.load_verify_locations(cafile=ca)
            except (OSError, ssl.SSLError) as exc:
                raise _TlsLoadError(
                    _key_name(tls.client_ca_file, "client_ca"),
                    f"cannot load the client CA: {exc}",
                ) from None


def _server_context(tls: TlsSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls.min_version
    context.maximum_version = tls.max_version
    _load_tls(context, tls)
    context.verify_mode = tls.client_auth
    return context


def build_ssl_context(tls: TlsSettings, source: Path) -> ssl.SSLContext:
    try:
        return _server_context(tls)
    except _TlsLoadError as exc:  # a file changed since the config was loaded
        raise WebConfigError(f"{source}: tls_server_config.{exc.key}: {exc.message}") from None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_mapping(value: Any) -> dict[str, Any]:
    """A section as exporter-toolkit reads it: ``null`` is empty, keys are names (YAML's
    ``1:`` is the key ``'1'``, as Go's string-keyed maps take it)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping, got {type(value).__name__}")
    return {str(key): item for key, item in value.items()}


class _Section(_Model):
    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> dict[str, Any]:
        return _as_mapping(value)


def _shown(value: Any) -> str:
    """``repr`` of a value from the file, short enough for a one-line error."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _file_name(value: Any, info: ValidationInfo) -> Path:
    """A file that exists now, relative to the config file's folder (as in exporter-toolkit)."""
    if not isinstance(value, str) or not value:
        raise ValueError("expected a file name")
    base = info.context.get("base", Path()) if isinstance(info.context, dict) else Path()
    path = Path(value)
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise ValueError(f"not a regular file: {path}" if path.exists() else f"no such file {path}")
    return path


def _pem_text(value: Any) -> str:
    if not isinstance(value, str) or "-----BEGIN" not in value:
        raise ValueError("expected PEM text")
    return value


def _true_or_false(value: Any) -> bool:
    # YAML already turns true/false (and yes/no) into bool; a string or 1 is a mistake.
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _one_line(value: Any) -> str:
    # A newline in a header value would let the config inject headers into every response.
    if not isinstance(value, str) or "\n" in value or "\r" in value:
        raise ValueError("expected a one-line string")
    return value


def _bcrypt_hash(value: Any) -> str:
    import bcrypt

    match = BCRYPT_HASH.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            'expected a bcrypt hash ($2y$..., e.g. from `htpasswd -nBC 10 "" | '
            "tr -d ':\\n'`), not a plain password or a truncated hash"
        )
    cost = int(match["cost"])
    if cost not in BCRYPT_COST:
        raise ValueError(
            f"bcrypt cost Expected: {BCRYPT_COST.start}..{BCRYPT_COST.stop - 1} "
            f"Actual: {cost} (each login would cost 2^{cost} rounds)"
        )
    # The same salt at the lowest cost: bcrypt parses it exactly as it will at login, for a
    # few milliseconds, so a hash it would refuse is refused now, not on every scrape.
    try:
        bcrypt.checkpw(b"", f"{value[:4]}04{value[6:]}".encode())
    except ValueError as exc:
        raise ValueError(f"bcrypt refuses this hash: {exc}") from None
    return str(value)


# Optional fields: the validator wraps ``| None`` so that a key given as ``null`` is refused
# (only an absent key takes the default, which is never validated).
FileName = Annotated[Path | None, BeforeValidator(_file_name)]
PemText = Annotated[str | None, BeforeValidator(_pem_text)]
HeaderValue = Annotated[str | None, BeforeValidator(_one_line)]
BcryptHash = Annotated[str, BeforeValidator(_bcrypt_hash)]
_GIVEN_BUT_INVALID = object()  # what ``info.data`` lacks: a field that failed validation


class TlsServerConfig(_Section):
    """``tls_server_config``. Field order matters: a validator sees only the fields above it."""

    cert_file: FileName = None
    cert: PemText = None
    key_file: FileName = None
    key: PemText = None
    client_ca_file: FileName = None
    client_ca: PemText = None
    client_auth_type: str = "NoClientCert"
    min_version: str = "TLS12"
    max_version: str = "TLS13"

    @field_validator("cert", "key", "client_ca")
    @classmethod
    def _file_or_text(cls, value: str | None, info: ValidationInfo) -> str | None:
        file_key = f"{info.field_name}_file"
        if info.data.get(file_key, _GIVEN_BUT_INVALID) is not None:
            raise ValueError(f"give {file_key} or {info.field_name}, not both")
        return value

    @field_validator("client_auth_type", mode="before")
    @classmethod
    def _client_auth(cls, value: Any, info: ValidationInfo) -> str:
        if not isinstance(value, str) or value not in CLIENT_AUTH:
            why = (
                ": Python's ssl module cannot ask for a certificate without verifying it"
                if value == "RequireAnyClientCert"
                else ""
            )
            raise ValueError(
                f"{_shown(value)} not supported{why} (use one of {', '.join(CLIENT_AUTH)})"
            )
        no_ca = all(
            info.data.get(key, _GIVEN_BUT_INVALID) is None
            for key in ("client_ca_file", "client_ca")
        )
        if CLIENT_AUTH[value] != ssl.CERT_NONE and no_ca:
            raise ValueError(f"client_auth_type {value} needs client_ca_file (or client_ca)")
        return value

    @field_validator("min_version", "max_version", mode="before")
    @classmethod
    def _version(cls, value: Any, info: ValidationInfo) -> str:
        if not isinstance(value, str) or value not in TLS_VERSIONS:
            raise ValueError(f"{_shown(value)} is not one of {', '.join(TLS_VERSIONS)}")
        # max_version defaults to the highest version, so min > max needs an explicit
        # max_version: the error points at it.
        low = info.data.get("min_version")
        if (
            info.field_name == "max_version"
            and low in TLS_VERSIONS
            and TLS_VERSIONS[low] > TLS_VERSIONS[value]
        ):
            raise ValueError(f"min_version {low} is above max_version {value}")
        return value

    @model_validator(mode="after")
    def _required(self) -> Self:
        missing = [
            f"{file_key} is required (or {text_key}: inline PEM)"
            for file_key, text_key in (("cert_file", "cert"), ("key_file", "key"))
            if getattr(self, file_key) is None and getattr(self, text_key) is None
        ]
        if missing:
            raise ValueError("; ".join(missing))
        return self

    def settings(self) -> TlsSettings:
        def source(file_key: str, text_key: str) -> PemSource | None:
            path, text = getattr(self, file_key), getattr(self, text_key)
            return path if path is not None else Pem(text, text_key) if text is not None else None

        cert, key = source("cert_file", "cert"), source("key_file", "key")
        assert cert is not None and key is not None  # _required
        return TlsSettings(
            cert_file=cert,
            key_file=key,
            client_ca_file=source("client_ca_file", "client_ca"),
            client_auth=CLIENT_AUTH[self.client_auth_type],
            min_version=TLS_VERSIONS[self.min_version],
            max_version=TLS_VERSIONS[self.max_version],
        )


class SecurityHeaders(_Section):
    """``http_server_config.headers``: exporter-toolkit's list of settable headers."""

    content_security_policy: HeaderValue = Field(None, alias="Content-Security-Policy")
    x_frame_options: HeaderValue = Field(None, alias="X-Frame-Options")
    x_content_type_options: HeaderValue = Field(None, alias="X-Content-Type-Options")
    x_xss_protection: HeaderValue = Field(None, alias="X-XSS-Protection")
    strict_transport_security: HeaderValue = Field(None, alias="Strict-Transport-Security")


class HttpServerConfig(_Section):
    # Accepted for compatibility; this server speaks HTTP/1.x whatever it says.
    http2: Annotated[bool, BeforeValidator(_true_or_false)] = True
    headers: SecurityHeaders = SecurityHeaders()


class WebConfigFile(_Model):
    """The whole file, as exporter-toolkit's ``web.Config``."""

    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig = HttpServerConfig()
    basic_auth_users: dict[str, BcryptHash] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> dict[str, Any]:
        data = _as_mapping(value)
        # An empty tls_server_config (``{}`` or ``null``) means plain HTTP, as before.
        if data.get("tls_server_config", ()) in (None, {}):
            del data["tls_server_config"]
        return data

    @field_validator("basic_auth_users", mode="before")
    @classmethod
    def _users(cls, value: Any) -> dict[str, Any]:
        return _as_mapping(value)


def _names(model: type[BaseModel]) -> str:
    return ", ".join(sorted(info.alias or name for name, info in model.model_fields.items()))


# Known keys per section, for "unknown field" errors.
_KNOWN: dict[PathKey, str] = {
    (): _names(WebConfigFile),
    ("tls_server_config",): _names(TlsServerConfig),
    ("http_server_config",): _names(HttpServerConfig),
    ("http_server_config", "headers"): _names(SecurityHeaders),
}


def _unknown_field(loc: PathKey, message: str) -> str:
    parent, key = loc[:-1], loc[-1]
    if parent == ("tls_server_config",) and key in TLS_UNSUPPORTED:
        return f"{key} not supported by this exporter ({TLS_UNSUPPORTED[str(key)]}); remove it"
    known = _KNOWN.get(parent)
    return f"{message} (known: {known})" if known else message


def _problems(exc: ValidationError, data: Any, where: SourceMap) -> list[Problem]:
    """The model's errors at FILE:LINE:COL; an unknown key is pointed at, not its value."""
    problems = []
    for error in field_errors(exc, data):
        message = _unknown_field(error.loc, error.message) if error.at_key else error.message
        position = (where.keys.get(error.loc) if error.at_key else None) or where.locate(error.loc)
        problems.append(Problem(position, dotted_path(error.loc) or "top level", message))
    return problems


def _error(path: Path, problems: Sequence[Problem]) -> WebConfigError:
    # Problem prints no file when it has no position; a web config error always names it.
    return WebConfigError(
        "\n".join(str(p) if p.position else f"{printable(str(path))}: {p}" for p in problems)
    )


def load_web_config(path: Path) -> WebConfig:
    """Parse and check a web config file; every problem is a :class:`WebConfigError`
    naming ``FILE:LINE:COL`` and the field (all problems, one a line)."""
    try:
        data, where = load_yaml(path)
    except IntentError as exc:
        first = exc.problems[0]
        if first.position is None:  # about the whole file: unreadable, not text, not YAML
            reason = first.message.removeprefix(f"{path}: ")
            raise WebConfigError(f"{path}: cannot read the web config: {reason}") from None
        raise WebConfigError(f"{first} (web config)") from None
    try:
        model = WebConfigFile.model_validate(data, context={"base": path.parent})
    except ValidationError as exc:
        raise _error(path, _problems(exc, data, where)) from None
    tls = model.tls_server_config.settings() if model.tls_server_config else None
    if tls is not None:
        try:
            _server_context(tls)  # fail at start, not at the first scrape
        except _TlsLoadError as exc:
            loc = ("tls_server_config", exc.key)
            raise _error(
                path, [Problem(where.locate(loc), dotted_path(loc), exc.message)]
            ) from None
    headers = model.http_server_config.headers.model_dump(by_alias=True, exclude_none=True)
    users = {user: hashed.encode() for user, hashed in model.basic_auth_users.items()}
    return WebConfig(
        source=path,
        tls=tls,
        basic_auth=BasicAuth(users) if users else None,
        headers={name: value for name, value in headers.items() if value},
    )
