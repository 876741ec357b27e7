"""Magnum's certificate API through the real server on SQLite and PostgreSQL, with
httpx, python-magnumclient and the `openstack coe ca` CLI: a cluster's CA (made
on first use, CN = cluster uuid), client certificates signed from a CSR, CA
rotation, refusals that store nothing, project isolation, the CA's removal with
its cluster, and its move by `shoal db migrate`."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from magnumclient import client as magnum
from magnumclient import exceptions as mexc
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from shoal import keys
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.db.repo import certificates as ca_repo
from shoal.db.tables import ClusterCARow
from shoal.db.transfer import copy_database
from shoal.db.types import utcnow
from shoal.domain import pki, sealing
from tests.integration.api_support import Api, api_server, db_of, row_counts
from tests.integration.conductor_http_support import conductor_server, wait
from tests.support.openstack_cli import run_coe
from tests.support.server import LiveServer


@pytest.fixture
def api(server: LiveServer) -> Api:
    return Api(server)


def make_csr(
    cn: str = "alice", org: str | None = "system:masters", key: Any = None
) -> tuple[str, x509.CertificateSigningRequest]:
    key = key or ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else []
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name(attrs))
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM).decode(), csr


def new_cluster(api: Api, name: str | None = None) -> dict[str, Any]:
    return api.cluster(name=name or f"c-{uuid.uuid4().hex[:8]}", image_id="fedora-coreos-40")


def ca_count(server: LiveServer, cluster_uuid: str | None = None) -> int:
    stmt = select(func.count()).select_from(ClusterCARow)
    if cluster_uuid is not None:
        stmt = stmt.where(ClusterCARow.cluster_uuid == cluster_uuid)
    with db_of(server).read() as s:
        return int(s.scalar(stmt) or 0)


def assert_issued_by(cert: x509.Certificate, ca: x509.Certificate) -> None:
    cert.verify_directly_issued_by(ca)  # issuer name and signature


def test_ca_show_is_the_clusters_own_ca_made_once(api: Api, server: LiveServer) -> None:
    c = new_cluster(api)
    assert ca_count(server, c["uuid"]) == 0  # not made at cluster create
    got = api.ok("GET", f"/certificates/{c['uuid']}")
    assert set(got) == {"cluster_uuid", "pem", "links"} and got["cluster_uuid"] == c["uuid"]
    assert got["links"][0]["href"].endswith(f"/v1/certificates/{c['uuid']}")
    ca = x509.load_pem_x509_certificate(got["pem"].encode())
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == c["uuid"]
    assert (
        ca.issuer == ca.subject
        and ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    )
    ca.verify_directly_issued_by(ca)  # self-signed
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days >= 5 * 365
    # Stable: the same CA by uuid and by name, and one row for it.
    assert api.ok("GET", f"/certificates/{c['name']}")["pem"] == got["pem"]
    assert ca_count(server, c["uuid"]) == 1
    reasons = [e["reason"] for e in api.ok("GET", f"/clusters/{c['uuid']}/events")["events"]]
    assert reasons.count("CACreated") == 1


def test_concurrent_first_shows_agree_on_one_ca(api: Api, server: LiveServer) -> None:
    c = new_cluster(api)
    pems: list[str] = []
    errors: list[BaseException] = []

    def show() -> None:
        try:
            r = api.client.get(f"/certificates/{c['uuid']}")
            assert r.status_code == 200, r.text
            pems.append(r.json()["pem"])
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=show) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(pems) == 8 and len(set(pems)) == 1
    assert ca_count(server, c["uuid"]) == 1


def test_sign_and_rotate_through_magnumclient(server: LiveServer) -> None:
    """The real client in project `default`: get, create (sign), rotate_ca."""
    mc = magnum.Client(
        "1", endpoint_override=server.v1, auth_token=server.token(), api_version="latest"
    )
    c = new_cluster(Api(server, project="default"))
    ca_pem = mc.certificates.get(c["uuid"]).pem
    ca = x509.load_pem_x509_certificate(ca_pem.encode())

    for key in (ec.generate_private_key(ec.SECP384R1()), rsa.generate_private_key(65537, 2048)):
        csr_pem, csr = make_csr("alice", "system:masters", key)
        signed = mc.certificates.create(cluster_uuid=c["name"], csr=csr_pem)
        assert signed.cluster_uuid == c["uuid"] and signed.csr == csr_pem
        cert = x509.load_pem_x509_certificate(signed.pem.encode())
        assert_issued_by(cert, ca)
        assert cert.subject == csr.subject and cert.public_key() == csr.public_key()
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        assert 364 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).days <= 366
        assert "PRIVATE" not in str(signed._info)

    assert mc.certificates.rotate_ca(cluster_uuid=c["uuid"]) is None  # as against Magnum
    rotated = x509.load_pem_x509_certificate(mc.certificates.get(c["uuid"]).pem.encode())
    assert rotated != ca and rotated.public_key() != ca.public_key()
    assert rotated.subject == ca.subject
    with pytest.raises((InvalidSignature, ValueError)):
        assert_issued_by(cert, rotated)  # what the old CA signed is revoked
    again = mc.certificates.create(cluster_uuid=c["uuid"], csr=make_csr("bob")[0])
    assert_issued_by(x509.load_pem_x509_certificate(again.pem.encode()), rotated)
    events = Api(server, project="default").ok("GET", f"/clusters/{c['uuid']}/events")["events"]
    reasons = [e["reason"] for e in events]
    assert reasons.count("CertificateSigned") == 3 and reasons.count("CARotated") == 1


def test_responses_and_events_never_carry_a_private_key(api: Api, server: LiveServer) -> None:
    c = new_cluster(api)
    texts = [
        api.client.get(f"/certificates/{c['uuid']}").text,
        api.client.post(
            "/certificates", json={"cluster_uuid": c["uuid"], "csr": make_csr()[0]}
        ).text,
        api.client.patch(f"/certificates/{c['uuid']}").text,
        api.client.get(f"/clusters/{c['uuid']}/events").text,
    ]
    for text in texts:
        assert "PRIVATE KEY" not in text
    with db_of(server).read() as s:
        key_pem = s.scalars(select(ClusterCARow.key_pem)).first()
    # It is there, sealed, and only there.
    assert key_pem and sealing.is_sealed(key_pem) and "PRIVATE KEY" not in key_pem
    assert "PRIVATE KEY" in keys.load(server.runtime.settings).open(key_pem)


def test_a_ca_key_sealed_with_another_key_is_503_that_says_what_to_do(
    api: Api, server: LiveServer
) -> None:
    """A CA written by a process with another secret key (a misconfigured peer):
    signing needs the key and cannot have it. Showing the certificate still works."""
    c = new_cluster(api)
    other = sealing.Sealer(sealing.new_secret())
    with db_of(server).write() as s:
        ca_repo.insert_if_absent(s, c["uuid"], pki.new_ca(c["uuid"], utcnow()), utcnow(), other)
    before = row_counts(server)
    r = api.client.post("/certificates", json={"cluster_uuid": c["uuid"], "csr": make_csr()[0]})
    assert r.status_code == 503, r.text
    err = r.json()["errors"][0]
    assert err["code"] == "server" and other.key_id in err["detail"]
    assert "SHOAL_SECRET_KEY_FILE" in err["detail"] and "PRIVATE" not in r.text
    assert row_counts(server) == before
    assert api.ok("GET", f"/certificates/{c['uuid']}")["pem"].startswith("-----BEGIN CERT")


def test_rotate_needs_1_5_and_answers_202(server: LiveServer) -> None:
    api = Api(server)
    c = new_cluster(api)
    old = Api(server, project=api.project, version="1.4")
    r = old.client.patch(f"/certificates/{c['uuid']}")
    assert r.status_code == 406 and "1.5" in r.json()["errors"][0]["detail"]
    assert ca_count(server, c["uuid"]) == 0
    # magnumclient sends no body (Content-Type application/octet-stream) and no Accept:
    # an empty answer it can take. A client asking for JSON gets Magnum's {"uuid"}.
    r = Api(server, project=api.project, version="1.5").client.patch(
        f"/certificates/{c['uuid']}", headers={"Content-Type": "application/octet-stream"}
    )
    assert r.status_code == 202 and r.content == b""
    assert r.headers["content-type"] == "application/octet-stream"
    got = api.ok("PATCH", f"/certificates/{c['name']}", 202, json={},
                 headers={"Accept": "application/json"})  # fmt: skip
    assert got == {"uuid": c["uuid"]}
    # Show and sign are 1.1 features: no version header at all works.
    unversioned = Api(server, project=api.project)
    unversioned.client.headers.pop("OpenStack-API-Version")
    assert unversioned.ok("GET", f"/certificates/{c['uuid']}")["cluster_uuid"] == c["uuid"]


def _bad_csrs() -> list[tuple[str, Any]]:
    good, _ = make_csr()
    lines = good.strip().splitlines()
    body = "".join(lines[1:-1])
    # Flip one character in the middle of the DER: the signature no longer verifies
    # (or the structure no longer parses); either way a 400 naming csr.
    i = len(body) // 2
    flipped = body[:i] + ("A" if body[i] != "A" else "B") + body[i + 1 :]
    tampered = "\n".join([lines[0], *[flipped[j : j + 64] for j in range(0, len(flipped), 64)],
                          lines[-1]]) + "\n"  # fmt: skip
    return [
        ("garbage", "not a csr"),
        ("certificate not csr", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
        ("tampered", tampered),
        ("not a string", 42),
        ("empty", ""),
        ("missing", None),
        ("weak RSA", make_csr(key=rsa.generate_private_key(65537, 1024))[0]),
        ("empty subject", make_csr(cn="", org=None)[0]),
    ]


def test_bad_csr_is_400_naming_csr_and_stores_nothing(api: Api, server: LiveServer) -> None:
    c = new_cluster(api)
    before = row_counts(server)
    for what, csr in _bad_csrs():
        body: dict[str, Any] = {"cluster_uuid": c["uuid"]}
        if csr is not None:
            body["csr"] = csr
        r = api.client.post("/certificates", json=body)
        assert r.status_code == 400, (what, r.text)
        err = r.json()["errors"][0]
        assert err["status"] == 400 and err["code"] == "client" and err["request_id"]
        assert "csr" in err["detail"], (what, err)
    assert row_counts(server) == before  # no CA made, no event written
    assert ca_count(server, c["uuid"]) == 0


def test_bad_sign_bodies(api: Api) -> None:
    c = new_cluster(api)
    csr = make_csr()[0]
    cases = [
        ({"csr": csr}, "cluster_uuid"),
        ({"cluster_uuid": c["uuid"], "csr": csr, "pem": "x"}, "pem"),
        ({"cluster_uuid": c["uuid"], "csr": csr, "ca_cert_type": "etcd"}, "ca_cert_type"),
        ({"cluster_uuid": 7, "csr": csr}, "cluster_uuid"),
    ]
    for body, word in cases:
        r = api.client.post("/certificates", json=body)
        assert r.status_code == 400 and word in r.json()["errors"][0]["detail"], (body, r.text)
    ok = api.ok("POST", "/certificates", 201, json={"bay_uuid": c["uuid"], "csr": csr,
                                                    "ca_cert_type": "kubernetes"})  # fmt: skip
    assert ok["cluster_uuid"] == c["uuid"]


def test_unknown_cluster_and_other_project(api: Api, server: LiveServer) -> None:
    c = new_cluster(api)
    api.ok("GET", f"/certificates/{c['uuid']}")
    other = Api(server)
    csr = make_csr()[0]
    for who, ident in ((api, "nope"), (api, str(uuid.uuid4())), (other, c["uuid"]),
                       (other, c["name"])):  # fmt: skip
        assert who.client.get(f"/certificates/{ident}").status_code == 404
        assert who.client.patch(f"/certificates/{ident}").status_code == 404
        # As in Magnum: the body names a cluster that cannot be found -> 400.
        r = who.client.post("/certificates", json={"cluster_uuid": ident, "csr": csr})
        assert r.status_code == 400 and "cluster_uuid" in r.json()["errors"][0]["detail"]
    assert ca_count(server) >= 1 and ca_count(server, c["uuid"]) == 1
    assert api.ok("GET", f"/certificates/{c['uuid']}")["cluster_uuid"] == c["uuid"]


def test_a_deleting_cluster_shows_its_ca_but_signs_and_rotates_nothing(
    api: Api, server: LiveServer
) -> None:
    c = new_cluster(api)
    pem = api.ok("GET", f"/certificates/{c['uuid']}")["pem"]
    api.ok("DELETE", f"/clusters/{c['uuid']}", 204)  # no conductor here: it stays deleting
    assert api.ok("GET", f"/certificates/{c['uuid']}")["pem"] == pem
    r = api.client.post("/certificates", json={"cluster_uuid": c["uuid"], "csr": make_csr()[0]})
    assert r.status_code == 409 and "being deleted" in r.json()["errors"][0]["detail"]
    assert api.client.patch(f"/certificates/{c['uuid']}").status_code == 409
    assert api.ok("GET", f"/certificates/{c['uuid']}")["pem"] == pem


def test_openstack_coe_ca_show_sign_rotate(tmp_path: Path) -> None:
    """The real CLI (project `default`: it sends no project header), once: it
    speaks HTTP, so the database under the server changes nothing for it."""
    with api_server("sqlite", tmp_path / "data") as server:
        _coe_ca_show_sign_rotate(server, tmp_path)


def _coe_ca_show_sign_rotate(server: LiveServer, tmp_path: Path) -> None:
    c = new_cluster(Api(server, project="default"))

    def coe(*args: str) -> str:
        done = run_coe(server, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    ca = x509.load_pem_x509_certificate(coe("ca", "show", c["name"]).encode())
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == c["uuid"]
    csr_file = tmp_path / "client.csr"
    csr_file.write_text(make_csr("carol", "devs")[0])
    cert = x509.load_pem_x509_certificate(coe("ca", "sign", c["name"], str(csr_file)).encode())
    assert_issued_by(cert, ca)
    assert cert.subject.rfc4514_string() == "O=devs,CN=carol"
    assert "accepted" in coe("ca", "rotate", c["name"])
    rotated = x509.load_pem_x509_certificate(coe("ca", "show", c["uuid"]).encode())
    assert rotated.public_key() != ca.public_key()
    # `coe cluster config` makes its own key and CSR, and asks for the CA and a cert.
    api = Api(server, project="default")
    api.template(name="k8s-tls")
    c2 = api.cluster(name="cfg", cluster_template_id="k8s-tls", node_count=1)
    out = tmp_path / "kube"
    out.mkdir()
    coe("cluster", "config", c2["name"], "--dir", str(out), "--output-certs")
    ca2 = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    assert ca2.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == c2["uuid"]
    client = x509.load_pem_x509_certificate((out / "cert.pem").read_bytes())
    assert_issued_by(client, ca2)
    assert client.subject.rfc4514_string() == "O=system:masters,CN=admin"
    assert "client-certificate-data" in (out / "config").read_text()


def test_cluster_delete_removes_its_ca(tmp_path: Path) -> None:
    """With the conductor: the CA row goes with the cluster row."""
    with conductor_server(tmp_path) as server:
        api = Api(server, project="default")
        c = api.cluster(name="gone", image_id="fedora-coreos-40", master_count=1, node_count=1)
        api.ok("GET", f"/certificates/{c['uuid']}")
        keep = new_cluster(api, "kept")
        api.ok("GET", f"/certificates/{keep['uuid']}")
        assert ca_count(server) == 2
        api.ok("DELETE", f"/clusters/{c['uuid']}", 204)

        def gone() -> bool:
            return bool(api.client.get(f"/clusters/{c['uuid']}").status_code == 404)

        wait(gone, 30, "the cluster row to go")
        assert ca_count(server, c["uuid"]) == 0 and ca_count(server, keep["uuid"]) == 1
        api.ok("GET", f"/certificates/{c['uuid']}", 404)


def test_a_failed_ca_write_names_no_key(db_url: str) -> None:
    """The API logs errors it does not map; a failed CA write's error holds no key."""
    db = Database(db_url)
    try:
        migrations.upgrade(db)
        orphan = str(uuid.uuid4())  # no such cluster: the foreign key refuses the row
        ca = pki.new_ca(orphan, utcnow())
        sealer = sealing.Sealer(sealing.new_secret())
        with pytest.raises(IntegrityError) as exc, db.write() as s:
            ca_repo.insert_if_absent(s, orphan, ca, utcnow(), sealer)
        assert "PRIVATE KEY" not in str(exc.value) and "BEGIN" not in str(exc.value)
        assert sealing.PREFIX not in str(exc.value)
        with pytest.raises(IntegrityError) as exc, db.write() as s:
            ca_repo.replace(s, orphan, ca, utcnow(), sealer)
        assert "PRIVATE KEY" not in str(exc.value) and sealing.PREFIX not in str(exc.value)
    finally:
        db.close()


