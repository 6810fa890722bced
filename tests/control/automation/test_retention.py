"""Retention of per-request records: the beat's job, run by a real Celery worker."""

from datetime import timedelta

from sqlalchemy import select

from control import clock
from control.automation.celery_app import AutomationCelery, beat_schedule
from control.db import Database
from control.models import RequestRecordRow
from control.requests import service
from control.settings import ControlSettings
from specwire import Arm, RequestRecordDoc
from tests.control.automation import scenario as sc


def _doc(request_id: str, age: timedelta) -> RequestRecordDoc:
    return RequestRecordDoc(
        request_id=request_id,
        received_at=clock.now() - age,
        tenant_id=1,
        tenant="acme",
        endpoint="completions",
        stream=False,
        model="tiny",
        arm=Arm.BASELINE,
        reason="no_segment",
        e2e_ms=12.0,
        outcome="ok",
        http_status=200,
    )


def test_the_retention_job_deletes_only_records_past_the_period(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    days = automation_app.specroute_settings.automation.request_record_retention_days
    assert days == 7.0  # the default
    ages = {
        "fresh": timedelta(minutes=1),
        "six-days": timedelta(days=6, hours=23),
        "eight-days": timedelta(days=8),
        "a-month": timedelta(days=30),
    }
    with committed_database.session() as s:
        service.store_records(s, "gw-a", [_doc(rid, age) for rid, age in ages.items()])
    result = sc.run_task(automation_app, "purge_request_records")
    assert result == {"deleted": 2, "retention_days": 7.0}
    with committed_database.session() as s:
        left = set(s.scalars(select(RequestRecordRow.request_id)))
    assert left == {"fresh", "six-days"}
    # Nothing left to delete: a second run (or a redelivery) is a no-op.
    assert sc.run_task(automation_app, "purge_request_records")["deleted"] == 0


def test_purge_works_in_batches(committed_database: Database) -> None:
    with committed_database.session() as s:
        service.store_records(s, "gw-a", [_doc(f"old-{i}", timedelta(days=9)) for i in range(25)])
        service.store_records(s, "gw-a", [_doc("new", timedelta(hours=1))])
    deleted = service.purge_expired(
        committed_database, retention=timedelta(days=7), now=clock.now(), batch=10
    )
    assert deleted == 25
    with committed_database.session() as s:
        assert list(s.scalars(select(RequestRecordRow.request_id))) == ["new"]


def test_the_beat_schedules_retention_at_its_setting() -> None:
    schedule = beat_schedule(ControlSettings(request_retention_interval_s=120.0))
    entry = schedule["request-retention"]
    assert entry["task"] == "specroute.automation.purge_request_records"
    assert entry["schedule"] == timedelta(seconds=120.0)
