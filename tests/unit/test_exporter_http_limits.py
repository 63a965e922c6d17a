"""The /metrics server against hostile clients, with real sockets on 127.0.0.1: the
connection cap answers 503 at once, slowloris is cut at the header deadline, a scrape
answers again once the slow clients are cut, every bad client is exactly one log line, and
inline TLS keys never touch the disk."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.registry import CollectorRegistry

from exporters.collector import RoceCollector
from exporters.server import MetricsServer, ServerLimits
from exporters.store import SnapshotStore
from exporters.webconfig import WebConfigError, load_web_config

LIMITS = ServerLimits(max_connections=4, header_timeout_s=2.5, response_timeout_s=3.0)


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(RoceCollector(SnapshotStore("lab", [])))
    return reg


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    srv = MetricsServer(registry(), "127.0.0.1", 0, limits=LIMITS)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def connect(server: MetricsServer) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=5)
    return sock


def scrape(server: MetricsServer) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(server.url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def bad_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("http client")]


def wait_until(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_cap_full_of_slow_clients_answers_503_then_recovers(
    server: MetricsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="exporters")
    slow = [connect(server) for _ in range(LIMITS.max_connections)]
    for sock in slow:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
    wait_until(lambda: server.stats.open == LIMITS.max_connections, 3)
    started = time.monotonic()
    extra = connect(server)  # N+1: answered at once, not queued behind the slow ones
    answer = extra.recv(4096)
    assert answer.startswith(b"HTTP/1.0 503"), answer
    assert time.monotonic() - started < 1.0
    status, _ = scrape(server)  # a scrape while the cap is full: 503 too, by definition
    assert status == 503
    # Once the header deadline passes the slow clients are cut and scrapes answer again.
    wait_until(lambda: server.stats.open == 0, LIMITS.header_timeout_s + 2)
    status, body = scrape(server)
    assert status == 200 and "roce_exporter_http_bad_clients_total" in body
    assert 'roce_exporter_http_bad_clients_total{reason="connection_cap"} 2.0' in body
    assert 'roce_exporter_http_bad_clients_total{reason="header_deadline"} 4.0' in body
    lines = bad_lines(caplog)
    assert sum("connection_cap" in line for line in lines) == 2
    assert sum("header_deadline" in line for line in lines) == 4
    for sock in [*slow, extra]:
        assert sock.recv(100) == b""  # closed by the server
        sock.close()


def test_slowloris_byte_by_byte_is_cut_within_the_deadline(server: MetricsServer) -> None:
    sock = connect(server)
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
    started = time.monotonic()
    cut_at = None
    for byte in request:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            cut_at = time.monotonic()
            break
        sock.settimeout(0.2)  # each byte well inside any per-read timeout
        try:
            if sock.recv(1) == b"":
                cut_at = time.monotonic()
                break
        except TimeoutError:
            pass
    assert cut_at is not None, "never cut"
    assert LIMITS.header_timeout_s - 0.1 <= cut_at - started < LIMITS.header_timeout_s + 1.0


@pytest.mark.parametrize(
    ("send", "reason"),
    [
        (b"GET /metr", "disconnected"),  # then drops the connection
        (b"BREW /pot HTTP/1.1\r\n\r\n", "bad_request"),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", "bad_request"),
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n", "bad_request"),
    ],
    ids=["dropped", "bad-method", "huge-line", "too-many-headers"],
)
def test_each_bad_client_is_exactly_one_log_line(
    server: MetricsServer, caplog: pytest.LogCaptureFixture, send: bytes, reason: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="exporters")
    sock = connect(server)
    with contextlib.suppress(OSError):  # the server may close first (line too long)
        sock.sendall(send)
    sock.shutdown(socket.SHUT_WR)
    sock.close()
    wait_until(lambda: bad_lines(caplog), 3)
    time.sleep(0.3)  # nothing more comes
    lines = bad_lines(caplog)
    assert len(lines) == 1 and f": {reason}: " in lines[0], lines
    assert all("Traceback" not in r.getMessage() and r.exc_info is None for r in caplog.records)


def test_bad_client_lines_are_rate_limited(
    server: MetricsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="exporters")
    for _ in range(40):
        with connect(server) as sock:
            sock.sendall(b"BREW / HTTP/1.1\r\n\r\n")
            sock.recv(4096)
    wait_until(lambda: server.stats.bad["bad_request"] == 40, 3)
    assert len(bad_lines(caplog)) <= 12  # the burst (10) plus what refilled meanwhile


def test_plain_http_on_the_tls_port_is_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crt, key = make_cert(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": str(crt), "key_file": str(key)}})
    )
    caplog.set_level(logging.DEBUG, logger="exporters")
    srv = MetricsServer(registry(), "127.0.0.1", 0, load_web_config(web), limits=LIMITS)
    srv.start()
    try:
        with connect(srv) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            sock.settimeout(3)
            with contextlib.suppress(OSError):
                sock.recv(100)
        wait_until(lambda: bad_lines(caplog), 3)
        time.sleep(0.2)
        lines = bad_lines(caplog)
        assert len(lines) == 1 and "tls_handshake" in lines[0]
    finally:
        srv.stop()


def make_cert(folder: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    crt, key = folder / "server.crt", folder / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout",
         str(key), "-out", str(crt), "-subj", "/CN=roce-exporter-test",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def test_inline_tls_keys_leave_nothing_on_disk(tmp_path: Path) -> None:
    crt, key = make_cert(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump({"tls_server_config": {"cert": crt.read_text(), "key": key.read_text()}})
    )
    tmpdir = Path(tempfile.gettempdir())
    before = set(tmpdir.iterdir())
    fds_before = set(os.listdir("/proc/self/fd"))
    srv = MetricsServer(registry(), "127.0.0.1", 0, load_web_config(web), limits=LIMITS)
    srv.start()
    try:
        context = ssl.create_default_context(cafile=str(crt))
        with urllib.request.urlopen(srv.url, context=context, timeout=5) as response:
            assert response.status == 200
        created = set(tmpdir.iterdir()) - before
        assert not [p for p in created if "webcfg" in p.name or p.suffix in {".pem", ".key"}]
        assert not list(tmpdir.glob("roce-webcfg-*"))
        leaked = [
            os.readlink(f"/proc/self/fd/{fd}")
            for fd in set(os.listdir("/proc/self/fd")) - fds_before
            if os.path.exists(f"/proc/self/fd/{fd}")
        ]
        assert not [link for link in leaked if "memfd:roce-webcfg" in link]
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ({"prom": "$2y$10$tooshort"}, "expected a bcrypt hash"),
        ({"prom": "$2y$04$" + "z" * 53}, "bcrypt refuses this hash"),
        ({"prom": "$2y$31$" + "." * 53}, "bcrypt cost Expected: 4..16 Actual: 31"),
        ({"prom": "$2x$10$" + "." * 53}, "expected a bcrypt hash"),
    ],
)
def test_bad_bcrypt_hash_is_refused_at_start_with_position(
    tmp_path: Path, users: dict[str, str], message: str
) -> None:
    web = tmp_path / "web.yml"
    web.write_text("# exporter web config\nbasic_auth_users:\n  prom: '" + users["prom"] + "'\n")
    with pytest.raises(WebConfigError) as caught:
        load_web_config(web)
    assert str(caught.value).startswith(f"{web}:3:9: basic_auth_users.prom: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("tls_server_config:\n  cert_file: a\n  cert_file: b\n", ":3:3: "),  # duplicate key
        ("http_server_config:\n  http2: maybe\n", ":2:10: http_server_config.http2: "),
        ("basic_auth_users: {}\nnope: 1\n", ":2:1: nope: unknown field"),
        ("basic_auth_users: [unclosed\n", ":2:1: "),
    ],
)
def test_web_config_errors_have_file_line_column(tmp_path: Path, text: str, where: str) -> None:
    web = tmp_path / "web.yml"
    web.write_text(text)
    with pytest.raises(WebConfigError) as caught:
        load_web_config(web)
    assert str(caught.value).startswith(f"{web}{where}"), str(caught.value)
