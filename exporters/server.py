"""The /metrics HTTP(S) server: threaded, bounded, fair between client addresses, optional TLS
and bcrypt basic auth.

Hostile or broken clients cost little and say little:

- **Connection caps, fair between addresses.** At most ``max_connections`` connections are
  served at once (one thread each), and at most ``max_connections_per_address`` from one
  client address (an IPv6 client's /64: one host may hold a whole /64). The accept loop
  decides at once, never queueing: a connection is admitted, or admitted by cutting one that
  is still *waiting* (for its TLS handshake, its request head or its turn for a password
  check: it has proven nothing yet), or refused with ``503`` (a TLS one is closed):

  * its address at its cap: cut that address's oldest waiting connection if it has waited
    ``slow_after_s`` (a healthy client sends its head at once), else refuse (address_cap);
  * every slot taken: cut the oldest waiting connection of the address that holds the most,
    from any address if the newcomer's holds none, else from one holding at least two more
    than the newcomer's (a swap that evens the counts); else refuse (connection_cap).

  So one address never holds more than its share, an address that holds nothing gets a slot
  whenever any connection is still waiting, and the ones cut are always waiting ones.
- **Slow readers are cut like slow talkers.** A connection whose answer has been in flight
  ``slow_reader_s`` (a client that reads slowly, or not at all) may be cut by the same rules
  as a waiting one (``slow_reader``); before that, a connection being answered is never cut.
- **Page bytes in flight, per address** (:class:`exporters.fairness.ResponseBudget`): an
  address may be sent at most ``max_response_bytes_per_address`` of pages at once (one page
  always); a request beyond it gets ``503`` before anything is rendered to the socket
  (``response_cap``). The page of an unchanged snapshot is rendered and gzipped once
  (:mod:`exporters.pages`).
- **Authenticated clients first.** With basic auth or client certificates, a connection can
  be cut until it has authenticated (a certificate verified in the handshake, or a password
  accepted). bcrypt checks run a few at a time, one per client address, turns going to the
  address served least recently (:class:`exporters.fairness.PasswordChecks`); a connection
  waiting for its turn can still be cut, and a password that worked once is remembered
  (:meth:`BasicAuth.remembers`): a known scrape never waits for a check. So unauthenticated
  clients hold slots only while waiting, where any newcomer from a less busy address may cut
  them, or for one password check and its 401; a flood of wrong passwords from a few
  addresses never holds another address's first login for longer than the checks running.
- **Deadlines.** A client has ``header_timeout_s`` from its accept to deliver the TLS handshake
  and the whole request head, however it trickles the bytes (slowloris), and then
  ``response_timeout_s`` to take the answer. One reaper thread holds every deadline and shuts
  the socket down when it passes, which wakes the blocked thread.
- **One log line per bad client**, rate-limited (a burst of ``LOG_BURST``, then
  ``LOG_PER_S`` per second, with a count of the suppressed ones), never a traceback; every
  one is counted in ``roce_exporter_http_bad_clients_total{reason}``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import heapq
import html
import ipaddress
import itertools
import logging
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import urlparse

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from agent.errors import AgentError
from exporters.fairness import PasswordChecks, ResponseBudget
from exporters.fasttext import CONTENT_TYPE as TEXT_CONTENT_TYPE
from exporters.metrics import BY_NAME, HTTP_BAD_CLIENT_REASONS
from exporters.pages import GzipPages, Page
from exporters.webconfig import BasicAuth, WebConfig

log = logging.getLogger("exporters")
FastText = Callable[[], bytes | Page]
LOG_BURST = 10
LOG_PER_S = 1.0
# How long stop() waits for password checks in flight (a bcrypt check at the highest cost
# allowed, 16, takes about this long on a slow core).
DRAIN_S = 5.0
REJECT_503 = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 20\r\nRetry-After: 1\r\nConnection: close\r\n\r\nToo many connections"
)
BAD_CLIENT_REASONS = HTTP_BAD_CLIENT_REASONS


class LimitsError(AgentError):
    """Connection limits that cannot work (a cap below 1, a per-address cap above the cap)."""


@dataclass(frozen=True)
class ServerLimits:
    """What one client may take from the server (the module docstring has the rules)."""

    max_connections: int = 32
    max_connections_per_address: int = 8
    header_timeout_s: float = 5.0
    response_timeout_s: float = 10.0
    # Still waiting this long after its accept, a client is slow, not busy: a newer connection
    # from its own address may take its slot (before that, the newer one is refused).
    slow_after_s: float = 1.0
    # An answer still in flight this long after it started is a slow reader's: its slot may be
    # cut like a waiting one's (a scrape, even of megabytes, takes milliseconds on a LAN).
    slow_reader_s: float = 2.0
    # Page bytes being sent to one address at once (one page always fits).
    max_response_bytes_per_address: int = 16 << 20

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise LimitsError(f"max_connections: expected >= 1, got {self.max_connections}")
        if not 1 <= self.max_connections_per_address <= self.max_connections:
            raise LimitsError(
                f"max_connections_per_address: expected 1..{self.max_connections} "
                f"(max_connections), got {self.max_connections_per_address}"
            )
        if self.max_response_bytes_per_address < 1:
            raise LimitsError(
                "max_response_bytes_per_address: expected >= 1, got "
                f"{self.max_response_bytes_per_address}"
            )
        for name in ("header_timeout_s", "response_timeout_s", "slow_after_s", "slow_reader_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise LimitsError(f"{name}: expected a finite number of seconds > 0, got {value}")


class ListenError(AgentError):
    """The listen address is malformed or cannot be bound."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``:PORT`` (all addresses)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {value!r}: expected HOST:PORT, [IPv6]:PORT or :PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, int(port)


