"""Real certificates for the tests of the storage proxy's TLS: a certificate authority, a
server certificate it signs for ``127.0.0.1`` and ``localhost`` (subject alternative names),
and a client certificate (mutual TLS), written as PEM files by `make_certs`; `make_token`
writes a token file as the docs say to (``openssl rand -hex 32``, mode 0600)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certs:
    """PEM files: the CA's certificate, the server's certificate and key, a client's
    certificate and key (signed by the same CA)."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def _signed(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier | None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer.subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if usage is ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certs(folder: Path, *, authority: str = "study test CA") -> Certs:
    """A CA named ``authority``, a server certificate for 127.0.0.1 and localhost and a
    client certificate, both signed by it, as PEM files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _signed(authority, ca_key, None, ca_key, None)
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    files = {}
    for role, usage in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _signed(f"study {role}", key, ca, ca_key, usage)
        (folder / f"{role}.pem").write_bytes(cert.public_bytes(pem))
        files[role] = (folder / f"{role}.pem", _write_key(key, folder / f"{role}-key.pem"))
    return Certs(folder / "ca.pem", *files["server"], *files["client"])


def make_token(path: Path) -> str:
    """A fresh token in ``path`` (64 hex digits and a newline, mode 0600); the token."""
    token = secrets.token_hex(32)
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return token
