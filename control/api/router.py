"""Every admin domain's router, gathered under one APIRouter mounted at /admin/v1."""

from fastapi import APIRouter

from control.audit.endpoints import router as audit_router
from control.decisions.endpoints import router as decisions_router
from control.pairs.endpoints import router as pairs_router
from control.pools.endpoints import router as pools_router
from control.rollouts.endpoints import router as rollouts_router
from control.segments.endpoints import router as segments_router
from control.telemetry.endpoints import router as telemetry_router
from control.tenants.endpoints import router as tenants_router
from control.thresholds.endpoints import router as thresholds_router

admin_router = APIRouter()
for router in (
    pairs_router,
    pools_router,
    segments_router,
    thresholds_router,
    tenants_router,
    rollouts_router,
    decisions_router,
    telemetry_router,
    audit_router,
):
    admin_router.include_router(router)
