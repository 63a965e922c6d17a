"""The /metrics HTTP(S) server: threaded, optional TLS and bcrypt basic auth.

TLS handshakes run in the request's own thread (the listening socket accepts plain TCP and
wraps it there), so a client that connects and never finishes its handshake holds one thread
for at most ``CLIENT_TIMEOUT_S`` and never the accept loop or other scrapes.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import html
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import CollectorRegistry

from agent.errors import AgentError
from exporters.fasttext import CONTENT_TYPE as TEXT_CONTENT_TYPE
from exporters.webconfig import WebConfig

log = logging.getLogger("exporters")
CLIENT_TIMEOUT_S = 10.0
FastText = Callable[[], bytes]


class ListenError(AgentError):
    """The listen address is malformed or cannot be bound."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``:PORT`` (all addresses)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {value!r}: expected HOST:PORT, [IPv6]:PORT or :PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        tls: ssl.SSLContext | None,
    ) -> None:
        host = address[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.tls = tls
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs in the request thread: bound the client's time, then the TLS handshake."""
        request.settimeout(CLIENT_TIMEOUT_S)
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                log.debug("TLS handshake with %s failed: %s", client_address, exc)
                return
        super().finish_request(request, client_address)


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

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

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
    (:mod:`exporters.fasttext`); it answers clients that accept that format.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        web: WebConfig | None = None,
        fast_text: FastText | None = None,
    ) -> None:
        tls = web.ssl_context() if web else None
        try:
            self._server = _Server((host, port), _handler(registry, web, fast_text), tls)
        except OSError as exc:
            raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="roce-metrics-http", daemon=True
        )

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
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
