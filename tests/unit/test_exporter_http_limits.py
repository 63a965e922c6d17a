"""The /metrics server against hostile clients, with real sockets on loopback addresses
(127.0.0.1, .2, ... are distinct client addresses): one address at its cap is refused, then
cuts its own slowest connection; a full cap cuts the busiest address's waiting connection for
another address; connections being answered are not cut until they read slowly, and one
address's pages in flight stop at its budget; connections authenticated by a client
certificate are never cut; wrong passwords wait their turn for bcrypt where they can be cut;
slowloris is cut at the header deadline; every bad client is exactly one log line, and
inline TLS keys never touch the disk."""

from __future__ import annotations

import base64
import contextlib
import http.client
import logging
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from exporters.collector import RoceCollector
from exporters.metrics import HTTP_BAD_CLIENT_REASONS, HTTP_SERVER_SPECS
from exporters.server import (
    LOG_BURST,
    LOG_PER_S,
    LimitsError,
    MetricsServer,
    ServerLimits,
    address_key,
)
from exporters.store import SnapshotStore
from exporters.webconfig import WebConfig, WebConfigError, load_web_config

# One address may take every slot here: these tests are about deadlines and log lines.
LIMITS = ServerLimits(
    max_connections=4, max_connections_per_address=4, header_timeout_s=2.5, response_timeout_s=3.0
)
# Fairness: 2 of 4 slots per address; deadlines far enough not to interfere.
FAIR = ServerLimits(
    max_connections=4,
    max_connections_per_address=2,
    header_timeout_s=8.0,
    response_timeout_s=3.0,
    slow_after_s=2.0,
)
PASSWORD = "s3cret-scraper"


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(RoceCollector(SnapshotStore("lab", [])))
    return reg


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    srv = MetricsServer(registry(), ("127.0.0.1", 0), limits=LIMITS)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def connect(server: MetricsServer, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(server.address, timeout=5, source_address=(source, 0))


def half_head(server: MetricsServer, source: str) -> socket.socket:
    """A slow client: half a request head, then nothing."""
    sock = connect(server, source)
    sock.sendall(b"GET /metrics HTTP/1.1\r\n")
    return sock


def scrape_from(
    server: MetricsServer,
    source: str,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, float]:
    """One scrape from ``source``: its status and how long it took."""
    host, port = server.address
    started = time.monotonic()
    conn = (
        http.client.HTTPSConnection(
            host, port, timeout=5, source_address=(source, 0), context=context
        )
        if context is not None
        else http.client.HTTPConnection(host, port, timeout=5, source_address=(source, 0))
    )
    try:
        conn.request("GET", "/metrics", headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def is_closed(sock: socket.socket) -> bool:
    """The server closed ``sock`` (and sent nothing else first)."""
    sock.settimeout(0.5)
    try:
        return sock.recv(100) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def close_all(server: MetricsServer, socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()
    wait_until(lambda: server.stats.open == 0, 60)  # bcrypt checks still queued end first


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@contextlib.contextmanager
def serving(
    limits: ServerLimits, web: WebConfig | None = None, fast_text: object = None
) -> Iterator[MetricsServer]:
    srv = MetricsServer(registry(), ("127.0.0.1", 0), web, fast_text, limits)  # type: ignore[arg-type]
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


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


def test_one_address_at_its_cap_is_refused_then_cuts_its_own_slowest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="exporters")
    with serving(FAIR) as srv:
        oldest = half_head(srv, "127.0.0.1")
        connected = time.monotonic()
        slow = [oldest, half_head(srv, "127.0.0.1")]
        wait_until(lambda: srv.stats.open == 2, 3)
        extra = connect(srv, "127.0.0.1")  # its address at its cap, none slow yet: refused
        started = time.monotonic()
        assert extra.recv(4096).startswith(b"HTTP/1.0 503")
        assert time.monotonic() - started < 1.0
        status, took = scrape_from(srv, "127.0.0.2")  # another address is served meanwhile
        assert status == 200 and took < 1.0
        time.sleep(max(0.0, connected + FAIR.slow_after_s + 0.2 - time.monotonic()))
        slow.append(half_head(srv, "127.0.0.1"))  # now its oldest is slow: cut for this one
        assert is_closed(oldest)
        assert not is_closed(slow[1]) and not is_closed(slow[2])
        assert srv.stats.bad["address_cap"] == 1
        wait_until(lambda: srv.stats.bad["evicted"] == 1, 3)
        close_all(srv, [*slow, extra])
    lines = bad_lines(caplog)
    assert sum(": address_cap: 2 connections open from its address" in x for x in lines) == 1
    assert sum(": evicted: cut while waiting" in x for x in lines) == 1


def test_a_full_cap_cuts_the_busiest_address_waiting_connection_for_another_address() -> None:
    with serving(FAIR) as srv:
        first = half_head(srv, "127.0.0.1")
        others = [half_head(srv, "127.0.0.1"), half_head(srv, "127.0.0.3")]
        others.append(half_head(srv, "127.0.0.4"))
        wait_until(lambda: srv.stats.open == 4, 3)
        status, took = scrape_from(srv, "127.0.0.2")  # every slot taken: one is made
        assert status == 200 and took < 1.0
        assert is_closed(first)  # the oldest of the address holding the most
        assert not any(is_closed(sock) for sock in others)
        wait_until(lambda: srv.stats.bad["evicted"] == 1, 3)
        assert srv.stats.bad["connection_cap"] == 0
        close_all(srv, [first, *others])


def test_a_newcomer_takes_a_slot_only_from_an_address_holding_two_more() -> None:
    limits = ServerLimits(
        max_connections=4, max_connections_per_address=3, header_timeout_s=8.0,
        response_timeout_s=3.0,
    )  # fmt: skip
    with serving(limits) as srv:
        held = [half_head(srv, source) for source in ("127.0.0.1", "127.0.0.1", "127.0.0.3")]
        held.append(half_head(srv, "127.0.0.3"))
        wait_until(lambda: srv.stats.open == 4, 3)
        # 127.0.0.3 holds 2, as many as 127.0.0.1: a swap would only trade places.
        extra = connect(srv, "127.0.0.3")
        assert extra.recv(4096).startswith(b"HTTP/1.0 503")
        assert srv.stats.bad["connection_cap"] == 1
        # An address that holds nothing always gets a first slot.
        assert scrape_from(srv, "127.0.0.2")[0] == 200
        assert is_closed(held[0]) and not any(is_closed(sock) for sock in held[1:])
        close_all(srv, [*held, extra])


BIG = b"# an answer the client does not read\n" * (1 << 20)  # ~38 MB, beyond socket buffers


def answer_started(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except TimeoutError:
        return False


# Two pages in flight per address; an answer unread for 1.5 s is a slow reader's.
READERS = ServerLimits(
    max_connections=4,
    max_connections_per_address=2,
    header_timeout_s=8.0,
    response_timeout_s=6.0,
    slow_after_s=2.0,
    slow_reader_s=1.5,
    max_response_bytes_per_address=2 * len(BIG),
)


def answer_cut(sock: socket.socket) -> bool:
    """The answer on ``sock`` ended before the whole page (EOF or a reset after what was sent
    before the cut)."""
    sock.settimeout(2)
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except ConnectionError:
        pass
    return got < len(BIG)


def readers_holding_every_slot(srv: MetricsServer) -> list[socket.socket]:
    readers = [connect(srv, source) for source in ("127.0.0.1", "127.0.0.1", "127.0.0.3")]
    readers.append(connect(srv, "127.0.0.3"))
    for sock in readers:
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")  # and never read the answer
    wait_until(lambda: all(answer_started(sock) for sock in readers), 5)
    return readers


def test_a_young_answer_is_never_cut_a_slow_reader_is() -> None:
    """Issue #42 (slow readers crowded out Prometheus): an answer in flight is safe for
    slow_reader_s, then its slot may be cut for a client of an address holding fewer."""
    with serving(READERS, fast_text=lambda: BIG) as srv:
        readers = readers_holding_every_slot(srv)
        # Every slot holds an answer just started: nothing may be cut yet, so a new
        # connection is refused at once, from another address (connection_cap) as from one
        # at its cap (address_cap).
        for source, reason in (("127.0.0.2", "connection_cap"), ("127.0.0.1", "address_cap")):
            extra = connect(srv, source)
            started = time.monotonic()
            assert extra.recv(4096).startswith(b"HTTP/1.0 503")
            assert time.monotonic() - started < 1.0
            assert srv.stats.bad[reason] == 1
            extra.close()
        assert srv.stats.bad["slow_reader"] == 0
        time.sleep(READERS.slow_reader_s + 0.2)
        status, took = scrape_from(srv, "127.0.0.2")  # the oldest slow reader makes room
        assert status == 200 and took < 1.0
        assert answer_cut(readers[0])  # the first of the (tied) busiest addresses
        wait_until(lambda: srv.stats.bad["slow_reader"] == 1, 3)
        assert srv.stats.bad["evicted"] == 0
        close_all(srv, readers)


def test_pages_in_flight_to_one_address_stop_at_its_budget() -> None:
    """A third page to 127.0.0.1 would pass its budget of two: 503 at once, nothing of the
    page written; another address is served meanwhile."""
    limits = ServerLimits(
        max_connections=8, max_connections_per_address=4, response_timeout_s=6.0,
        max_response_bytes_per_address=2 * len(BIG),
    )  # fmt: skip
    with serving(limits, fast_text=lambda: BIG) as srv:
        readers = [connect(srv, "127.0.0.1") for _ in range(2)]
        for sock in readers:
            sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        wait_until(lambda: all(answer_started(sock) for sock in readers), 5)
        third = connect(srv, "127.0.0.1")
        third.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := third.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.0 503") and len(answer) < 1000, answer[:200]
        wait_until(lambda: srv.stats.bad["response_cap"] == 1, 3)  # counted as its thread ends
        assert scrape_from(srv, "127.0.0.2")[0] == 200
        close_all(srv, [*readers, third])


def test_wrong_passwords_wait_for_bcrypt_where_they_can_be_cut(tmp_path: Path) -> None:
    # Cost 12: a check long enough that the scrape below arrives while two run.
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(12)).decode()
    started = time.monotonic()
    bcrypt.checkpw(b"guess", hashed.encode())
    one_check_s = time.monotonic() - started  # this machine, now: a loaded one is slower
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {"prometheus": hashed}}))
    with serving(FAIR, load_web_config(web)) as srv:
        good = basic("prometheus", PASSWORD)
        assert scrape_from(srv, "127.0.0.2", good)[0] == 200  # checked once, then remembered
        wrong = [connect(srv, source) for source in ("127.0.0.1", "127.0.0.1", "127.0.0.3")]
        wrong.append(connect(srv, "127.0.0.3"))
        head = "GET /metrics HTTP/1.0\r\nAuthorization: {}\r\n\r\n".format(
            basic("prometheus", "guess")["Authorization"]
        )
        for sock in wrong:
            sock.sendall(head.encode())
        wait_until(lambda: srv.stats.open == 4, 30)
        time.sleep(0.1)  # two checks run, two wait for their turn
        status, took = scrape_from(srv, "127.0.0.2", good)
        # Not queued behind the two waiting checks (that would take two checks at least).
        assert status == 200 and took < max(1.0, 2 * one_check_s), (took, one_check_s)
        # counted when its thread ends, after the bcrypt checks queued before it: seconds on
        # a loaded machine (a CI run with every core busy took more than 3)
        wait_until(lambda: srv.stats.bad["evicted"] == 1, 60)
        assert srv.stats.bad["connection_cap"] == 0
        close_all(srv, wrong)


