"""Certificate use cases: show a cluster's CA, sign a client CSR with it, rotate it.

A cluster's CA is made on first use (show or sign), not at cluster create: most
clusters never ask for one, and the create request stays as cheap as it was.
The CA's private key stays in the database, sealed with the operator's secret
key (`domain.sealing`); what leaves is certificates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.records import Session
from shoal.db.repo import certificates, clusters
from shoal.db.types import utcnow
from shoal.domain import pki, policy, sealing
from shoal.domain import validation as v
from shoal.domain.errors import Invalid, NotFound, SecretUnavailable
from shoal.services.context import Caller

SIGN_KEYS = frozenset({"cluster_uuid", "csr", "ca_cert_type", "bay_uuid"})
# Magnum knows several CA kinds per cluster (etcd, front-proxy); shoal has one.
CA_TYPES = frozenset({"kubernetes"})


@dataclass(frozen=True)
class CertView:
    """What the API shows: the cluster and a certificate (never a key)."""

    cluster_uuid: str
    pem: str
    csr: str | None = None


def seal_stored_keys(db: Database, sealer: sealing.Sealer) -> int:
    """On start: seal every CA key stored as plaintext (written before keys were
    sealed); how many were. SecretUnavailable, saying which key to start with,
    when a key was sealed with another secret key than `sealer`'s."""
    with db.read() as s:
        other = certificates.sealed_elsewhere(s, sealer)
    if other is not None:
        cluster_uuid, key_id = other
        what = f"the CA key of cluster {cluster_uuid}"
        raise SecretUnavailable(sealing.mismatch(what, key_id, sealer.key_id))
    with db.write() as s:
        return certificates.seal_plaintext(s, sealer)


def get_ca(
    db: Database,
    caller: Caller,
    sealer: sealing.Sealer,
    cluster_ident: str,
    ca_type: str | None = None,
) -> CertView:
    """The cluster's CA certificate, made now if the cluster has none yet (showing
    it needs no private key)."""
    policy.enforce(caller, "certificate:get")
    _check_type(ca_type)
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        cert = certificates.get_cert(s, cluster.uuid)
    if cert is None:
        with db.write() as s:
            # Locked, so the cluster cannot be deleted under the insert (the conductor
            # removes a cluster's rows with its row locked first).
            cluster = clusters.find(s, caller.scope, cluster.uuid, for_update=True)
            cert = _ensure(s, cluster.uuid, sealer).cert_pem
    return CertView(cluster_uuid=cluster.uuid, pem=cert)


def sign(db: Database, caller: Caller, sealer: sealing.Sealer, body: dict[str, Any]) -> CertView:
    """A client certificate for `body["csr"]`, signed by the cluster's CA.

    The cluster is named by `cluster_uuid` (uuid or name; `bay_uuid` is Magnum's old
    spelling). As in Magnum, a cluster that cannot be found is a 400 naming the
    field, not a 404: the path exists, the body refers to nothing. A cluster being
    deleted gets 409, like any other change to it. The CSR is checked before
    anything is read or written, so a bad CSR stores nothing."""
    policy.enforce(caller, "certificate:create")
    v.reject_unknown("certificate", body, SIGN_KEYS)
    _check_type(body.get("ca_cert_type"))
    field = "cluster_uuid" if body.get("cluster_uuid") is not None else "bay_uuid"
    ident = body.get(field)
    if ident is None:
        raise Invalid("cluster_uuid is required", "cluster_uuid")
    if not isinstance(ident, str) or not ident:
        raise Invalid("cluster_uuid must be a cluster uuid or name", field)
    csr = body.get("csr")
    pki.parse_csr(csr)
    with db.write() as s:
        try:
            cluster = clusters.find_changeable(s, caller.scope, ident)
        except NotFound as exc:
            raise Invalid(f"{field}: Cluster {ident} could not be found", field) from exc
        ca = _ensure(s, cluster.uuid, sealer)
        pem = pki.sign_csr(ca, csr, utcnow())
        events.record(
            s, cluster.uuid, "CertificateSigned", f"client certificate {pki.describe(pem)} signed"
        )
    return CertView(cluster_uuid=cluster.uuid, pem=pem, csr=str(csr))


def rotate_ca(db: Database, caller: Caller, sealer: sealing.Sealer, cluster_ident: str) -> str:
    """Replace the cluster's CA with a new one; the cluster uuid. Certificates the
    old CA signed no longer verify against the CA shown, which is how access is
    revoked. 409 while the cluster is being deleted.

    Until the Kubernetes bootstrap lands no node holds the old CA, so the rotation
    is complete when this returns (the API still answers Magnum's 202)."""
    policy.enforce(caller, "certificate:rotate_ca")
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, cluster_ident)
        now = utcnow()
        ca = pki.new_ca(cluster.uuid, now)
        certificates.replace(s, cluster.uuid, ca, now, sealer)
        events.record(
            s, cluster.uuid, "CARotated", f"cluster CA rotated: now {pki.describe(ca.cert_pem)}"
        )
        return cluster.uuid


def _check_type(ca_type: object) -> None:
    if ca_type is not None and (not isinstance(ca_type, str) or ca_type not in CA_TYPES):
        raise Invalid(
            f"ca_cert_type {str(ca_type)[:64]!r} is not served: a shoal cluster has one CA "
            f"({', '.join(sorted(CA_TYPES))})",
            "ca_cert_type",
        )


def _ensure(s: Session, cluster_uuid: str, sealer: sealing.Sealer) -> pki.CA:
    """The cluster's CA, made and stored now if it has none (the caller holds the
    cluster row locked; the insert is race-safe on its own as well). A key still
    stored as plaintext is sealed on this first use."""
    certificates.seal_plaintext(s, sealer, cluster_uuid)
    ca = certificates.get(s, cluster_uuid, sealer)
    if ca is not None:
        return ca
    now = utcnow()
    fresh = pki.new_ca(cluster_uuid, now)
    ca = certificates.insert_if_absent(s, cluster_uuid, fresh, now, sealer)
    if ca.cert_pem == fresh.cert_pem:
        events.record(
            s, cluster_uuid, "CACreated", f"cluster CA created: {pki.describe(ca.cert_pem)}"
        )
    return ca