@pytest.mark.postgres
def test_db_migrate_moves_the_cas(tmp_path: Path, pg_url: str) -> None:
    """An embedded deployment's CAs reach PostgreSQL unchanged: the key as sealed,
    which only the source's key opens."""
    with api_server("sqlite", tmp_path / "src") as server:
        api = Api(server)
        c = new_cluster(api)
        pem = api.ok("GET", f"/certificates/{c['uuid']}")["pem"]
        src_url = db_of(server).url
        with db_of(server).read() as s:
            sealed = s.scalars(select(ClusterCARow.key_pem)).one()
        sealer = keys.load(server.runtime.settings)
    report = copy_database(src_url, pg_url, progress=lambda _msg: None)
    assert report.rows["cluster_cas"] == 1
    target = Database(pg_url)
    try:
        with target.read() as s:
            row = s.get(ClusterCARow, c["uuid"])
            assert row is not None and row.cert_pem == pem and row.key_pem == sealed
    finally:
        target.close()
    assert sealing.is_sealed(sealed) and "PRIVATE KEY" in sealer.open(sealed)


def test_magnumclient_error_for_a_bad_csr(server: LiveServer) -> None:
    mc = magnum.Client(
        "1", endpoint_override=server.v1, auth_token=server.token(), api_version="latest"
    )
    c = new_cluster(Api(server, project="default"))
    with pytest.raises(mexc.BadRequest) as exc:
        mc.certificates.create(cluster_uuid=c["uuid"], csr="garbage")
    assert "csr" in str(exc.value)
