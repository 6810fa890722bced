"""The shared CRUD pieces on a real database: `control.repository.Repository` (get,
get-or-raise, by name, a cursor page, create) and `control.domain`'s
`create_recorded` and `Change` (version check, compare-and-set, audit, snapshot
bump), for a compare-and-set model (Segment) and a mapper-versioned one (Pair)."""

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from control.domain import Change, check_version, create_recorded
from control.errors import Missing, PreconditionFailed
from control.models import AuditEvent, Pair, Segment
from control.repository import Repository, compare_and_set, within
from control.snapshot.version import current_snapshot_version

SEGMENTS = Repository(Segment, "segment")
PAIRS = Repository(Pair, "pair")


def _segment(name: str, priority: int = 0) -> Segment:
    return Segment(name=name, selector={"tasks": ["code"]}, priority=priority, version=1)


def _state(segment: Segment) -> dict[str, Any]:
    return {"name": segment.name, "priority": segment.priority, "version": segment.version}


def _pair_state(pair: Pair) -> dict[str, Any]:
    return {"name": pair.name, "description": pair.description}


def _audit(session: Session) -> list[tuple[str, str, str, Any, Any]]:
    rows = session.scalars(select(AuditEvent).order_by(AuditEvent.id))
    return [(e.action, e.entity_type, e.entity_id, e.before, e.after) for e in rows]