def address_key(client_address: Any) -> str:
    """The client the per-address cap counts: its IPv4 address (an IPv4-mapped IPv6 one too),
    or its IPv6 /64, since one host is routinely given a whole /64 to pick addresses from."""
    host = client_address[0] if isinstance(client_address, tuple) else str(client_address)
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(eq=False)
class _Connection:
    """One admitted connection, from accept to close. ``waiting``: it has proven nothing yet
    (no request head, or no accepted credentials where some are required), so a newer
    connection may cut it; ``answering_since``: when its answer started (a slow reader's may
    be cut too); ``cut``: why it was cut to make room."""

    id: int
    address: str
    sock: socket.socket
    since: float
    waiting: bool = True
    answering_since: float | None = None
    cut: str | None = None
    released: bool = False

    def cuttable(self, waited_since: float, reading_since: float) -> bool:
        """Waiting since ``waited_since`` or before, or answered since ``reading_since`` or
        before (and so a slow reader)."""
        if self.answering_since is not None:
            return self.answering_since <= reading_since
        return self.waiting and self.since <= waited_since


@dataclass
class _Slots:
    """Who holds the connection slots, by client address; every decision under one lock."""

    limits: ServerLimits
    by_address: dict[str, list[_Connection]] = field(default_factory=dict)
    open: int = 0
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, address: str, sock: socket.socket) -> _Connection | str:
        """A slot for a new connection (cutting a waiting one if the rules allow), or the
        reason it is refused."""
        now = time.monotonic()
        reading_since = now - self.limits.slow_reader_s
        with self._lock:
            mine = self.by_address.get(address, [])
            if len(mine) >= self.limits.max_connections_per_address:
                victim = _oldest_cuttable(mine, now - self.limits.slow_after_s, reading_since)
                if victim is None:
                    return "address_cap"
                self._cut(victim)
            elif self.open >= self.limits.max_connections:
                victim = self._busiest_waiting(len(mine), reading_since)
                if victim is None:
                    return "connection_cap"
                self._cut(victim)
            connection = _Connection(next(self._ids), address, sock, now)
            self.by_address.setdefault(address, []).append(connection)
            self.open += 1
            return connection

    def _busiest_waiting(self, held: int, reading_since: float) -> _Connection | None:
        """The oldest cuttable connection (waiting, or a slow reader) of the address holding
        the most, among those a newcomer whose address holds ``held`` may take a slot from:
        any address when it holds none (every address gets a first slot), else one holding at
        least two more (a swap that evens the counts, not one that only trades places and
        invites a swap back)."""
        candidates = [
            (len(connections), -oldest.since, oldest)
            for connections in self.by_address.values()
            if len(connections) >= (held + 2 if held else 1)
            and (oldest := _oldest_cuttable(connections, math.inf, reading_since)) is not None
        ]
        return max(candidates, key=lambda c: c[:2])[2] if candidates else None

    def _cut(self, connection: _Connection) -> None:
        connection.cut = "evicted" if connection.answering_since is None else "slow_reader"
        self._release(connection)
        # The base class's shutdown on an SSLSocket too: no TLS close_notify with a client
        # that is not reading. It wakes the connection's thread, which then closes it.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)

    def _release(self, connection: _Connection) -> None:
        if connection.released:
            return
        connection.released = True
        held = self.by_address[connection.address]
        held.remove(connection)
        if not held:
            del self.by_address[connection.address]
        self.open -= 1

    def release(self, connection: _Connection) -> None:
        with self._lock:
            self._release(connection)

    def keep(self, connection: _Connection) -> None:
        """No longer waiting (head in, credentials accepted or being checked): not cut unless
        its answer then reads slowly."""
        with self._lock:
            connection.waiting = False

    def answering(self, connection: _Connection) -> None:
        """Its answer starts now (a slow reader from ``slow_reader_s`` on)."""
        with self._lock:
            connection.waiting = False
            connection.answering_since = time.monotonic()

    def use_socket(self, connection: _Connection, sock: socket.socket) -> None:
        """The connection now reads and writes ``sock`` (its TLS wrapper); one cut while it
        was being wrapped is shut down here, as the cut could not reach the new socket."""
        with self._lock:
            connection.sock = sock
            if connection.cut is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def busiest(self) -> int:
        with self._lock:
            return max(map(len, self.by_address.values()), default=0)


