"""domain/pki.py: a cluster CA, CSR checks and client certificates (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shoal.domain import pki
from shoal.domain.errors import Conflict, Invalid

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CLUSTER = "0f9c1b9e-5f0e-4f0a-9d5a-2b1f4c7e8a11"


def csr_pem(subject: list[x509.NameAttribute[Any]] | None = None, key: Any = None) -> str:
    key = key or ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        subject
        if subject is not None
        else [
            x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
        ]
    )
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, algo)
    return csr.public_bytes(serialization.Encoding.PEM).decode()


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


@pytest.fixture(scope="module")
def ca() -> pki.CA:
    return pki.new_ca(CLUSTER, NOW)


def test_new_ca_is_a_self_signed_ca_named_for_its_cluster(ca: pki.CA) -> None:
    c = cert(ca.cert_pem)
    assert c.subject == c.issuer
    assert c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == CLUSTER
    c.verify_directly_issued_by(c)
    bc = c.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    ku = c.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign
    assert c.not_valid_before_utc == NOW - pki.BACKDATE
    assert c.not_valid_after_utc == NOW + pki.CA_VALIDITY
    key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert key.public_key() == c.public_key()


def test_the_key_stays_out_of_repr(ca: pki.CA) -> None:
    assert "PRIVATE" not in repr(ca) and "BEGIN CERTIFICATE" in repr(ca)


def test_two_cas_differ() -> None:
    a, b = pki.new_ca(CLUSTER, NOW), pki.new_ca(CLUSTER, NOW)
    assert (
        a.key_pem != b.key_pem and cert(a.cert_pem).serial_number != cert(b.cert_pem).serial_number
    )


@pytest.mark.parametrize(
    "key",
    [
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP384R1()),
        rsa.generate_private_key(65537, 2048),
        ed25519.Ed25519PrivateKey.generate(),
    ],
    ids=["p256", "p384", "rsa2048", "ed25519"],
)
def test_sign_makes_a_client_certificate_with_the_csr_subject(ca: pki.CA, key: Any) -> None:
    request = csr_pem(key=key)
    c = cert(pki.sign_csr(ca, request, NOW))
    c.verify_directly_issued_by(cert(ca.cert_pem))
    parsed = x509.load_pem_x509_csr(request.encode())
    assert c.subject == parsed.subject and c.public_key() == key.public_key()
    assert not c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    ku = c.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.digital_signature and not ku.key_cert_sign
    assert ku.key_encipherment == isinstance(key, rsa.RSAPrivateKey)
    assert c.not_valid_after_utc == NOW + pki.CLIENT_VALIDITY


def test_a_client_certificate_never_outlives_its_ca(ca: pki.CA) -> None:
    late = NOW + pki.CA_VALIDITY - timedelta(days=30)
    c = cert(pki.sign_csr(ca, csr_pem(), late))
    assert c.not_valid_after_utc == cert(ca.cert_pem).not_valid_after_utc


def test_an_expired_ca_signs_nothing(ca: pki.CA) -> None:
    with pytest.raises(Conflict, match="expired on 2031-11-22; rotate it"):
        pki.sign_csr(ca, csr_pem(), NOW + pki.CA_VALIDITY)


def test_another_ca_does_not_verify_what_this_one_signed(ca: pki.CA) -> None:
    c = cert(pki.sign_csr(ca, csr_pem(), NOW))
    other = cert(pki.new_ca(CLUSTER, NOW).cert_pem)
    with pytest.raises(InvalidSignature):
        c.verify_directly_issued_by(other)


def _tampered() -> str:
    """A CSR whose subject was changed after it was signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    good = x509.load_pem_x509_csr(csr_pem(key=key).encode())
    der = good.public_bytes(serialization.Encoding.DER)
    bad = der.replace(b"alice", b"admin")
    assert bad != der
    return x509.load_der_x509_csr(bad).public_bytes(serialization.Encoding.PEM).decode()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (None, "must be a string"),
        (42, "must be a string"),
        ("  ", "required"),
        ("x" * (pki.CSR_MAX_CHARS + 1), "at most"),
        ("hello", "not a PEM"),
        ("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
         "not a well-formed"),
        (_tampered(), "signature does not verify"),
        (csr_pem(key=rsa.generate_private_key(65537, 1024)), "at least 2048"),
        (csr_pem(key=ec.generate_private_key(ec.SECP256K1())), "curve secp256k1"),
        (csr_pem(subject=[]), "subject is empty"),
    ],
    ids=["none", "int", "blank", "long", "text", "bad-der", "tampered", "rsa1024", "k1", "empty"],
)  # fmt: skip
def test_bad_csrs_are_invalid_naming_csr(ca: pki.CA, value: object, words: str) -> None:
    with pytest.raises(Invalid) as exc:
        pki.sign_csr(ca, value, NOW)
    assert exc.value.field == "csr" and words in exc.value.message


def test_describe_names_subject_serial_and_expiry(ca: pki.CA) -> None:
    text = pki.describe(ca.cert_pem)
    assert text.startswith(f"CN={CLUSTER} (serial ") and "expires 2031-11-22" in text
