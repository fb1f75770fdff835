"""Certificates. The webhook server's: read from files (cert-manager, a Secret mounted by the chart), or
made by the operator when none is given: a private CA of its own and a serving certificate it signs,
valid for the names the API server calls it by. The CA goes into the webhook configurations' caBundle.

``Authority`` (a CA and the certificates it signs) is the project's one certificate helper: the local
test cluster's PKI (hack/cluster/localcluster.py) is made with it too.

Invariant: a serving certificate made here names every host it is asked for, and the CA returned with
it is the one that signed it.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
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
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def from_dir(directory: Path) -> TLSFiles:
    """``tls.crt``, ``tls.key`` and (when present) ``ca.crt``, as cert-manager writes a Secret."""
    cert, key, ca = directory / "tls.crt", directory / "tls.key", directory / "ca.crt"
    missing = [p.name for p in (cert, key) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: {', '.join(missing)} not found (expected tls.crt and tls.key)")
    return TLSFiles(cert, key, ca if ca.is_file() else None)


def subject(common_name: str, organization: str | None = None) -> x509.Name:
    """A certificate's subject; Kubernetes reads a client's user from CN and its group from O."""
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


@dataclass(frozen=True)
class Authority:
    """A private CA (EC P-256) and the certificates it signs. The one certificate helper of the project:
    the operator's own webhook certificate (``generate``), the tests', and the local cluster's PKI
    (hack/cluster/localcluster.py)."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str, now: datetime.datetime, validity: datetime.timedelta = VALIDITY) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject(name))
            .issuer_name(subject(name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(
        self,
        name: x509.Name,
        now: datetime.datetime,
        *,
        hosts: Sequence[str] = (),
        server: bool = False,
        client: bool = False,
        validity: datetime.timedelta = VALIDITY,
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A new key and its certificate for ``name``: serving ``hosts`` (DNS names or IP addresses) when
        ``server``, authenticating a client when ``client``."""
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())


def write_pem(path: Path, item: x509.Certificate | ec.EllipticCurvePrivateKey) -> Path:
    """A certificate, or a private key (created readable by its owner only), as PEM."""
    if isinstance(item, x509.Certificate):
        path.write_bytes(item.public_bytes(serialization.Encoding.PEM))
    else:
        path.touch(mode=0o600)
        path.write_bytes(
            item.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return path


def generate(directory: Path, hosts: list[str], now: datetime.datetime | None = None) -> TLSFiles:
    """A CA and a serving certificate for ``hosts`` (DNS names or IP addresses) written to ``directory``."""
    now = now or datetime.datetime.now(datetime.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    authority = Authority.create("appschedule-operator webhook CA", now)
    key, cert = authority.issue(subject(hosts[0]), now, hosts=hosts, server=True)
    return TLSFiles(
        write_pem(directory / "tls.crt", cert),
        write_pem(directory / "tls.key", key),
        write_pem(directory / "ca.crt", authority.cert),
    )
