"""Segments; updates are compare-and-set on `version` (ETag / If-Match)."""

from typing import Any

from sqlalchemy.orm import Session

from control.domain import InUse, NameTaken, found, record_change
from control.errors import stale_version
from control.models import Segment
from control.repository import delete_row
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
    return found(
        repo.get_segment(session, segment_id), "segment", f"segment {segment_id} does not exist"
    )


def create_segment(session: Session, body: SegmentCreate, *, actor: str) -> Segment:
    if repo.segment_by_name(session, body.name) is not None:
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
    session.add(segment)
    session.flush()
    record_change(
        session,
        actor=actor,
        action="segment.create",
        entity_type="segment",
        entity_id=segment.id,
        after=segment_state(segment),
    )
    return segment


def update_segment(
    session: Session, segment_id: int, body: SegmentUpdate, *, expected_version: int, actor: str
) -> Segment:
    segment = get_segment(session, segment_id)
    if segment.version != expected_version:
        raise stale_version("segment", segment.id, segment.version, expected_version)
    before = segment_state(segment)
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
    if not repo.compare_and_set(session, segment_id, expected_version, values):
        session.refresh(segment)
        raise stale_version("segment", segment.id, segment.version, expected_version)
    session.refresh(segment)
    record_change(
        session,
        actor=actor,
        action="segment.update",
        entity_type="segment",
        entity_id=segment.id,
        before=before,
        after=segment_state(segment),
    )
    return segment


def delete_segment(
    session: Session, segment_id: int, *, expected_version: int | None, actor: str
) -> None:
    segment = get_segment(session, segment_id)
    if expected_version is not None and segment.version != expected_version:
        raise stale_version("segment", segment.id, segment.version, expected_version)
    users = repo.rollouts_of(session, segment_id)
    if users:
        raise InUse("segment", f"rollouts {', '.join(users)} target this segment", users)
    before = segment_state(segment)
    delete_row(session, segment)
    record_change(
        session,
        actor=actor,
        action="segment.delete",
        entity_type="segment",
        entity_id=segment_id,
        before=before,
    )
