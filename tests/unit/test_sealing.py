"""domain.sealing: secrets sealed with the operator's key, told apart from plaintext."""

from __future__ import annotations

import pytest

from shoal.domain import sealing
from shoal.domain.errors import SecretUnavailable

PEM = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49\n-----END PRIVATE KEY-----\n"


def test_seal_and_open() -> None:
    sealer = sealing.Sealer(sealing.new_secret())
    sealed = sealer.seal(PEM)
    assert sealed.startswith(f"{sealing.PREFIX}{sealer.key_id}:")
    assert "PRIVATE KEY" not in sealed and sealer.seal(PEM) != sealed  # fresh IV each time
    assert sealer.open(sealed) == PEM
    assert sealing.sealed_by(sealed) == sealer.key_id and sealing.sealed_by(PEM) is None
    assert sealer.open(PEM) == PEM  # plaintext from before sealing passes through
    assert sealing.Sealer(sealing.new_secret()).key_id != sealer.key_id
    assert sealer.key_id in repr(sealer) and "secret" not in repr(sealer).lower()


def test_another_key_cannot_open_and_says_what_to_do() -> None:
    a, b = sealing.Sealer("a" * 40), sealing.Sealer("b" * 40)
    with pytest.raises(SecretUnavailable) as exc:
        b.open(a.seal(PEM), "the CA key of cluster c-1")
    msg = exc.value.message
    assert "cluster c-1" in msg and a.key_id in msg and b.key_id in msg
    assert "SHOAL_SECRET_KEY_FILE" in msg and "PRIVATE" not in msg
    damaged = a.seal(PEM)[:-8] + "AAAAAAAA"
    with pytest.raises(SecretUnavailable, match="damaged"):
        a.open(damaged)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(sealing.WeakSecret, match="openssl rand -base64 32"):
        sealing.Sealer("short")
    assert sealing.Sealer(" " + "x" * 32 + "\n").key_id == sealing.Sealer("x" * 32).key_id


def test_each_node_has_its_own_agent_token_derived_from_the_key() -> None:
    a, b = sealing.Sealer("a" * 40), sealing.Sealer("b" * 40)
    token = a.node_token("node-1")
    assert token == sealing.Sealer("a" * 40).node_token("node-1")  # nothing stored
    assert a.node_token_valid("node-1", token)
    assert not a.node_token_valid("node-2", token)  # another node's
    assert not b.node_token_valid("node-1", token)  # another deployment's key
    assert not a.node_token_valid("node-1", token[:-1])
    assert len(token) >= 43 and "=" not in token  # 256 bits, URL-safe
