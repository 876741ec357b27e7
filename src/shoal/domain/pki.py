"""A cluster's certificate authority: make one, check a CSR, sign it as a client
certificate. Pure: no I/O (key generation draws from the OS random source only).

The CA key is EC P-256: a whole CA takes about 0.3 ms to make, so one can be
made inside the request that first needs it (an RSA 2048 key alone takes about
70 ms, and its time varies widely), and
every TLS stack Kubernetes and its clients use accepts it. CSRs may carry RSA
(2048 bits or more), EC (P-256/384/521) or Ed25519 keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shoal.domain.errors import Conflict, Invalid

CA_VALIDITY = timedelta(days=5 * 365)
CLIENT_VALIDITY = timedelta(days=365)
# Certificates start a little in the past, so a client whose clock is slightly
# behind the server's does not reject a certificate it has just been given.
BACKDATE = timedelta(minutes=5)
CSR_MAX_CHARS = 64 * 1024
RSA_MIN_BITS = 2048
EC_CURVES = ("secp256r1", "secp384r1", "secp521r1")
FIELD = "csr"
PEM_BEGIN = "CERTIFICATE REQUEST-----"  # also matches OpenSSL's "NEW CERTIFICATE REQUEST"
SignableKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


@dataclass(frozen=True)
class CA:
    """A CA certificate and its private key, both PEM. The key never leaves the
    server: it is kept out of `repr` so that a log line cannot carry it."""

    cert_pem: str
    key_pem: str = field(repr=False)


def new_ca(cluster_uuid: str, now: datetime) -> CA:
    """A self-signed CA for one cluster: CN = the cluster uuid, valid CA_VALIDITY."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cluster_uuid)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(digital_signature=True, cert_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return CA(cert_pem=_pem(cert), key_pem=key_pem.decode())


def parse_csr(csr_pem: object) -> x509.CertificateSigningRequest:
    """The CSR in `csr_pem`, checked: Invalid (field `csr`) when it is not a string,
    not a PEM CSR, its signature does not verify, its subject is empty, or its key
    is of a kind or size shoal does not sign."""
    if not isinstance(csr_pem, str):
        raise Invalid("csr must be a string holding a PEM certificate signing request", FIELD)
    if not csr_pem.strip():
        raise Invalid("csr is required: a PEM certificate signing request", FIELD)
    if len(csr_pem) > CSR_MAX_CHARS:
        raise Invalid(f"csr must be at most {CSR_MAX_CHARS} characters", FIELD)
    if PEM_BEGIN not in csr_pem:
        raise Invalid(
            "csr is not a PEM certificate signing request "
            "(it has no -----BEGIN CERTIFICATE REQUEST----- line)",
            FIELD,
        )
    try:
        csr = x509.load_pem_x509_csr(csr_pem.encode())
    except (ValueError, UnicodeEncodeError) as exc:
        message = f"csr is not a well-formed certificate signing request: {exc}"
        raise Invalid(message, FIELD) from exc
    try:
        key = csr.public_key()
        valid = csr.is_signature_valid
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise Invalid(f"csr uses an unsupported key or signature: {exc}", FIELD) from exc
    if not valid:
        raise Invalid("csr signature does not verify: the request was altered or mis-signed", FIELD)
    _signable(key)
    if len(csr.subject) == 0:
        raise Invalid("csr subject is empty: set at least a common name (CN)", FIELD)
    return csr


def sign_csr(ca: CA, csr_pem: object, now: datetime) -> str:
    """A client certificate (PEM) for the CSR, signed by `ca`.

    The subject is the CSR's (Kubernetes reads the user from CN and groups from
    O); the CSR's extensions are not copied: the result is a client certificate
    only (clientAuth), valid CLIENT_VALIDITY and never past the CA's own expiry.
    Raises Invalid (field `csr`) for a CSR that `parse_csr` refuses, Conflict
    once the CA has expired (rotating it makes a new one)."""
    csr = parse_csr(csr_pem)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    if now >= ca_cert.not_valid_after_utc:
        raise Conflict(
            f"the cluster CA expired on {ca_cert.not_valid_after_utc:%Y-%m-%d}; "
            "rotate it (openstack coe ca rotate) to sign again"
        )
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError("a shoal CA key is an EC key")
    key = _signable(csr.public_key())
    not_before = max(now - BACKDATE, ca_cert.not_valid_before_utc)
    not_after = min(now + CLIENT_VALIDITY, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(csr.subject)
        .issuer_name(ca_cert.subject)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(digital_signature=True, key_encipherment=isinstance(key, rsa.RSAPublicKey)),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pem(cert)


def describe(cert_pem: str) -> str:
    """Subject, serial and expiry of a certificate, for events and logs."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    return (
        f"{cert.subject.rfc4514_string()} (serial {cert.serial_number:x}, "
        f"expires {cert.not_valid_after_utc:%Y-%m-%d})"
    )


def _signable(key: object) -> SignableKey:
    """`key` when shoal signs certificates for it; Invalid (field `csr`) otherwise."""
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < RSA_MIN_BITS:
            raise Invalid(
                f"csr key is RSA {key.key_size} bits; at least {RSA_MIN_BITS} are needed", FIELD
            )
    elif isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in EC_CURVES:
            raise Invalid(
                f"csr key is on curve {key.curve.name}; use one of {', '.join(EC_CURVES)}", FIELD
            )
    elif not isinstance(key, ed25519.Ed25519PublicKey):
        raise Invalid(
            f"csr key type {type(key).__name__} is not signed; use RSA, EC or Ed25519", FIELD
        )
    return key


def _key_usage(
    *, digital_signature: bool = False, key_encipherment: bool = False, cert_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()
