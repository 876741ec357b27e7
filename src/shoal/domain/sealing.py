"""Secrets at rest: seal a text with the operator's key, open it again. Pure.

A sealed text is `shoal-sealed:v1:<key id>:<Fernet token>`, so that it is told
apart from the plaintext PEM stored before sealing existed (no schema change:
the same text column holds either), and an error can say which key sealed it.

The key is derived from the operator's secret with HKDF-SHA256, so any string
of at least `SECRET_MIN_CHARS` random characters will do (`openssl rand -base64
32`); the key id is the first 8 hex digits of a hash of the derived key, which
tells keys apart without revealing them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shoal.domain.errors import SecretUnavailable

PREFIX = "shoal-sealed:v1:"
SECRET_MIN_CHARS = 32
_INFO = b"shoal: cluster CA private keys at rest, v1"
_AGENT_INFO = b"shoal: node agent tokens, v1"
_BOOTSTRAP_INFO = b"shoal: Kubernetes bootstrap tokens, v1"
_SERVICE_ACCOUNT_INFO = b"shoal: Kubernetes service-account keys, v1"
# A Kubernetes bootstrap token is `[a-z0-9]{6}.[a-z0-9]{16}`; lower-case base32's
# alphabet (a-z, 2-7) is inside it.
_BOOTSTRAP_ID, _BOOTSTRAP_SECRET = 6, 16


class WeakSecret(ValueError):
    """The operator's secret is too short to be a key."""


def is_sealed(text: str) -> bool:
    return text.startswith(PREFIX)


def sealed_by(text: str) -> str | None:
    """The key id a sealed text names (None for plaintext)."""
    if not is_sealed(text):
        return None
    return text[len(PREFIX) :].split(":", 1)[0]


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe base64), for a key file."""
    return Fernet.generate_key().decode()


class Sealer:
    """Seals and opens texts with one key. Its `repr` shows the key id only."""

    def __init__(self, secret: str) -> None:
        secret = secret.strip()
        if len(secret) < SECRET_MIN_CHARS:
            raise WeakSecret(
                f"the secret key must be at least {SECRET_MIN_CHARS} characters of random "
                f"text (got {len(secret)}); make one with `openssl rand -base64 32`"
            )
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            secret.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))
        self.key_id = hashlib.sha256(b"key-id:" + derived).hexdigest()[:8]
        self._agent_key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=_AGENT_INFO
        ).derive(secret.encode())
        self._bootstrap_key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=_BOOTSTRAP_INFO
        ).derive(secret.encode())

        self._sa_key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=_SERVICE_ACCOUNT_INFO
        ).derive(secret.encode())

    def __repr__(self) -> str:
        return f"Sealer(key_id={self.key_id!r})"

    def node_token(self, node_uuid: str) -> str:
        """The token node `node_uuid`'s agent authenticates with (written into its
        bootstrap data): derived from the key, so nothing is stored, and a restored
        or copied database still knows every node's token."""
        mac = hmac.new(self._agent_key, b"node:" + node_uuid.encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")

    def node_token_valid(self, node_uuid: str, token: str) -> bool:
        """Whether `token` is node `node_uuid`'s (constant time)."""
        return hmac.compare_digest(self.node_token(node_uuid), token)

    def bootstrap_token(self, cluster_uuid: str) -> str:
        """The Kubernetes bootstrap token (`id.secret`) kubelets of cluster
        `cluster_uuid` join with: derived from the key like the agents' tokens, so a
        re-render gives the same token and nothing is stored."""
        mac = hmac.new(self._bootstrap_key, b"cluster:" + cluster_uuid.encode(), hashlib.sha256)
        text = base64.b32encode(mac.digest()).decode().lower()
        return f"{text[:_BOOTSTRAP_ID]}.{text[_BOOTSTRAP_ID : _BOOTSTRAP_ID + _BOOTSTRAP_SECRET]}"

    def service_account_key(self, cluster_uuid: str) -> str:
        """Cluster `cluster_uuid`'s Kubernetes service-account signing key (EC P-256,
        PEM): derived from the key like the bootstrap token, so every master of the
        cluster, and every re-render, gets the same key and nothing is stored."""
        mac = hmac.new(self._sa_key, b"cluster:" + cluster_uuid.encode(), hashlib.sha512)
        order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551  # P-256's n
        private = ec.derive_private_key(
            int.from_bytes(mac.digest(), "big") % (order - 1) + 1, ec.SECP256R1()
        )
        return private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def seal(self, text: str) -> str:
        token = self._fernet.encrypt(text.encode()).decode()
        return f"{PREFIX}{self.key_id}:{token}"

    def open(self, stored: str, what: str = "a secret") -> str:
        """The plaintext of `stored` (returned as is when it was never sealed).
        SecretUnavailable, naming `what` and both key ids, for another key's text."""
        if not is_sealed(stored):
            return stored
        key_id, _, token = stored[len(PREFIX) :].partition(":")
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SecretUnavailable(mismatch(what, key_id, self.key_id)) from None


def mismatch(what: str, stored_id: str, own_id: str) -> str:
    """The operator's instruction when stored secrets need another key."""
    if stored_id == own_id:
        return f"{what} is damaged: it does not decrypt with secret key {own_id}"
    return (
        f"{what} was encrypted with secret key {stored_id}, but this shoal has key "
        f"{own_id}: start shoal with the key it was encrypted with (SHOAL_SECRET_KEY_FILE "
        "or SHOAL_SECRET_KEY; embedded default: secret.key in the data directory)"
    )
