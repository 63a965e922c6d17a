"""A scripted gNMI server for the client's tests: a real grpc.aio server on 127.0.0.1 (TLS
with a CA made here, or plain text) in its own thread, answering Subscribe with what a test
scripts -- the well-formed samples of each NOS and every kind of bad answer.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from agent.device.gnmi.paths import parse_path, to_proto

USERNAME = "admin"
PASSWORD = "gnmi-secret"

Script = Callable[[Any, Any], AsyncIterator[Any]]  # (request, context)


@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_pki(server_name: str = "leaf1") -> Pki:
    """A CA and a server certificate it signed, for ``server_name`` and 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test CA"))
        .issuer_name(_name("test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName(
        [x509.DNSName(server_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(server_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return Pki(ca.public_bytes(pem), cert.public_bytes(pem), key_pem)


def notification(
    updates: list[tuple[str, Any]], timestamp_ns: int, target: str = "", origin: str = ""
) -> Any:
    """A SubscribeResponse with one notification: (path text, TypedValue kwargs) pairs."""
    message = gnmi_pb2.Notification(timestamp=timestamp_ns)
    message.prefix.CopyFrom(gnmi_pb2.Path(target=target, origin=origin))
    for text, value in updates:
        message.update.add(
            path=to_proto(parse_path(text), gnmi_pb2), val=gnmi_pb2.TypedValue(**value)
        )
    return gnmi_pb2.SubscribeResponse(update=message)


def sync() -> Any:
    return gnmi_pb2.SubscribeResponse(sync_response=True)


@dataclass
class _Servicer(gnmi_pb2_grpc.gNMIServicer):  # type: ignore[misc]
    script: Script
    requests: list[Any] = field(default_factory=list)
    refuse: bool = False

    async def _check(self, context: Any) -> None:
        if self.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "refused by the test")
        md = dict(context.invocation_metadata())
        if md.get("username") != USERNAME or md.get("password") != PASSWORD:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")

    async def Capabilities(self, request: Any, context: Any) -> Any:
        await self._check(context)
        return gnmi_pb2.CapabilityResponse(gNMI_version="0.8.0")

    async def Subscribe(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        await self._check(context)
        request = await request_iterator.__anext__()
        self.requests.append(request)
        async for response in self.script(request, context):
            yield response


class ScriptedServer:
    """The server in a thread of its own; ``address`` once started."""

    def __init__(self, script: Script, pki: Pki | None = None) -> None:
        self.servicer = _Servicer(script)
        self.pki = pki
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._server = grpc.aio.server()
        gnmi_pb2_grpc.add_gNMIServicer_to_server(self.servicer, self._server)
        if self.pki is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            credentials = grpc.ssl_server_credentials([(self.pki.key_pem, self.pki.cert_pem)])
            self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        await self._server.start()

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.run_coroutine_threadsafe(self._server.stop(0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)


def write_ca(tmp_path: Path, pki: Pki) -> Path:
    path = tmp_path / "ca.pem"
    path.write_bytes(pki.ca_pem)
    return path