def test_get_and_get_or_raise(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    assert row.id is not None
    assert SEGMENTS.get(session, row.id) is row
    assert SEGMENTS.get(session, row.id + 1000) is None
    assert SEGMENTS.get_or_raise(session, row.id) is row
    with pytest.raises(Missing) as raised:
        SEGMENTS.get_or_raise(session, row.id + 1000)
    assert raised.value.status_code == 404
    assert raised.value.code == "segment_not_found"
    assert raised.value.message == f"segment {row.id + 1000} does not exist"


def test_the_label_names_the_entity_in_the_message(session: Session) -> None:
    sets = Repository(Segment, "threshold_set")
    with pytest.raises(Missing) as raised:
        sets.get_or_raise(session, 99)
    assert raised.value.code == "threshold_set_not_found"
    assert raised.value.message == "threshold set 99 does not exist"


def test_by_name_and_one_or_none(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code", priority=5))
    assert SEGMENTS.by_name(session, "code") is row
    assert SEGMENTS.by_name(session, "chat") is None
    assert SEGMENTS.one_or_none(session, Segment.priority == 5) is row
    assert SEGMENTS.one_or_none(session, Segment.priority == 6) is None


def test_page_walks_the_cursor_both_ways(session: Session) -> None:
    ids = [SEGMENTS.create(session, _segment(f"s{i}", priority=i % 2)).id for i in range(5)]
    first = SEGMENTS.page(session, cursor=None, limit=2)
    # limit + 1 rows: the extra one says a next page exists.
    assert [r.id for r in first] == ids[:3]
    second = SEGMENTS.page(session, cursor=str(ids[1]), limit=2)
    assert [r.id for r in second] == ids[2:5]
    last = SEGMENTS.page(session, cursor=str(ids[3]), limit=2)
    assert [r.id for r in last] == ids[4:]
    odd = SEGMENTS.page(session, Segment.priority == 1, cursor=None, limit=10)
    assert [r.id for r in odd] == [ids[1], ids[3]]
    # The listing's optional filters: a value given is `column == value`, None is none.
    named = SEGMENTS.page(session, cursor=None, limit=10, name="s3", priority=1)
    assert [r.id for r in named] == [ids[3]]
    unfiltered = SEGMENTS.page(session, cursor=None, limit=10, name=None, priority=None)
    assert [r.id for r in unfiltered] == ids
    newest = SEGMENTS.page(session, cursor=str(ids[3]), limit=10, newest=True)
    assert [r.id for r in newest] == [ids[2], ids[1], ids[0]]


def test_create_recorded_audits_and_bumps_the_snapshot(session: Session) -> None:
    before = current_snapshot_version(session)
    row = create_recorded(session, _segment("code"), entity="segment", state=_state, actor="a")
    assert SEGMENTS.get(session, row.id) is row
    assert _audit(session) == [
        (
            "segment.create",
            "segment",
            str(row.id),
            None,
            {"name": "code", "priority": 0, "version": 1},
        )
    ]
    assert current_snapshot_version(session) == before + 1


def test_change_on_a_compare_and_set_row(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    snapshot = current_snapshot_version(session)
    change = Change.start(session, row, entity="segment", state=_state, expected_version=1)
    saved = change.save({"priority": 7}, actor="admin")
    assert saved is row
    assert (row.priority, row.version) == (7, 2)
    assert _audit(session) == [
        (
            "segment.update",
            "segment",
            str(row.id),
            {"name": "code", "priority": 0, "version": 1},
            {"name": "code", "priority": 7, "version": 2},
        )
    ]
    assert current_snapshot_version(session) == snapshot + 1


def test_a_stale_if_match_is_412_before_anything_is_written(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    snapshot = current_snapshot_version(session)
    with pytest.raises(PreconditionFailed) as raised:
        Change.start(session, row, entity="segment", state=_state, expected_version=3)
    assert raised.value.status_code == 412
    assert raised.value.code == "stale_version"
    assert raised.value.details == {"current_version": 1}
    assert raised.value.message == f"segment {row.id} is at version 1, not 3"
    assert _audit(session) == []
    assert current_snapshot_version(session) == snapshot
    check_version(row, "segment", None)  # no If-Match (or `*`) passes


def test_a_lost_compare_and_set_is_412_naming_the_winner(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    change = Change.start(session, row, entity="segment", state=_state, expected_version=None)
    # Another writer wins between the read and the UPDATE.
    assert compare_and_set(session, Segment, row.id, 1, {"priority": 3})
    with pytest.raises(PreconditionFailed) as raised:
        change.apply({"priority": 9})
    assert raised.value.details == {"current_version": 2}
    assert (row.priority, row.version) == (3, 2)
    assert _audit(session) == []


def test_change_on_a_mapper_versioned_row(session: Session) -> None:
    pair = PAIRS.create(session, Pair(name="tiny", description="old"))
    assert pair.version == 1
    change = Change.start(session, pair, entity="pair", state=_pair_state, expected_version=1)
    change.apply({"description": "new"})
    assert pair.version == 2
    change.record(actor="admin", action="pair.describe", reason="why")
    event = session.scalars(select(AuditEvent)).one()
    assert (event.action, event.before, event.after, event.reason) == (
        "pair.describe",
        {"name": "tiny", "description": "old"},
        {"name": "tiny", "description": "new"},
        "why",
    )


def test_a_lost_race_on_a_mapper_versioned_row_is_stale_data(session: Session) -> None:
    pair = PAIRS.create(session, Pair(name="tiny", description="old"))
    change = Change.start(session, pair, entity="pair", state=_pair_state, expected_version=None)
    session.execute(
        update(Pair)
        .where(Pair.id == pair.id)
        .values(version=2)
        .execution_options(synchronize_session=False)
    )
    # control.api.handlers renders StaleDataError as the 412.
    with pytest.raises(StaleDataError):
        change.apply({"description": "new"})


def test_delete_audits_the_state_before(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    ident = row.id
    snapshot = current_snapshot_version(session)
    change = Change.start(session, row, entity="segment", state=_state, expected_version=1)
    change.delete(actor="admin", after={"note": 1})
    assert SEGMENTS.get(session, ident) is None
    assert _audit(session) == [
        (
            "segment.delete",
            "segment",
            str(ident),
            {"name": "code", "priority": 0, "version": 1},
            {"note": 1},
        )
    ]
    assert current_snapshot_version(session) == snapshot + 1


def test_load_starts_on_the_row_or_raises_its_404(session: Session) -> None:
    row = SEGMENTS.create(session, _segment("code"))
    change = Change.load(session, SEGMENTS, row.id, state=_state, expected_version=1)
    assert (change.row, change.entity, change.read_version) == (row, "segment", 1)
    assert change.before == {"name": "code", "priority": 0, "version": 1}
    with pytest.raises(Missing) as raised:
        Change.load(session, SEGMENTS, row.id + 1000, state=_state, expected_version=1)
    assert raised.value.code == "segment_not_found"
    with pytest.raises(PreconditionFailed):
        Change.load(session, SEGMENTS, row.id, state=_state, expected_version=2)


def test_within_bounds_a_listing_by_time(session: Session) -> None:
    events = Repository(AuditEvent, "audit_event")
    rows = [
        create_recorded(session, _segment(f"s{i}"), entity="segment", state=_state, actor="a")
        for i in range(3)
    ]
    stamps = [datetime(2026, 1, day, tzinfo=UTC) for day in (1, 2, 3)]
    audited = session.scalars(select(AuditEvent).order_by(AuditEvent.id)).all()
    for event, stamp in zip(audited, stamps, strict=True):
        event.created_at = stamp
    session.flush()

    def ids(since: datetime | None, until: datetime | None) -> list[str]:
        page = events.page(
            session, *within(AuditEvent.created_at, since, until), cursor=None, limit=10
        )
        return [e.entity_id for e in page]

    every = [str(r.id) for r in rows]
    assert ids(None, None) == every
    # since inclusive, until exclusive
    assert ids(stamps[1], None) == every[1:]
    assert ids(None, stamps[1]) == every[:1]
    assert ids(stamps[0], stamps[2]) == every[:2]
