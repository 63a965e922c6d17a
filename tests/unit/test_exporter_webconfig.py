"""Web config (exporter-toolkit format): parsing, TLS with a self-signed cert, bcrypt basic
auth over a real HTTPS connection, and the CLI's exit code 2 for a bad file."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import click
import pytest
import yaml

from exporters.server import ListenError, MetricsServer, parse_listen
from exporters.store import SnapshotStore
from exporters.webconfig import WebConfigError, load_web_config

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-scraper"


def exporter_cli() -> list[str]:
    """How a user runs the command (``roce-agent exporter`` once it is registered)."""
    from agent.app.cli import main

    # main.commands holds only the commands defined in agent.app.cli (the rest load lazily)
    if "exporter" in main.list_commands(click.Context(main)):
        return [sys.executable, "-m", "agent", "exporter"]
    return [
        sys.executable,
        "-c",
        "from agent.app.exporter import exporter_command; exporter_command()",
    ]


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    folder = tmp_path_factory.mktemp("tls")
    crt, key = folder / "server.crt", folder / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(crt),
            "-subj",
            "/CN=roce-exporter-test",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return crt, key


def write(folder: Path, data: object, name: str = "web.yml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture(scope="module")
def hashed() -> str:
    # $2y$ is what htpasswd -B writes; exporter-toolkit and Python's bcrypt both take it.
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", "$2y$")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"tls_config": {}}, "unknown field 'tls_config' (known: basic_auth_users,"),
        ({"basic_auth_users": {"prom": "plaintext"}}, "basic_auth_users.prom: expected a bcrypt"),
        ({"tls_server_config": {"cert_file": "server.crt"}}, "key_file is required"),
        (
            {"tls_server_config": {"cert_file": "missing.crt", "key_file": "server.key"}},
            "tls_server_config.cert_file: no such file",
        ),
        (
            {
                "tls_server_config": {
                    "cert_file": "server.crt",
                    "key_file": "server.key",
                    "min_version": "TLS99",
                }
            },
            "min_version: 'TLS99' is not one of",
        ),
        (
            {
                "tls_server_config": {
                    "cert_file": "server.crt",
                    "key_file": "server.key",
                    "client_auth_type": "RequireAndVerifyClientCert",
                }
            },
            "needs client_ca_file",
        ),
        (
            {
                "tls_server_config": {
                    "cert_file": "server.crt",
                    "key_file": "server.key",
                    "cipher_suites": ["TLS_AES_128_GCM_SHA256"],
                }
            },
            "cipher_suites not supported",
        ),
        (
            {"tls_server_config": {"cert_file": "server.key", "key_file": "server.key"}},
            "cannot load the certificate",
        ),
        (
            {"http_server_config": {"headers": {"X-Evil": "1"}}},
            "unknown field 'X-Evil' (known: Content-Security-Policy,",
        ),
        ("basic_auth_users: [unclosed", "YAML syntax error"),
        (["a", "list"], "top level: expected a mapping"),
    ],
)
def test_bad_web_config_names_file_and_field(
    tmp_path: Path, cert: tuple[Path, Path], content: object, message: str
) -> None:
    shutil.copy(cert[0], tmp_path / "server.crt")
    shutil.copy(cert[1], tmp_path / "server.key")
    path = write(tmp_path, content)
    with pytest.raises(WebConfigError) as caught:
        load_web_config(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_relative_paths_are_relative_to_the_config_file(
    tmp_path: Path, cert: tuple[Path, Path], hashed: str
) -> None:
    shutil.copy(cert[0], tmp_path / "server.crt")
    shutil.copy(cert[1], tmp_path / "server.key")
    path = write(
        tmp_path,
        {
            "tls_server_config": {"cert_file": "server.crt", "key_file": "server.key"},
            "basic_auth_users": {"prometheus": hashed},
            "http_server_config": {"http2": True, "headers": {"X-Frame-Options": "deny"}},
        },
    )
    config = load_web_config(path)
    assert config.tls is not None and config.tls.cert_file == tmp_path / "server.crt"
    assert config.basic_auth is not None and config.basic_auth.check("prometheus", PASSWORD)
    assert not config.basic_auth.check("prometheus", "wrong")
    assert not config.basic_auth.check("nobody", PASSWORD)
    assert config.headers == {"X-Frame-Options": "deny"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_prometheus_accepts_the_same_file(
    tmp_path: Path, cert: tuple[Path, Path], hashed: str
) -> None:
    """The format is Prometheus's own: promtool agrees with our parser on a valid file."""
    shutil.copy(cert[0], tmp_path / "server.crt")
    shutil.copy(cert[1], tmp_path / "server.key")
    path = write(
        tmp_path,
        {
            "tls_server_config": {
                "cert_file": "server.crt",
                "key_file": "server.key",
                "min_version": "TLS12",
            },
            "basic_auth_users": {"prometheus": hashed},
        },
    )
    load_web_config(path)
    done = subprocess.run(
        ["promtool", "check", "web-config", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def tls_server(tmp_path: Path, cert: tuple[Path, Path], hashed: str) -> Iterator[MetricsServer]:
    from prometheus_client.registry import CollectorRegistry

    from exporters.collector import RoceCollector

    path = write(
        tmp_path,
        {
            "tls_server_config": {"cert_file": str(cert[0]), "key_file": str(cert[1])},
            "basic_auth_users": {"prometheus": hashed},
        },
    )
    registry = CollectorRegistry()
    registry.register(RoceCollector(SnapshotStore("lab", [])))
    server = MetricsServer(registry, ("127.0.0.1", 0), load_web_config(path))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def fetch(url: str, context: ssl.SSLContext | None, user: str | None, password: str) -> int:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            body = response.read().decode()
            assert "roce_exporter_info" in body
            return int(response.status)
    except urllib.error.HTTPError as exc:
        assert exc.headers.get("WWW-Authenticate", "").startswith("Basic")
        return int(exc.code)


def test_tls_and_basic_auth_over_https(tls_server: MetricsServer, cert: tuple[Path, Path]) -> None:
    context = ssl.create_default_context(cafile=str(cert[0]))
    url = tls_server.url
    assert url.startswith("https://127.0.0.1:")
    assert fetch(url, context, "prometheus", PASSWORD) == 200
    assert fetch(url, context, "prometheus", PASSWORD) == 200  # cached check
    assert fetch(url, context, "prometheus", "wrong-password") == 401
    assert fetch(url, context, "someone", PASSWORD) == 401
    assert fetch(url, context, None, "") == 401


def test_plain_http_to_the_tls_port_gets_no_metrics(tls_server: MetricsServer) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(tls_server.url.replace("https://", "http://"), timeout=5).read()


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:9417", ("127.0.0.1", 9417)), (":9417", ("", 9417)), ("[::1]:0", ("::1", 0))],
)
def test_listen_addresses(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["9417", "host:", "host:http", "1.2.3.4:70000"])
def test_bad_listen_addresses(value: str) -> None:
    with pytest.raises(ListenError, match="expected HOST:PORT"):
        parse_listen(value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--web-config", "WEB"], "basic_auth_users.prometheus: expected a bcrypt hash"),
        (["--listen", "nowhere"], "--listen 'nowhere': expected HOST:PORT"),
        (["--web-config", "/nonexistent/web.yml"], "cannot read the web config"),
    ],
)
def test_cli_refuses_bad_input_with_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    web = write(tmp_path, {"basic_auth_users": {"prometheus": "hunter2"}})
    argv = [a.replace("WEB", str(web)) for a in args]
    fabric = REPO / "playbooks" / "fabrics" / "pod-400g.yml"
    done = subprocess.run(
        [*exporter_cli(), "--fabric", str(fabric), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


# Every check of the web config, one row each: YAML text → where the error points
# (":LINE:COL: field: ") and what it says. Lines 1-3 of TLS are a valid cert and key in the
# folder of the file (see ``tls_folder``).
TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
HASH_04 = "$2y$04$" + "." * 53  # a well-formed bcrypt hash at cost 4 (bcrypt parses it)
REFUSED = [
    ("empty file", "", ":1:1: ", "the file is empty"),
    ("top level not a mapping", "- a\n", ":1:1: top level: ", "expected a mapping, got list"),
    (
        "unknown top-level key",
        "basic_auth_users: {}\ntls: {}\n",
        ":2:1: tls: ",
        "unknown field 'tls' (known: basic_auth_users, http_server_config, tls_server_config)",
    ),
    (
        "tls_server_config not a mapping",
        "tls_server_config: [cert]\n",
        ":1:20: tls_server_config: ",
        "expected a mapping, got list",
    ),
    (
        "http_server_config not a mapping",
        "http_server_config: 1\n",
        ":1:21: http_server_config: ",
        "expected a mapping, got int",
    ),
    (
        "headers not a mapping",
        "http_server_config:\n  headers: [X-Frame-Options]\n",
        ":2:12: http_server_config.headers: ",
        "expected a mapping, got list",
    ),
    (
        "basic_auth_users not a mapping",
        "basic_auth_users: prometheus\n",
        ":1:19: basic_auth_users: ",
        "expected a mapping, got str",
    ),
    (
        "unknown tls key",
        TLS + "  cert_fil: server.crt\n",
        ":4:3: tls_server_config.cert_fil: ",
        "unknown field 'cert_fil' (known: cert, cert_file, client_auth_type, client_ca,",
    ),
    (
        "unsupported: curve_preferences",
        TLS + "  curve_preferences: [X25519]\n",
        ":4:3: tls_server_config.curve_preferences: ",
        "curve_preferences not supported by this exporter (Python's ssl module has no Go curve",
    ),
    (
        "unsupported: prefer_server_cipher_suites",
        TLS + "  prefer_server_cipher_suites: true\n",
        ":4:3: tls_server_config.prefer_server_cipher_suites: ",
        "prefer_server_cipher_suites not supported by this exporter",
    ),
    (
        "unsupported: client_allowed_sans",
        TLS + "  client_allowed_sans: [prometheus]\n",
        ":4:3: tls_server_config.client_allowed_sans: ",
        "client_allowed_sans not supported by this exporter (Python's ssl module has no SAN",
    ),
    (
        "unknown http key",
        "http_server_config:\n  http3: true\n",
        ":2:3: http_server_config.http3: ",
        "unknown field 'http3' (known: headers, http2)",
    ),
    (
        "http2 not a boolean",
        "http_server_config:\n  http2: 1\n",
        ":2:10: http_server_config.http2: ",
        "expected true or false",
    ),
    (
        "header value with a newline",
        'http_server_config:\n  headers:\n    X-Frame-Options: "deny\\nSet-Cookie: a=b"\n',
        ":3:22: http_server_config.headers.X-Frame-Options: ",
        "expected a one-line string",
    ),
    (
        "header value not a string",
        "http_server_config:\n  headers:\n    X-XSS-Protection: 1\n",
        ":3:23: http_server_config.headers.X-XSS-Protection: ",
        "expected a one-line string",
    ),
    (
        "header value null",
        "http_server_config:\n  headers:\n    X-Frame-Options:\n",
        ":3:21: http_server_config.headers.X-Frame-Options: ",
        "expected a one-line string",
    ),
    (
        "cert_file empty",
        "tls_server_config:\n  cert_file: ''\n  key_file: server.key\n",
        ":2:14: tls_server_config.cert_file: ",
        "expected a file name",
    ),
    (
        "cert_file not a string",
        "tls_server_config:\n  cert_file: 443\n  key_file: server.key\n",
        ":2:14: tls_server_config.cert_file: ",
        "expected a file name",
    ),
    (
        "cert_file null",
        "tls_server_config:\n  cert_file:\n  key_file: server.key\n",
        ":2:13: tls_server_config.cert_file: ",
        "expected a file name",
    ),
    (
        "client_ca_file null",
        TLS + "  client_ca_file:\n",
        ":4:18: tls_server_config.client_ca_file: ",
        "expected a file name",
    ),
    (
        "inline key null",
        "tls_server_config:\n  cert_file: server.crt\n  key:\n",
        ":3:7: tls_server_config.key: ",
        "expected PEM text",
    ),
    (
        "cert_file a directory",
        "tls_server_config:\n  cert_file: certs\n  key_file: server.key\n",
        ":2:14: tls_server_config.cert_file: ",
        "not a regular file: ",
    ),
    (
        "key_file missing",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: gone.key\n",
        ":3:13: tls_server_config.key_file: ",
        "no such file ",
    ),
    (
        "client_ca_file missing",
        TLS + "  client_ca_file: ca.crt\n",
        ":4:19: tls_server_config.client_ca_file: ",
        "no such file ",
    ),
    (
        "inline cert not PEM",
        "tls_server_config:\n  cert: hello\n  key_file: server.key\n",
        ":2:9: tls_server_config.cert: ",
        "expected PEM text",
    ),
    (
        "cert_file and cert",
        TLS + "  cert: '-----BEGIN CERTIFICATE-----'\n",
        ":4:9: tls_server_config.cert: ",
        "give cert_file or cert, not both",
    ),
    (
        "no certificate",
        "tls_server_config:\n  key_file: server.key\n",
        ":2:3: tls_server_config: ",
        "cert_file is required (or cert: inline PEM)",
    ),
    (
        "client_auth_type unknown",
        TLS + "  client_auth_type: VerifyAll\n",
        ":4:21: tls_server_config.client_auth_type: ",
        "'VerifyAll' not supported (use one of NoClientCert, RequestClientCert,",
    ),
    (
        "client_auth_type Go-only",
        TLS + "  client_auth_type: RequireAnyClientCert\n",
        ":4:21: tls_server_config.client_auth_type: ",
        "'RequireAnyClientCert' not supported: Python's ssl module cannot ask for a certificate",
    ),
    (
        "client_auth_type a list",
        TLS + "  client_auth_type: [NoClientCert]\n",
        ":4:21: tls_server_config.client_auth_type: ",
        "['NoClientCert'] not supported",
    ),
    (
        "client_auth_type without a CA",
        TLS + "  client_auth_type: VerifyClientCertIfGiven\n",
        ":4:21: tls_server_config.client_auth_type: ",
        "client_auth_type VerifyClientCertIfGiven needs client_ca_file (or client_ca)",
    ),
    (
        "max_version unknown",
        TLS + "  max_version: TLS14\n",
        ":4:16: tls_server_config.max_version: ",
        "'TLS14' is not one of TLS10, TLS11, TLS12, TLS13",
    ),
    (
        "min_version a list",
        TLS + "  min_version: [TLS12]\n",
        ":4:16: tls_server_config.min_version: ",
        "['TLS12'] is not one of",
    ),
    (
        "min_version above max_version",
        TLS + "  min_version: TLS13\n  max_version: TLS12\n",
        ":5:16: tls_server_config.max_version: ",
        "min_version TLS13 is above max_version TLS12",
    ),
    (
        "default min_version above max_version",
        TLS + "  max_version: TLS11\n",
        ":4:16: tls_server_config.max_version: ",
        "min_version TLS12 is above max_version TLS11",
    ),
    (
        "key of another certificate",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
        ":3:13: tls_server_config.key_file: ",
        "cannot load the key, or it does not match the certificate: [X509: KEY_VALUES_MISMATCH]",
    ),
    (
        "key_file holds a certificate",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n",
        ":3:13: tls_server_config.key_file: ",
        "cannot load the key, or it does not match the certificate",
    ),
    (
        "client CA not a certificate",
        TLS + "  client_ca_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
        ":4:19: tls_server_config.client_ca_file: ",
        "cannot load the client CA: ",
    ),
    (
        "bcrypt hash not a string",
        "basic_auth_users:\n  prometheus: 12\n",
        ":2:15: basic_auth_users.prometheus: ",
        "expected a bcrypt hash",
    ),
    (
        "bcrypt hash null",
        "basic_auth_users:\n  prometheus:\n",
        ":2:14: basic_auth_users.prometheus: ",
        "expected a bcrypt hash",
    ),
]


@pytest.fixture
def tls_folder(tmp_path: Path, cert: tuple[Path, Path]) -> Path:
    """server.crt/server.key (a pair), other.key (of no certificate here), certs/ (a folder)."""
    shutil.copy(cert[0], tmp_path / "server.crt")
    shutil.copy(cert[1], tmp_path / "server.key")
    subprocess.run(
        ["openssl", "genrsa", "-out", str(tmp_path / "other.key"), "2048"],
        check=True,
        capture_output=True,
    )
    (tmp_path / "certs").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [pytest.param(text, where, message, id=name) for name, text, where, message in REFUSED],
)
def test_every_check_names_file_line_column_and_field(
    tls_folder: Path, text: str, where: str, message: str
) -> None:
    path = write(tls_folder, text)
    with pytest.raises(WebConfigError) as caught:
        load_web_config(path)
    error = str(caught.value)
    assert error.startswith(f"{path}{where}"), error
    assert message in error.splitlines()[0], error


def test_every_problem_is_reported_one_a_line(tls_folder: Path) -> None:
    """Not only the first: each line its own FILE:LINE:COL."""
    path = write(
        tls_folder,
        "http_server_config:\n  http2: maybe\nbasic_auth_users:\n  prom: hunter2\nextra: 1\n",
    )
    with pytest.raises(WebConfigError) as caught:
        load_web_config(path)
    lines = str(caught.value).splitlines()
    assert [line.split(": ", 2)[:2] for line in lines] == [
        [f"{path}:2:10", "http_server_config.http2"],
        [f"{path}:4:9", "basic_auth_users.prom"],
        [f"{path}:5:1", "extra"],
    ], lines
    assert "hunter2" not in str(caught.value)


ACCEPTED = [
    (
        "null sections",
        "tls_server_config:\nhttp_server_config:\nbasic_auth_users:\n",
        None,
        None,
        {},
    ),
    ("empty tls section means plain HTTP", "tls_server_config: {}\n", None, None, {}),
    ("numeric user name", f"basic_auth_users:\n  1: '{HASH_04}'\n", None, ["1"], {}),
    (
        "empty header value is not sent",
        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: ''\n"
        "    X-Content-Type-Options: nosniff\n",
        None,
        None,
        {"X-Content-Type-Options": "nosniff"},
    ),
    (
        "client certificates with a CA",
        TLS + "  client_ca_file: server.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
        "  min_version: TLS13\n",
        (ssl.CERT_REQUIRED, ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
        None,
        {},
    ),
    (
        "TLS 1.2 only (as the file says)",
        TLS + "  min_version: TLS12\n  max_version: TLS12\n",
        (ssl.CERT_NONE, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
        None,
        {},
    ),
]


@pytest.mark.parametrize(
    ("text", "tls", "users", "headers"),
    [pytest.param(*row[1:], id=row[0]) for row in ACCEPTED],
)
def test_valid_files_load_as_before(
    tls_folder: Path,
    text: str,
    tls: tuple[ssl.VerifyMode, ssl.TLSVersion, ssl.TLSVersion] | None,
    users: list[str] | None,
    headers: dict[str, str],
) -> None:
    config = load_web_config(write(tls_folder, text))
    if tls is None:
        assert config.tls is None
    else:
        assert config.tls is not None
        assert (config.tls.client_auth, config.tls.min_version, config.tls.max_version) == tls
    if users is None:
        assert config.basic_auth is None
    else:
        assert config.basic_auth is not None and sorted(config.basic_auth.users) == users
    assert config.headers == headers


def test_inline_pem_is_taken_as_text(tls_folder: Path) -> None:
    crt, key = (tls_folder / "server.crt").read_text(), (tls_folder / "server.key").read_text()
    path = write(tls_folder, {"tls_server_config": {"cert": crt, "key": key}})
    config = load_web_config(path)
    assert config.tls is not None
    assert not isinstance(config.tls.cert_file, Path) and config.tls.cert_file.what == "cert"
    assert config.ssl_context() is not None
    # the inline key of another certificate: located at ``key``, the field that holds it
    other = (tls_folder / "other.key").read_text()
    path = write(tls_folder, {"tls_server_config": {"cert": crt, "key": other}})
    with pytest.raises(WebConfigError, match=r"web\.yml:\d+:\d+: tls_server_config\.key: "):
        load_web_config(path)


def test_a_file_replaced_after_loading_is_named_when_served(tls_folder: Path) -> None:
    config = load_web_config(write(tls_folder, TLS))
    shutil.copy(tls_folder / "other.key", tls_folder / "server.key")
    with pytest.raises(WebConfigError, match=r"web\.yml: tls_server_config\.key_file: cannot"):
        config.ssl_context()
