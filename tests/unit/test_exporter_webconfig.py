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
import pytest
import yaml

from exporters.server import ListenError, MetricsServer, parse_listen
from exporters.store import SnapshotStore
from exporters.webconfig import WebConfigError, load_web_config

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-scraper"


def exporter_cli() -> list[str]:
    """How a user runs the command (``roce-agent exporter`` once it is registered)."""
    from agent.cli import main

    if "exporter" in main.commands:
        return [sys.executable, "-m", "agent", "exporter"]
    return [
        sys.executable,
        "-c",
        "from agent.cli_exporter import exporter_command; exporter_command()",
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
        ({"tls_config": {}}, "unknown field(s) tls_config"),
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
        ({"http_server_config": {"headers": {"X-Evil": "1"}}}, "unknown field(s) X-Evil"),
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
    server = MetricsServer(registry, "127.0.0.1", 0, load_web_config(path))
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
