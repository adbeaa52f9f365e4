"""Certificates of a single-node cluster, made per cluster (never reused between runs).

One CA signs every certificate the node's components use: the API server's
serving certificate (for 127.0.0.1 and the in-cluster names), a client
certificate per component (the identities Kubernetes's bootstrap RBAC and the
Node authorizer know: ``system:kube-controller-manager``, ``system:kube-scheduler``,
``system:node:<node>`` in ``system:nodes``, the API server's kubelet client and
the lab's own admin in ``system:masters``), etcd's serving certificate and the
API server's client certificate for etcd, and the service-account signing key.
The CA's private key never reaches the disk: it signs this set in memory and is
dropped, so nothing can sign another identity for the node afterwards.
Keys are ECDSA P-256 (what kubeadm makes when asked for ECDSA: small and fast to
generate); certificates live for a day, longer than any run.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LIFETIME = dt.timedelta(days=1)


@dataclass(frozen=True)
class Identity:
    """A client or serving certificate: its file stem, subject and where it is valid."""

    stem: str  # <stem>.crt and <stem>.key in the folder
    common_name: str
    organizations: tuple[str, ...] = ()
    server: bool = False
    client: bool = True
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(parts)


def _key_usage(ca: bool) -> x509.KeyUsage:
    """A CA signs certificates; every other certificate only signs (ECDSA: no key encipherment)."""
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=ca,
        crl_sign=ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, now: dt.datetime, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate here states: its subject and issuer, ``key``'s public half, a random serial,
    LIFETIME from ``now``, and whether it is the CA (basic constraints and key usage, both critical)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + LIFETIME)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_key_usage(ca=ca), critical=True)
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, private: bool) -> None:
    """A new file only: never through a link, never over a file that is already there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def make_pki(folder: Path, identities: list[Identity], ca_name: str = "throttlelab-node-ca") -> dict[str, Path]:
    """Write ca.crt, one .crt/.key per identity, and sa.key/sa.pub into ``folder`` (which must exist);
    the CA's key is not written.

    Returns the paths by stem ("ca", each identity's stem, "sa" for the private key, "sa.pub").
    """
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)  # clock skew between the writer and readers
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = _name(ca_name)
    ca_cert = (
        _builder(ca_subject, ca_subject, ca_key, now, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = {"ca": folder / "ca.crt"}
    _write(paths["ca"], ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    for ident in identities:
        key = ec.generate_private_key(ec.SECP256R1())
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if ident.server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if ident.client else []
        )
        builder = (
            _builder(_name(ident.common_name, ident.organizations), ca_subject, key, now, ca=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in ident.dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ident.ip_addresses]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        paths[ident.stem] = folder / f"{ident.stem}.crt"
        paths[f"{ident.stem}.key"] = folder / f"{ident.stem}.key"
        _write(paths[ident.stem], cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(paths[f"{ident.stem}.key"], _key_pem(key), private=True)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    paths["sa"] = folder / "sa.key"
    paths["sa.pub"] = folder / "sa.pub"
    _write(paths["sa"], _key_pem(sa_key), private=True)
    _write(
        paths["sa.pub"],
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        private=False,
    )
    return paths