def got_session_ticket(sock: ssl.SSLSocket) -> bool:
    """The server finished its side of the TLS 1.3 handshake: it sends tickets right after."""
    sock.settimeout(0.05)
    with contextlib.suppress(TimeoutError, ssl.SSLWantReadError):
        sock.recv(1)  # no data comes; reading processes the tickets
    return sock.session is not None and sock.session.has_ticket


def test_a_client_certificate_authenticates_in_the_handshake_and_is_never_cut(
    tmp_path: Path,
) -> None:
    crt, key = make_cert(tmp_path)  # self-signed: the server's, the client's and the CA
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {
                    "cert_file": str(crt),
                    "key_file": str(key),
                    "client_ca_file": str(crt),
                    "client_auth_type": "RequireAndVerifyClientCert",
                }
            }
        )
    )
    client = ssl.create_default_context(cafile=str(crt))
    client.load_cert_chain(crt, key)
    with serving(FAIR, load_web_config(web)) as srv:
        # The oldest two: authenticated, then idle (no request head at all).
        trusted = [
            client.wrap_socket(connect(srv, "127.0.0.3"), server_hostname="127.0.0.1")
            for _ in range(2)
        ]
        strangers = [connect(srv, "127.0.0.1") for _ in range(2)]  # no handshake at all
        wait_until(lambda: srv.stats.open == 4, 3)
        wait_until(lambda: all(map(got_session_ticket, trusted)), 5)
        status, took = scrape_from(srv, "127.0.0.2", context=client)
        assert status == 200 and took < 1.0
        assert is_closed(strangers[0]) and not is_closed(strangers[1])
        assert not any(is_closed(sock) for sock in trusted)
        wait_until(lambda: srv.stats.bad["evicted"] == 1, 3)
        close_all(srv, [*trusted, *strangers])


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_connections": 0}, "max_connections: expected >= 1, got 0"),
        ({"max_connections_per_address": 0}, "max_connections_per_address: expected 1..32"),
        (
            {"max_connections": 4, "max_connections_per_address": 8},
            "max_connections_per_address: expected 1..4 (max_connections), got 8",
        ),
        ({"header_timeout_s": float("nan")}, "header_timeout_s: expected a finite number"),
        ({"response_timeout_s": 0}, "response_timeout_s: expected a finite number"),
        ({"slow_after_s": -1}, "slow_after_s: expected a finite number"),
    ],
)
def test_limits_that_cannot_work_are_refused_naming_the_field(
    limits: dict[str, float], message: str
) -> None:
    with pytest.raises(LimitsError, match=re.escape(message)):
        ServerLimits(**limits)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("client", "key"),
    [
        ("127.0.0.2", "127.0.0.2"),
        ("::ffff:10.0.0.7", "10.0.0.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
    ],
)
def test_an_ipv6_client_is_counted_by_its_64(client: str, key: str) -> None:
    assert address_key((client, 1234)) == key