def _oldest_cuttable(
    connections: list[_Connection], waited_since: float, reading_since: float
) -> _Connection | None:
    """The first connection (accept order) that may be cut now: a slow reader, or the first
    waiting one if it connected by ``waited_since``."""
    for connection in connections:
        if connection.answering_since is not None:
            if connection.answering_since <= reading_since:
                return connection
        elif connection.waiting:
            return connection if connection.since <= waited_since else None
    return None


class _Reaper:
    """One thread for every connection's deadline: past it, the socket is shut down (which
    wakes the thread blocked reading or writing it) and the connection is marked cut."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._entries: dict[int, tuple[float, socket.socket, str]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._order = itertools.count()
        self.cut: dict[int, str] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="roce-metrics-reaper", daemon=True)
        self._thread.start()

    def arm(self, key: int, sock: socket.socket, seconds: float, reason: str) -> None:
        deadline = time.monotonic() + seconds
        with self._lock:
            self._entries[key] = (deadline, sock, reason)
            heapq.heappush(self._heap, (deadline, next(self._order), key))
            self._lock.notify()

    def disarm(self, key: int) -> str | None:
        """Forget ``key``; the reason if its deadline had already cut it."""
        with self._lock:
            self._entries.pop(key, None)
            return self.cut.pop(key, None)

    def has_cut(self, key: int) -> bool:
        with self._lock:
            return key in self.cut

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        with self._lock:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    deadline, _, key = heapq.heappop(self._heap)
                    entry = self._entries.get(key)
                    if entry is None or entry[0] != deadline:
                        continue  # re-armed or finished since
                    del self._entries[key]
                    self.cut[key] = entry[2]
                    # The base class's shutdown on an SSLSocket too: no TLS close_notify
                    # exchange with a client that is not reading.
                    with contextlib.suppress(OSError):
                        socket.socket.shutdown(entry[1], socket.SHUT_RDWR)
                wait = self._heap[0][0] - now if self._heap else None
                self._lock.wait(wait)


class _LogLimiter:
    """Token bucket for bad-client log lines: unauthenticated clients cannot flood the log."""

    def __init__(self, burst: int = LOG_BURST, per_s: float = LOG_PER_S) -> None:
        self.burst, self.per_s = burst, per_s
        self.tokens = float(burst)
        self.updated = time.monotonic()
        self.suppressed = 0
        self._lock = threading.Lock()

    def log(self, message: str) -> None:
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.per_s)
            self.updated = now
            if self.tokens < 1:
                self.suppressed += 1
                return
            self.tokens -= 1
            suppressed, self.suppressed = self.suppressed, 0
        if suppressed:
            message += f" ({suppressed} similar lines suppressed)"
        log.warning("%s", message)


class ServerStats:
    """Counters of the HTTP server itself, served next to the exporter's metrics (names, help
    and labels from :data:`exporters.metrics.HTTP_SERVER_SPECS`)."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.slots = _Slots(limits)
        self.bad = dict.fromkeys(BAD_CLIENT_REASONS, 0)
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        return self.slots.open

    def count(self, reason: str) -> None:
        with self._lock:
            self.bad[reason] += 1

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        gauges = {
            "roce_exporter_http_connections": self.slots.open,
            "roce_exporter_http_max_connections": self.limits.max_connections,
            "roce_exporter_http_max_connections_per_address": (
                self.limits.max_connections_per_address
            ),
            "roce_exporter_http_busiest_address_connections": self.slots.busiest(),
        }
        for name, value in gauges.items():
            yield GaugeMetricFamily(name, BY_NAME[name].help, value=value)
        spec = BY_NAME["roce_exporter_http_bad_clients_total"]
        bad = CounterMetricFamily(spec.family_name, spec.help, labels=["reason"])
        with self._lock:
            for reason, value in self.bad.items():
                bad.add_metric([reason], value)
        yield bad


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A burst of connections from one client must not overflow the kernel's accept queue:
    # there a dropped SYN costs every client, a scrape too, a one-second retransmit.
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        tls: ssl.SSLContext | None,
        stats: ServerStats,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.tls = tls
        self.limits = stats.limits
        self.stats = stats
        self.slots = stats.slots
        self.password_checks = PasswordChecks()
        self.responses = ResponseBudget(self.limits.max_response_bytes_per_address)
        self.gzip = GzipPages()
        self.reaper = _Reaper()
        self.logger = _LogLimiter()
        self.local = threading.local()
        try:
            super().__init__(address, handler)
        except BaseException:
            self.reaper.stop()
            raise

    def bad_client(self, client_address: Any, reason: str, detail: str) -> None:
        self.stats.count(reason)
        host = client_address[0] if isinstance(client_address, tuple) else client_address
        self.logger.log(f"http client {host}: {reason}: {detail}")

    def process_request(self, request: Any, client_address: Any) -> None:
        """Runs in the accept loop: admit (perhaps cutting a waiting connection) or refuse
        at once, never blocking; an admitted connection gets its own thread."""
        admitted = self.slots.admit(address_key(client_address), request)
        if isinstance(admitted, str):
            self._refuse(request, client_address, admitted)
            return
        thread = threading.Thread(
            target=self._serve, args=(admitted, request, client_address), daemon=True
        )
        try:
            thread.start()
        except BaseException:
            self.slots.release(admitted)
            raise

    def _refuse(self, request: socket.socket, client_address: Any, reason: str) -> None:
        limits = self.limits
        why = (
            f"{limits.max_connections} connections open, none the rules let it cut"
            if reason == "connection_cap"
            else f"{limits.max_connections_per_address} connections open from its address, "
            f"none waiting {limits.slow_after_s:g} s or more"
        )
        self.bad_client(client_address, reason, f"{why}; answered 503")
        if self.tls is None:
            with contextlib.suppress(OSError):
                request.setblocking(False)
                request.send(REJECT_503)
        self.shutdown_request(request)

    def _serve(self, connection: _Connection, request: socket.socket, client_address: Any) -> None:
        self.local.connection = connection
        self.local.problem = None
        problem: tuple[str, str] | None = None
        try:
            request.settimeout(self.limits.response_timeout_s)
            self.reaper.arm(connection.id, request, self.limits.header_timeout_s, "header_deadline")
            tls = self.tls
            if tls is not None:
                problem = self._handshake(connection, tls)
            if problem is None:
                self.finish_request(connection.sock, client_address)
                problem = self.local.problem
        except Exception as exc:  # one line per client, whatever it did
            # A refused request whose client left before reading the error: the refusal is
            # the news, the broken pipe that followed is not.
            problem = self.local.problem or ("disconnected", _short(exc))
        finally:
            cut = self._close(connection, request)
        if cut is not None:
            problem = (cut, self._cut_detail(cut))
        if problem is not None:
            self.bad_client(client_address, *problem)

    def _handshake(self, connection: _Connection, tls: ssl.SSLContext) -> tuple[str, str] | None:
        wrapped = tls.wrap_socket(connection.sock, server_side=True, do_handshake_on_connect=False)
        self.slots.use_socket(connection, wrapped)
        self.reaper.arm(connection.id, wrapped, self.limits.header_timeout_s, "header_deadline")
        try:
            wrapped.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            return ("tls_handshake", _short(exc))
        if wrapped.getpeercert():  # a client certificate the CA verified: authenticated
            self.slots.keep(connection)
        return None

    def _close(self, connection: _Connection, request: socket.socket) -> str | None:
        """Close the connection and free its slot; why it was cut, if it was."""
        cut = self.reaper.disarm(connection.id)
        try:
            self.shutdown_request(connection.sock)
        finally:
            if connection.sock is not request:
                request.close()
            self.slots.release(connection)
        return connection.cut or cut

    def _cut_detail(self, reason: str) -> str:
        if reason == "evicted":
            return "cut while waiting, to make room for a newer connection"
        if reason == "slow_reader":
            return (
                f"its answer still unread after {self.limits.slow_reader_s:g} s, cut to make "
                "room for a newer connection"
            )
        limit = (
            self.limits.header_timeout_s
            if reason == "header_deadline"
            else self.limits.response_timeout_s
        )
        return f"cut after {limit:g} s"

    def check_password(self, auth: BasicAuth, user: str, password: str) -> bool:
        """bcrypt in turn; the connection can be cut while it waits for its turn."""
        connection: _Connection = self.local.connection
        with self.password_checks.turn(
            connection.address,
            lambda: connection.cut is not None or self.reaper.has_cut(connection.id),
        ) as may_check:
            if not may_check:
                return False
            self.slots.keep(connection)  # its thread is busy in bcrypt now, not cuttable
            return auth.check(user, password)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Never the default traceback on stderr (``_serve`` catches first)."""
        self.bad_client(client_address, "disconnected", "request failed")

    def server_close(self) -> None:
        super().server_close()
        self.reaper.stop()


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200]


def accepts_text(accept: str) -> bool:
    """The client takes the text format 0.0.4 (Prometheus lists it in every scrape)."""
    return not accept or "text/plain" in accept or "*/*" in accept


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(encoded).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


@dataclass(frozen=True)
class _Site:
    """What one configuration serves: the registry, the fast text path, auth and headers."""

    registry: CollectorRegistry
    fast_text: FastText | None
    auth: BasicAuth | None
    headers: dict[str, str]


TEXT_PLAIN = "text/plain; charset=utf-8"


class MetricsHandler(BaseHTTPRequestHandler):
    server_version = "roce-agent-exporter"
    server: _Server
    site: ClassVar[_Site]
    raw_requestline: bytes

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def log_error(self, format: str, *args: Any) -> None:
        # send_error() and the request-line timeout come here; the connection's one log
        # line is written when it ends.
        self.server.local.problem = ("bad_request", (format % args)[:200])

    def parse_request(self) -> bool:
        if not self.raw_requestline.endswith(b"\n"):
            # EOF inside the request line (http.server would take "GET /x" as HTTP/0.9).
            self.server.local.problem = ("disconnected", "request line incomplete")
            self.close_connection = True
            return False
        ok = super().parse_request()
        if ok:  # the head is in: the rest of the connection is the answer
            server, connection = self.server, self.server.local.connection
            server.reaper.arm(
                connection.id, self.connection, server.limits.response_timeout_s,
                "response_deadline",
            )  # fmt: skip
            if self.site.auth is None:  # nothing more to prove
                server.slots.keep(connection)
        return ok

    def _send(self, status: int, body: bytes, extra: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in [*extra, *self.site.headers.items()]:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorized(self) -> bool:
        auth = self.site.auth
        if auth is None:
            return True
        credentials = _basic_credentials(self.headers.get("Authorization", ""))
        if credentials is None:
            return False
        if auth.remembers(*credentials):
            self.server.slots.keep(self.server.local.connection)
            return True
        return self.server.check_password(auth, *credentials)

    def _page(self) -> tuple[Page, str]:
        accept = self.headers.get("Accept", "")
        if self.site.fast_text is not None and accepts_text(accept):
            page = self.site.fast_text()
            return (page if isinstance(page, Page) else Page(page)), TEXT_CONTENT_TYPE
        encoder, content_type = choose_encoder(accept)
        return Page(encoder(self.site.registry)), content_type

    def _metrics(self) -> None:
        """The page, within the client address's budget of page bytes in flight."""
        page, content_type = self._page()
        server, connection = self.server, self.server.local.connection
        if not server.responses.take(connection.address, len(page)):
            server.local.problem = ("response_cap", self._over_budget(len(page)))
            self._send(503, b"Too many answers in flight to this address\n",
                       [("Content-Type", TEXT_PLAIN), ("Retry-After", "1")])  # fmt: skip
            return
        try:
            headers = [("Content-Type", content_type)]
            if gzip_accepted(self.headers.get("Accept-Encoding", "")):
                body = server.gzip.compress(page)
                headers.append(("Content-Encoding", "gzip"))
            else:
                body = page.text()
            server.slots.answering(connection)
            self._send(200, body, headers)
        finally:
            server.responses.give_back(connection.address, len(page))

    def _over_budget(self, size: int) -> str:
        budget = self.server.limits.max_response_bytes_per_address
        return f"a {size}-byte page would pass its address's {budget} bytes in flight; answered 503"

    def do_GET(self) -> None:
        if not self._authorized():
            self._send(
                401,
                b"Unauthorized\n",
                [("WWW-Authenticate", 'Basic realm="roce-agent exporter"'),
                 ("Content-Type", TEXT_PLAIN)],
            )  # fmt: skip
            return
        path = urlparse(self.path).path
        if path == "/metrics":
            self._metrics()
        elif path == "/":
            page = (
                "<html><head><title>roce-agent exporter</title></head><body>"
                "<h1>roce-agent exporter</h1>"
                f'<p><a href="/metrics">{html.escape("/metrics")}</a></p></body></html>'
            )
            self._send(200, page.encode(), [("Content-Type", "text/html; charset=utf-8")])
        else:
            self._send(404, b"Not Found\n", [("Content-Type", TEXT_PLAIN)])

    do_HEAD = do_GET


