"""/v1/certificates: a cluster's CA (show, rotate) and client certificates (sign)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from shoal.api import deps, schemas
from shoal.services import certificates
from shoal.services.certificates import CertView

router = APIRouter(prefix="/certificates", tags=["certificates"])


def _view(request: Request, view: CertView) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster_uuid": view.cluster_uuid, "pem": view.pem}
    if view.csr is not None:
        out["csr"] = view.csr
    out["links"] = deps.links(request, f"certificates/{view.cluster_uuid}")
    return out


@router.get("/{cluster_ident}")
def show_ca(request: Request, cluster_ident: str) -> dict[str, Any]:
    """The cluster's CA certificate (PEM), made on first use."""
    ca_type = request.query_params.get("ca_cert_type") or None
    view = certificates.get_ca(
        deps.db(request), deps.caller(request), deps.sealer(request), cluster_ident, ca_type
    )
    return _view(request, view)


@router.post("", status_code=201, openapi_extra=schemas.body("CertificateSign"))
def sign(request: Request, body: dict[str, Any] = Depends(deps.json_object)) -> JSONResponse:
    """`{"cluster_uuid", "csr"}` -> the CSR signed by the cluster's CA."""
    view = certificates.sign(deps.db(request), deps.caller(request), deps.sealer(request), body)
    return JSONResponse(_view(request, view), status_code=201)


@router.patch("/{cluster_ident}", status_code=202)
def rotate_ca(request: Request, cluster_ident: str) -> Response:
    """Replace the cluster's CA (1.5+). Any body is ignored: magnumclient sends none.

    Magnum answers `{"uuid": ...}`, which a client asking for JSON gets. Others get
    an empty body typed application/octet-stream: python-magnumclient's rotate_ca
    sends no Accept header and, on its endpoint+token transport, fails on any
    other answer (it takes a body it did not parse for a dict)."""
    deps.need(request, 1, 5, "CA rotation")
    uuid = certificates.rotate_ca(
        deps.db(request), deps.caller(request), deps.sealer(request), cluster_ident
    )
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"uuid": uuid}, status_code=202)
    return Response(status_code=202, media_type="application/octet-stream")
