"""The /metrics HTTP(S) server: threaded, bounded, optional TLS and bcrypt basic auth.

Hostile or broken clients cost little and say little:

- **Connection cap.** At most ``max_connections`` connections are served at once (one thread
  each). A connection beyond the cap is answered ``503`` at once (plain HTTP; a TLS one is
  closed) by the accept loop and counted; it never queues behind the others.
- **Deadlines.** A client has ``header_timeout_s`` from its accept to deliver the TLS handshake
  and the whole request head, however it trickles the bytes (slowloris), and then
  ``response_timeout_s`` to take the answer. One reaper thread holds every deadline and shuts
  the socket down when it passes, which wakes the blocked thread. So while the cap is full of
  slow clients a scrape gets ``503``, and within ``header_timeout_s`` the slots are free again.
- **One log line per bad client**, rate-limited (a burst of ``LOG_BURST``, then
  ``LOG_PER_S`` per second, with a count of the suppressed ones), never a traceback; every
  one is counted in ``roce_exporter_http_bad_clients_total{reason}``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import heapq
import html
import itertools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from agent.errors import AgentError
from exporters.fasttext import CONTENT_TYPE as TEXT_CONTENT_TYPE
from exporters.webconfig import WebConfig

log = logging.getLogger("exporters")
FastText = Callable[[], bytes]
LOG_BURST = 10
LOG_PER_S = 1.0
REJECT_503 = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 20\r\nRetry-After: 1\r\nConnection: close\r\n\r\nToo many connections"
)
BAD_CLIENT_REASONS = (
    "connection_cap", "header_deadline", "response_deadline", "bad_request", "tls_handshake",
    "disconnected",
)  # fmt: skip


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int = 32
    header_timeout_s: float = 5.0
    response_timeout_s: float = 10.0


class ListenError(AgentError):
    """The listen address is malformed or cannot be bound."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``:PORT`` (all addresses)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {value!r}: expected HOST:PORT, [IPv6]:PORT or :PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, int(port)


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
    """Counters of the HTTP server itself, served next to the exporter's metrics."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.open = 0
        self.bad = dict.fromkeys(BAD_CLIENT_REASONS, 0)
        self._lock = threading.Lock()

    def count(self, reason: str) -> None:
        with self._lock:
            self.bad[reason] += 1

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily(
            "roce_exporter_http_connections",
            "HTTP connections being served now (at most roce_exporter_http_max_connections).",
            value=self.open,
        )
        yield GaugeMetricFamily(
            "roce_exporter_http_max_connections",
            "Connections served at once; more are answered 503 at once.",
            value=self.limits.max_connections,
        )
        bad = CounterMetricFamily(
            "roce_exporter_http_bad_clients",
            "Connections that ended badly, by reason: connection_cap (answered 503), "
            "header_deadline, response_deadline, bad_request, tls_handshake, disconnected.",
            labels=["reason"],
        )
        for reason, value in self.bad.items():
            bad.add_metric([reason], value)
        yield bad


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        tls: ssl.SSLContext | None,
        limits: ServerLimits,
        stats: ServerStats,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.tls = tls
        self.limits = limits
        self.stats = stats
        self.slots = threading.BoundedSemaphore(limits.max_connections)
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
        """Runs in the accept loop: over the cap, answer 503 without blocking and close."""
        if not self.slots.acquire(blocking=False):
            if self.tls is None:
                with contextlib.suppress(OSError):
                    request.setblocking(False)
                    request.send(REJECT_503)
            self.shutdown_request(request)
            self.bad_client(
                client_address,
                "connection_cap",
                f"{self.limits.max_connections} connections open, answered 503",
            )
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        key = threading.get_ident()
        connection: socket.socket = request
        problem: tuple[str, str] | None = None
        self.local.problem = None
        with self.stats._lock:
            self.stats.open += 1
        try:
            request.settimeout(self.limits.response_timeout_s)
            self.reaper.arm(key, request, self.limits.header_timeout_s, "header_deadline")
            if self.tls is not None:
                connection = self.tls.wrap_socket(
                    request, server_side=True, do_handshake_on_connect=False
                )
                self.reaper.arm(key, connection, self.limits.header_timeout_s, "header_deadline")
                try:
                    connection.do_handshake()
                except (ssl.SSLError, OSError) as exc:
                    problem = ("tls_handshake", _short(exc))
            if problem is None:
                self.finish_request(connection, client_address)
                problem = self.local.problem
        except Exception as exc:  # one line per client, whatever it did
            # A refused request whose client left before reading the error: the refusal is
            # the news, the broken pipe that followed is not.
            problem = self.local.problem or ("disconnected", _short(exc))
        finally:
            cut = self.reaper.disarm(key)
            try:
                self.shutdown_request(connection)
            finally:
                if connection is not request:
                    request.close()
                with self.stats._lock:
                    self.stats.open -= 1
                self.slots.release()
        if cut is not None:
            limit = (
                self.limits.header_timeout_s
                if cut == "header_deadline"
                else self.limits.response_timeout_s
            )
            problem = (cut, f"cut after {limit:g} s")
        if problem is not None:
            self.bad_client(client_address, *problem)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Never the default traceback on stderr (process_request_thread catches first)."""
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


