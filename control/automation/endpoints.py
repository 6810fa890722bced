"""/admin/v1/rollouts/{id}/evidence: what the automation sees in a rollout now."""

from fastapi import APIRouter, Query

from control.api.auth import Reader
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.ids import IdPath
from control.automation.readout import Readout, readout
from control.rollouts.service import get_rollout

router = APIRouter(prefix="/rollouts", tags=["rollouts"])


@router.get(
    "/{rollout_id}/evidence",
    response_model=Readout,
    responses=error_responses(404),
    summary="The automation's current evidence and verdicts for a rollout (a dry run).",
)
def get_evidence(
    rollout_id: IdPath,
    session: SessionDep,
    settings: SettingsDep,
    _: Reader,
    advice: int = Query(default=5, ge=0, le=100, description="Depth advice rows to include."),
) -> Readout:
    return readout(session, get_rollout(session, rollout_id), settings, advice_limit=advice)