def _handler(
    registry: CollectorRegistry, web: WebConfig | None, fast_text: FastText | None
) -> type[MetricsHandler]:
    class SiteHandler(MetricsHandler):
        site = _Site(
            registry, fast_text, web.basic_auth if web else None, dict(web.headers) if web else {}
        )

    return SiteHandler


class MetricsServer:
    """Serves ``registry`` on ``address`` (host, port; port 0 picks a free one) until
    :meth:`stop`.

    ``fast_text`` renders the same metrics in the text format much faster than the registry
    (:mod:`exporters.fasttext`); it answers clients that accept that format. The server's own
    counters (:class:`ServerStats`) are registered in ``registry``. The socket is bound here,
    so a constructed server proves its address is usable before anything else is stopped.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        address: tuple[str, int],
        web: WebConfig | None = None,
        fast_text: FastText | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        tls = web.ssl_context() if web else None
        self.limits = limits or ServerLimits()
        self.stats = ServerStats(self.limits)
        self.requested = address  # what was asked for (port 0: any), to compare reloads
        try:
            self._server = _Server(address, _handler(registry, web, fast_text), tls, self.stats)
        except (OSError, OverflowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ListenError(f"cannot listen on {address[0]}:{address[1]}: {reason}") from None
        self.scheme = "https" if tls else "http"
        self.registry = registry
        registry.register(self.stats)
        # A short poll interval: close() (a reload to a new address, a stop) returns within it.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="roce-metrics-http", daemon=True
        )

    def reconfigure(
        self,
        registry: CollectorRegistry,
        web: WebConfig | None,
        fast_text: FastText | None,
        limits: ServerLimits | None = None,
    ) -> None:
        """Serve another registry, web config and limits on the same socket (a reload that
        keeps the listen address). Everything that can fail (TLS files) runs before the switch;
        connections already open keep the deadlines they were given."""
        tls = web.ssl_context() if web else None
        handler = _handler(registry, web, fast_text)
        if limits is not None:
            self.limits = self.stats.limits = self.stats.slots.limits = limits
            self._server.limits = limits
            self._server.responses.per_address_bytes = limits.max_response_bytes_per_address
        if registry is not self.registry:
            registry.register(self.stats)
        # Two attribute stores, each atomic: a connection accepted in between gets the new
        # handler with the old TLS setting at worst, and is answered or refused cleanly.
        self._server.tls = tls
        self._server.RequestHandlerClass = handler
        self.scheme = "https" if tls else "http"
        old, self.registry = self.registry, registry
        if old is not registry:
            with contextlib.suppress(KeyError):
                old.unregister(self.stats)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{shown}:{port}/metrics"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.close()
        self.drain()

    def close(self) -> None:
        """Stop accepting: the address is free when this returns (within 0.1 s)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def drain(self, timeout_s: float = DRAIN_S) -> bool:
        """Refuse new password checks and wait (at most ``timeout_s``) for those running:
        a thread still in bcrypt's C code when the interpreter exits aborts the process
        ("FATAL: exception not rethrown", exit 134; issue #42). True when none runs."""
        return self._server.password_checks.close(timeout_s)