def _handler(
    registry: CollectorRegistry, web: WebConfig | None, fast_text: FastText | None
) -> type[BaseHTTPRequestHandler]:
    auth = web.basic_auth if web else None
    headers = dict(web.headers) if web else {}

    class MetricsHandler(BaseHTTPRequestHandler):
        server_version = "roce-agent-exporter"
        server: _Server

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

        def log_error(self, format: str, *args: Any) -> None:
            # send_error() and the request-line timeout come here; the connection's one log
            # line is written when it ends.
            self.server.local.problem = ("bad_request", (format % args)[:200])

        raw_requestline: bytes

        def parse_request(self) -> bool:
            if not self.raw_requestline.endswith(b"\n"):
                # EOF inside the request line (http.server would take "GET /x" as HTTP/0.9).
                self.server.local.problem = ("disconnected", "request line incomplete")
                self.close_connection = True
                return False
            ok = super().parse_request()
            if ok:  # the head is in: the rest of the connection is the answer
                self.server.reaper.arm(
                    threading.get_ident(),
                    self.connection,
                    self.server.limits.response_timeout_s,
                    "response_deadline",
                )
            return ok

        def _send(self, status: int, body: bytes, extra: list[tuple[str, str]]) -> None:
            self.send_response(status)
            for name, value in [*extra, *headers.items()]:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _authorized(self) -> bool:
            if auth is None:
                return True
            header = self.headers.get("Authorization", "")
            scheme, _, encoded = header.partition(" ")
            if scheme.lower() != "basic":
                return False
            try:
                user, sep, password = base64.b64decode(encoded).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return bool(sep) and auth.check(user, password)

        def do_GET(self) -> None:
            if not self._authorized():
                self._send(
                    401,
                    b"Unauthorized\n",
                    [("WWW-Authenticate", 'Basic realm="roce-agent exporter"'),
                     ("Content-Type", "text/plain; charset=utf-8")],
                )  # fmt: skip
                return
            url = urlparse(self.path)
            if url.path == "/metrics":
                accept = self.headers.get("Accept", "")
                if fast_text is not None and accepts_text(accept):
                    body, content_type = fast_text(), TEXT_CONTENT_TYPE
                else:
                    encoder, content_type = choose_encoder(accept)
                    body = encoder(registry)
                out_headers = [("Content-Type", content_type)]
                if gzip_accepted(self.headers.get("Accept-Encoding", "")):
                    body = gzip.compress(body, compresslevel=1)  # scrapes are CPU, not link, bound
                    out_headers.append(("Content-Encoding", "gzip"))
                self._send(200, body, out_headers)
            elif url.path == "/":
                page = (
                    "<html><head><title>roce-agent exporter</title></head><body>"
                    "<h1>roce-agent exporter</h1>"
                    f'<p><a href="/metrics">{html.escape("/metrics")}</a></p></body></html>'
                )
                self._send(200, page.encode(), [("Content-Type", "text/html; charset=utf-8")])
            else:
                self._send(404, b"Not Found\n", [("Content-Type", "text/plain; charset=utf-8")])

        do_HEAD = do_GET

    return MetricsHandler


class MetricsServer:
    """Serves ``registry`` on ``host:port`` (port 0 picks a free one) until :meth:`stop`.

    ``fast_text`` renders the same metrics in the text format much faster than the registry
    (:mod:`exporters.fasttext`); it answers clients that accept that format. The server's own
    counters (:class:`ServerStats`) are registered in ``registry``. The socket is bound here,
    so a constructed server proves its address is usable before anything else is stopped.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        web: WebConfig | None = None,
        fast_text: FastText | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        tls = web.ssl_context() if web else None
        self.limits = limits or ServerLimits()
        self.stats = ServerStats(self.limits)
        self.requested = (host, port)  # what was asked for (port 0: any), to compare reloads
        try:
            self._server = _Server(
                (host, port), _handler(registry, web, fast_text), tls, self.limits, self.stats
            )
        except (OSError, OverflowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ListenError(f"cannot listen on {host}:{port}: {reason}") from None
        self.scheme = "https" if tls else "http"
        self.registry = registry
        registry.register(self.stats)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="roce-metrics-http", daemon=True
        )

    def reconfigure(
        self, registry: CollectorRegistry, web: WebConfig | None, fast_text: FastText | None
    ) -> None:
        """Serve another registry and web config on the same socket (a reload that keeps the
        listen address). Everything that can fail (TLS files) runs before the switch."""
        tls = web.ssl_context() if web else None
        handler = _handler(registry, web, fast_text)
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
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
