"""Segments; updates are compare-and-set on `version` (ETag / If-Match)."""

from typing import Any

from sqlalchemy.orm import Session

from control.domain import Change, InUse, NameTaken, create_recorded
from control.models import Segment
from control.segments import repository as repo
from control.segments.schemas import SegmentCreate, SegmentUpdate


def segment_state(segment: Segment) -> dict[str, Any]:
    return {
        "name": segment.name,
        "description": segment.description,
        "selector": segment.selector,
        "priority": segment.priority,
        "eval_set": segment.eval_set,
        "ttft_slo_p95_s": segment.ttft_slo_p95_s,
        "tpot_slo_p95_s": segment.tpot_slo_p95_s,
        "version": segment.version,
    }


def get_segment(session: Session, segment_id: int) -> Segment:
    return repo.SEGMENTS.get_or_raise(session, segment_id)


def create_segment(session: Session, body: SegmentCreate, *, actor: str) -> Segment:
    if repo.SEGMENTS.by_name(session, body.name) is not None:
        raise NameTaken("segment", f"a segment named {body.name!r} exists")
    segment = Segment(
        name=body.name,
        description=body.description,
        selector=body.selector.model_dump(mode="json", exclude_none=True),
        priority=body.priority,
        eval_set=body.eval_set,
        ttft_slo_p95_s=body.ttft_slo_p95_s,
        tpot_slo_p95_s=body.tpot_slo_p95_s,
        version=1,
    )
    return create_recorded(session, segment, entity="segment", state=segment_state, actor=actor)


def update_segment(
    session: Session, segment_id: int, body: SegmentUpdate, *, expected_version: int, actor: str
) -> Segment:
    change = Change.load(
        session, repo.SEGMENTS, segment_id, state=segment_state, expected_version=expected_version
    )
    values: dict[str, Any] = {}
    if body.description is not None:
        values["description"] = body.description
    if body.selector is not None:
        values["selector"] = body.selector.model_dump(mode="json", exclude_none=True)
    if body.priority is not None:
        values["priority"] = body.priority
    if body.eval_set is not None:
        # NOTE: "" clears it; None leaves it as it is.
        values["eval_set"] = body.eval_set or None
    if body.ttft_slo_p95_s is not None:
        values["ttft_slo_p95_s"] = body.ttft_slo_p95_s
    if body.tpot_slo_p95_s is not None:
        values["tpot_slo_p95_s"] = body.tpot_slo_p95_s
    return change.save(values, actor=actor)


def delete_segment(
    session: Session, segment_id: int, *, expected_version: int | None, actor: str
) -> None:
    change = Change.load(
        session, repo.SEGMENTS, segment_id, state=segment_state, expected_version=expected_version
    )
    users = repo.rollouts_of(session, segment_id)
    if users:
        raise InUse("segment", f"rollouts {', '.join(users)} target this segment", users)
    change.delete(actor=actor)
