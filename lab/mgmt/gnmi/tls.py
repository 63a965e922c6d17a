"""The lab's own certificate authority for its switches' gNMI servers.

``lab up`` makes one CA per lab in the lab's state directory and, per switch that serves gNMI,
a server certificate the CA signed, for the names a client dials: DNS ``<switch name>`` (the
fabric file's ``gnmi.tls.server_name``) and IP 127.0.0.1 (where every lab switch listens).
EC P-256 keys, written 0600; everything is valid for a few days, as long as a lab lives,
so a stolen key is worth little and nobody is tempted to trust the CA beyond the lab.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 5
# Clocks of the lab's processes are one clock, but a client on another host may lag a little.
BACKDATE = datetime.timedelta(minutes=5)
LOOPBACK = ipaddress.ip_address("127.0.0.1")


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its private key on disk (PEM)."""

    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "roce-fabric-agent lab"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    # Created 0600 from the start: the key is never readable by others, not even briefly.
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    os.replace(tmp, path)


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - BACKDATE, now + datetime.timedelta(days=days)


def create_ca(files: CertFiles, lab_name: str, days: int = VALID_DAYS) -> None:
    """A self-signed CA that may sign server certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(days)
    name = _name(f"lab {lab_name} gNMI CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(files.key, key)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def issue_server_cert(
    ca: CertFiles, files: CertFiles, server_name: str, days: int = VALID_DAYS
) -> None:
    """A server certificate for ``server_name`` and 127.0.0.1, signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca.key}: not the lab CA's EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(days)
    san = x509.SubjectAlternativeName([x509.DNSName(server_name), x509.IPAddress(LOOPBACK)])
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(server_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(min(end, ca_cert.not_valid_after_utc))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(files.key, key)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
