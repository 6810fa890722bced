"""Operational endpoints: liveness, readiness (a snapshot is loaded; fresh on demand),
Prometheus."""

import hmac

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.errors import AuthenticationFailed
from gateway.routes.openai import gateway_state

router = APIRouter()


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready once a snapshot is loaded. A snapshot past its TTL (`fresh: false`) keeps
    the gateway ready by default: it serves every segment on the baseline path, and
    if control is down every replica is stale at once, so taking them out of their
    Service would turn a control outage into a full one. With
    `ready_requires_fresh_snapshot` a stale replica answers 503 instead."""
    state = gateway_state(request)
    store = state.store
    snapshot = store.snapshot
    if snapshot is None:
        return JSONResponse({"ready": False, "reason": "no policy snapshot yet"}, status_code=503)
    age_s = store.age_s()
    fresh = age_s <= snapshot.ttl_seconds
    body = {
        "ready": True,
        "fresh": fresh,
        "snapshot_version": snapshot.version,
        "snapshot_age_s": age_s,
        "snapshot_ttl_s": snapshot.ttl_seconds,
    }
    if not fresh and state.settings.ready_requires_fresh_snapshot:
        reason = (
            f"the policy snapshot is {age_s:.1f} s old, past its {snapshot.ttl_seconds:g} s TTL"
        )
        return JSONResponse(body | {"ready": False, "reason": reason}, status_code=503)
    return JSONResponse(body)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = gateway_state(request)
    token = state.settings.exposure.metrics_token
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # NOTE: constant-time, as for every other token.
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.get_secret_value().encode()
        ):
            raise AuthenticationFailed("/metrics needs the metrics token", code="invalid_token")
    body, content_type = state.metrics.render()
    return Response(body, media_type=content_type)
