"""The serving certificate of the live scheduler's endpoints, as kube-scheduler finds one:

* ``--tls-cert-file`` and ``--tls-private-key-file`` (PEM; the certificate file may hold
  the chain after it): served as given, e.g. from a ``kubernetes.io/tls`` Secret;
* else a self-signed certificate for ``localhost``, the host's name and its loopback and
  bind addresses, kept in ``--cert-dir`` when one is given (made once, reused at each start,
  so a scraper that pins it keeps working) or in memory only.

TLS 1.2 at least, as kube-scheduler's default ``--tls-min-version``. A file that cannot be
read or does not hold a certificate and its key is an :class:`InputError` naming it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpufleet.load.errors import InputError

SELF_SIGNED_DAYS = 365
CERT_NAME, KEY_NAME = "gpufleet.crt", "gpufleet.key"


def self_signed(hosts: list[str], now: dt.datetime | None = None) -> tuple[bytes, bytes]:
    """A self-signed serving certificate for ``hosts`` (names or IP addresses) and its
    ECDSA P-256 key, both PEM."""
    now = now or dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hosts[0]}@gpufleet")])
    alternative: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            alternative.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alternative.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    return (
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def serving_hosts(bind_address: str) -> list[str]:
    """What a self-signed certificate names: localhost, this host, loopback, and the bind
    address unless it is a wildcard."""
    hosts = ["localhost", socket.gethostname(), "127.0.0.1", "::1"]
    if bind_address not in {"0.0.0.0", "::", ""}:  # noqa: S104 (compared, not bound)
        hosts.append(bind_address)
    return hosts


def server_context(
    cert_file: Path | None, key_file: Path | None, cert_dir: Path | None, hosts: list[str]
) -> ssl.SSLContext:
    """The TLS context the endpoints serve with (module docstring)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None and key_file is not None:
        _load(context, cert_file, key_file, "--tls-cert-file and --tls-private-key-file")
        return context
    if cert_dir is not None:
        cert, key = cert_dir / CERT_NAME, cert_dir / KEY_NAME
        if not (cert.is_file() and key.is_file()):
            pem_cert, pem_key = self_signed(hosts)
            try:
                cert_dir.mkdir(parents=True, exist_ok=True)
                _write(key, pem_key)
                _write(cert, pem_cert)
            except OSError as exc:
                raise InputError(
                    str(cert_dir), f"--cert-dir: cannot write: {exc.strerror}"
                ) from None
        _load(context, cert, key, "--cert-dir")
        return context
    pem_cert, pem_key = self_signed(hosts)
    with tempfile.TemporaryDirectory(prefix="gpufleet-tls-") as scratch:
        # ssl loads a chain from files only; they live for the next two lines.
        cert, key = Path(scratch) / CERT_NAME, Path(scratch) / KEY_NAME
        _write(key, pem_key)
        _write(cert, pem_cert)
        context.load_cert_chain(cert, key)
    return context


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` readable by its owner only, atomically."""
    partial = path.with_name(f".{path.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    partial.replace(path)


def _load(context: ssl.SSLContext, cert: Path, key: Path, flag: str) -> None:
    for path in (cert, key):
        if not path.is_file():
            raise InputError(str(path), f"{flag}: no such file")
    try:
        # An encrypted key is refused, never prompted for on a terminal nobody watches.
        context.load_cert_chain(cert, key, password=lambda: b"")
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise InputError(
            f"{cert}, {key}", f"{flag}: not a PEM certificate and its private key ({reason})"
        ) from None
