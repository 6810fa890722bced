"""Two writers (admin and automation) flip the same rollout at the same time on a
committed database: exactly one wins, the other gets 412, nothing is lost."""

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from control import repository as repo
from control.db import Database
from control.errors import PreconditionFailed
from control.models import AuditEvent, Decision, IdempotencyRecord, Pair, Rollout
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from tests.control.conftest import WAIVE_ALL, seed


@pytest.fixture
def started_rollout(
    committed_app_client: TestClient, admin_headers: dict[str, str], model_dirs: dict[str, str]
) -> int:
    seeded = seed(committed_app_client, admin_headers, model_dirs)
    rid: int = seeded["rollout"]["id"]
    started = committed_app_client.post(
        f"/admin/v1/rollouts/{rid}/start", headers=admin_headers, json=WAIVE_ALL
    )
    assert started.status_code == 200
    assert started.headers["ETag"] == '"2"'
    return rid


def _assert_one_flip(database: Database, rid: int) -> str:
    with database.session() as s:
        rollout = s.get(Rollout, rid)
        assert rollout is not None
        assert rollout.version == 3
        decisions = s.scalars(
            select(Decision).where(Decision.rollout_id == rid).order_by(Decision.id)
        ).all()
        assert [d.rollout_version for d in decisions] == [2, 3]
        flips = s.scalar(
            select(func.count())
            .select_from(AuditEvent)
            .where(
                AuditEvent.entity_type == "rollout",
                AuditEvent.action.not_in(("rollout.create", "rollout.waive")),
            )
        )
        assert flips == 2
        assert decisions[-1].to_state == rollout.state
        return rollout.state


def test_service_level_race_on_the_compare_and_set(
    committed_database: Database, started_rollout: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = started_rollout
    barrier = threading.Barrier(2, timeout=30)
    real_compare_and_set = repo.compare_and_set

    def compare_and_set_after_both_read(*args: Any, **kwargs: Any) -> bool:
        # Both writers have read version 2 and planned their step before either
        # UPDATE runs: the race is decided by the compare-and-set itself, not by
        # which thread happened to be scheduled first.
        barrier.wait()
        return real_compare_and_set(*args, **kwargs)

    # NOTE: the only stand-in here holds the threads at the interleaving under
    # test; the UPDATE, the row lock and the commit are the database's own.
    monkeypatch.setattr(repo, "compare_and_set", compare_and_set_after_both_read)

    def flip(action: RolloutAction, actor: str) -> str:
        with committed_database.session() as s:
            try:
                transition_rollout(
                    s,
                    rid,
                    action,
                    expected_version=None,
                    actor=actor,
                    reason=None,
                    evidence={"by": actor},
                    task_id=None,
                    kind=None,
                )
            except PreconditionFailed:
                return "412"
            return "ok"

    with ThreadPoolExecutor(max_workers=2) as pool:
        admin = pool.submit(flip, RolloutAction.PAUSE, "admin:bootstrap")
        automation = pool.submit(flip, RolloutAction.PROMOTE, "automation")
        results = sorted([admin.result(timeout=60), automation.result(timeout=60)])
    assert results == ["412", "ok"]
    assert _assert_one_flip(committed_database, rid) in ("paused", "ramping")


def test_http_level_race_with_if_match(
    committed_database: Database,
    committed_app_client: TestClient,
    started_rollout: int,
    admin_headers: dict[str, str],
) -> None:
    rid = started_rollout
    app = committed_app_client.app
    assert isinstance(app, FastAPI)
    barrier = threading.Barrier(2, timeout=30)

    def flip(action: str) -> int:
        # NOTE: a TestClient per thread: each runs its own event loop.
        with TestClient(app, raise_server_exceptions=False) as client:
            barrier.wait()
            response = client.post(
                f"/admin/v1/rollouts/{rid}/{action}",
                headers={**admin_headers, "If-Match": '"2"'},
            )
            return response.status_code

    with ThreadPoolExecutor(max_workers=2) as pool:
        statuses: list[Any] = sorted(pool.map(flip, ["pause", "disable"]))
    assert statuses == [200, 412]
    assert _assert_one_flip(committed_database, rid) in ("paused", "disabled")


def test_concurrent_first_uses_of_one_idempotency_key_create_one_row(
    committed_database: Database,
    committed_app_client: TestClient,
    admin_headers: dict[str, str],
) -> None:
    app = committed_app_client.app
    assert isinstance(app, FastAPI)
    barrier = threading.Barrier(2, timeout=30)
    headers = {**admin_headers, "Idempotency-Key": "same-key"}

    def create(_: int) -> tuple[int, bool]:
        with TestClient(app, raise_server_exceptions=False) as client:
            barrier.wait()
            response = client.post("/admin/v1/pairs", json={"name": "raced"}, headers=headers)
            return response.status_code, "Idempotent-Replayed" in response.headers

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = sorted(pool.map(create, [0, 1]))
    # The loser either collided (409) or arrived after the winner's commit (a replay).
    assert outcomes[0] == (201, False)
    assert outcomes[1] in ((201, True), (409, False))
    with committed_database.session() as s:
        assert s.scalars(select(Pair.name)).all() == ["raced"]
        assert s.scalar(select(func.count()).select_from(IdempotencyRecord)) == 1
