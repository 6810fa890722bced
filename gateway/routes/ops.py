"""Operational endpoints: liveness, readiness (a snapshot is loaded), Prometheus."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.routes.openai import gateway_state

router = APIRouter()


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    store = gateway_state(request).store
    snapshot = store.snapshot
    if snapshot is None:
        return JSONResponse({"ready": False, "reason": "no policy snapshot yet"}, status_code=503)
    return JSONResponse(
        {"ready": True, "snapshot_version": snapshot.version, "snapshot_age_s": store.age_s()}
    )


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    body, content_type = gateway_state(request).metrics.render()
    return Response(body, media_type=content_type)
