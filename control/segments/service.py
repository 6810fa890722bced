"""Segments; updates are compare-and-set on `version` (ETag / If-Match)."""

from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.errors import Conflict, NotFound, stale_version
from control.models import Segment
from control.segments import repository as repo
from control.segments.schemas import SegmentCreate, SegmentUpdate
from control.snapshot.version import bump_snapshot_version


class SegmentNotFound(NotFound):
    code = "segment_not_found"


class SegmentNameTaken(Conflict):
    code = "segment_name_taken"


class SegmentInUse(Conflict):
    code = "segment_in_use"


def segment_state(segment: Segment) -> dict[str, Any]:
    return {
        "name": segment.name,
        "description": segment.description,
        "selector": segment.selector,
        "priority": segment.priority,
        "version": segment.version,
    }


def get_segment(session: Session, segment_id: int) -> Segment:
    segment = repo.get_segment(session, segment_id)
    if segment is None:
        raise SegmentNotFound(f"segment {segment_id} does not exist")
    return segment


def create_segment(session: Session, body: SegmentCreate, *, actor: str) -> Segment:
    if repo.segment_by_name(session, body.name) is not None:
        raise SegmentNameTaken(f"a segment named {body.name!r} exists", details={"param": "name"})
    segment = Segment(
        name=body.name,
        description=body.description,
        selector=body.selector.model_dump(mode="json", exclude_none=True),
        priority=body.priority,
        version=1,
    )
    session.add(segment)
    session.flush()
    record_audit(
        session,
        actor=actor,
        action="segment.create",
        entity_type="segment",
        entity_id=segment.id,
        after=segment_state(segment),
    )
    bump_snapshot_version(session)
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
    if not repo.compare_and_set(session, segment_id, expected_version, values):
        session.refresh(segment)
        raise stale_version("segment", segment.id, segment.version, expected_version)
    session.refresh(segment)
    record_audit(
        session,
        actor=actor,
        action="segment.update",
        entity_type="segment",
        entity_id=segment.id,
        before=before,
        after=segment_state(segment),
    )
    bump_snapshot_version(session)
    return segment


def delete_segment(
    session: Session, segment_id: int, *, expected_version: int | None, actor: str
) -> None:
    segment = get_segment(session, segment_id)
    if expected_version is not None and segment.version != expected_version:
        raise stale_version("segment", segment.id, segment.version, expected_version)
    users = repo.rollouts_of(session, segment_id)
    if users:
        raise SegmentInUse(
            f"rollouts {', '.join(users)} target this segment", details={"rollouts": users}
        )
    before = segment_state(segment)
    session.delete(segment)
    session.flush()
    record_audit(
        session,
        actor=actor,
        action="segment.delete",
        entity_type="segment",
        entity_id=segment_id,
        before=before,
    )
    bump_snapshot_version(session)
