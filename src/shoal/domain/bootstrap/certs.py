"""Certificates and keys a Kubernetes node needs, issued from the cluster's own CA
(`pki.CA`, the one `openstack coe ca show` returns), so that the kubeconfig from
`cluster config` is trusted by the real API server and the other way round.

Pure: no I/O (key generation draws from the OS random source only). Keys are EC
P-256, as the CA's are: every Kubernetes 1.20 component accepts them (the
service-account token signer too, as ES256), and one takes well under a
millisecond to make.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shoal.domain import pki

VALIDITY = timedelta(days=365)
CLIENT = "client"
SERVER = "server"
PEER = "peer"  # etcd peers: both ends present it


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM (the key kept out of `repr`)."""

    cert_pem: str
    key_pem: str = field(repr=False)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def new_service_account_key() -> str:
    """A cluster's service-account signing key (PEM, private): made once per
    cluster and kept sealed like the CA key, since every master must sign and
    verify service-account tokens with the same one."""
    return key_pem(new_key())


def public_pem(private_pem: str) -> str:
    """The public half (PEM, SubjectPublicKeyInfo) of a private key."""
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def san_entries(names: Sequence[str]) -> list[x509.GeneralName]:
    """Subject alternative names: an IP address where a name parses as one, else DNS."""
    out: list[x509.GeneralName] = []
    seen: set[str] = set()
    for name in names:
        if not name or name in seen:
            continue
        seen.add(name)
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def issue(
    ca: pki.CA,
    common_name: str,
    now: datetime,
    *,
    usage: str = CLIENT,
    organizations: Sequence[str] = (),
    sans: Sequence[str] = (),
) -> KeyPair:
    """A new key and a certificate for it signed by `ca`: CN `common_name`, O each of
    `organizations` (Kubernetes reads the user from CN and its groups from O), for
    client or server (or both: `PEER`) authentication, valid VALIDITY and never past
    the CA's own expiry."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError("a shoal CA key is an EC key")
    key = new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    purposes = {
        CLIENT: [ExtendedKeyUsageOID.CLIENT_AUTH],
        SERVER: [ExtendedKeyUsageOID.SERVER_AUTH],
        PEER: [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    }[usage]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(now - pki.BACKDATE, ca_cert.not_valid_before_utc))
        .not_valid_after(min(now + VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(san_entries(sans)), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem(key))