def test_the_server_series_are_the_metrics_table() -> None:
    with serving(FAIR) as srv:
        _, body = scrape(srv)
    families = {f.name: f for f in text_string_to_metric_families(body)}
    for spec in HTTP_SERVER_SPECS:
        family = families[spec.family_name]
        assert (family.type, family.documentation) == (spec.type, spec.help), spec.name
        for sample in family.samples:
            assert tuple(sample.labels) == spec.labels[1:]  # `fabric` is the registry's
    reasons = [s.labels["reason"] for s in families["roce_exporter_http_bad_clients"].samples]
    assert reasons == list(HTTP_BAD_CLIENT_REASONS)
    assert "roce_exporter_http_max_connections_per_address 2.0" in body
    if shutil.which("promtool"):
        done = subprocess.run(
            ["promtool", "check", "metrics"], input=body, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr


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
    started = time.monotonic()
    for _ in range(40):
        # A closed connection leaves the server's books a moment after the client closes it
        # (on a busy machine after the next connect, which the address cap then answers 503:
        # a clean-clone CI run saw it): a slot first.
        wait_until(lambda: server.stats.open < LIMITS.max_connections_per_address, 10)
        with connect(server) as sock:
            sock.sendall(b"BREW / HTTP/1.1\r\n\r\n")
            sock.recv(4096)
    wait_until(lambda: server.stats.bad["bad_request"] == 40, 10)
    refilled = LOG_PER_S * (time.monotonic() - started)
    assert len(bad_lines(caplog)) <= LOG_BURST + refilled + 1  # the burst, then its rate


def test_plain_http_on_the_tls_port_is_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crt, key = make_cert(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": str(crt), "key_file": str(key)}})
    )
    caplog.set_level(logging.DEBUG, logger="exporters")
    srv = MetricsServer(registry(), ("127.0.0.1", 0), load_web_config(web), limits=LIMITS)
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
    srv = MetricsServer(registry(), ("127.0.0.1", 0), load_web_config(web), limits=LIMITS)
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
