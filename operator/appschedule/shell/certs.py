"""The webhook server's TLS certificate: read from files (cert-manager, a Secret mounted by the chart),
or made by the operator when none is given: a private CA of its own and a serving certificate it signs,
valid for the names the API server calls it by. The CA goes into the webhook configurations' caBundle.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class TLSFiles:
    cert: Path
    key: Path
    ca: Path | None  # the CA that signed ``cert``; None when ``cert`` is self-signed or the CA is not known


_CA_USAGE = x509.KeyUsage(
    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, encipher_only=False, decipher_only=False,
)  # fmt: skip


def from_dir(directory: Path) -> TLSFiles:
    """``tls.crt``, ``tls.key`` and (when present) ``ca.crt``, as cert-manager writes a Secret."""
    cert, key, ca = directory / "tls.crt", directory / "tls.key", directory / "ca.crt"
    missing = [p.name for p in (cert, key) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: {', '.join(missing)} not found (expected tls.crt and tls.key)")
    return TLSFiles(cert, key, ca if ca.is_file() else None)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def generate(directory: Path, hosts: list[str], now: datetime.datetime | None = None) -> TLSFiles:
    """A CA and a serving certificate for ``hosts`` (DNS names or IP addresses) written to ``directory``."""
    now = now or datetime.datetime.now(datetime.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("appschedule-operator webhook CA"))
        .issuer_name(_name("appschedule-operator webhook CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TLSFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))  # fmt: skip
    assert files.ca is not None
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return files
