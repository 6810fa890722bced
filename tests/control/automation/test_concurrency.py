"""Two writers and repeated deliveries: nothing flips twice, nothing is lost."""

import uuid
from typing import Any

import pytest
from sqlalchemy import event

from control.automation.celery_app import AutomationCelery
from control.db import Database
from control.errors import PreconditionFailed
from control.rollouts.state_machine import RolloutAction
from tests.control.automation import scenario as sc


def test_admin_pause_racing_an_automated_promote_loses_nothing(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.good_traffic(committed_database, setup)
    read_version = sc.rollout(committed_database, setup.rollout_id).version
    fired: list[int] = []

    def admin_pauses_first(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        # Interleave for real: the admin's pause commits on its own connection after
        # the job has read the rollout and right before the job's compare-and-set.
        if statement.lstrip().upper().startswith("UPDATE ROLLOUTS") and not fired:
            fired.append(1)
            sc.admin_transition(
                committed_database, setup.rollout_id, RolloutAction.PAUSE, read_version
            )

    engine = automation_app.database.engine
    event.listen(engine, "before_cursor_execute", admin_pauses_first)
    try:
        result = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
    finally:
        event.remove(engine, "before_cursor_execute", admin_pauses_first)

    assert fired and result["action"] == "lost_race"
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.paused_from, row.percentage) == ("paused", "canary", 1.0)
    assert row.version == read_version + 1
    flips = [d for d in sc.decisions(committed_database, setup.rollout_id) if d.kind != "hold"]
    assert [(d.actor, d.to_state) for d in flips] == [(sc.ADMIN, "canary"), (sc.ADMIN, "paused")]
    actions = sc.audit_actions(committed_database, setup.rollout_id)
    assert (sc.ADMIN, "rollout.pause") in actions
    assert ("automation", "rollout.promote.rejected") in actions


def test_automated_promote_first_then_stale_admin_pause_retries(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.good_traffic(committed_database, setup)
    admin_read = sc.rollout(committed_database, setup.rollout_id).version
    assert sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"] == "promote"
    with pytest.raises(PreconditionFailed):
        sc.admin_transition(committed_database, setup.rollout_id, RolloutAction.PAUSE, admin_read)
    fresh = sc.rollout(committed_database, setup.rollout_id)
    paused = sc.admin_transition(
        committed_database, setup.rollout_id, RolloutAction.PAUSE, fresh.version
    )
    assert (paused.state, paused.paused_from, paused.percentage) == ("paused", "ramping", 5.0)
    kinds = [(d.actor, d.kind) for d in sc.decisions(committed_database, setup.rollout_id)]
    assert ("automation", "canary_promote") in kinds and kinds[-1][0] == sc.ADMIN


def test_redelivered_task_does_not_flip_twice(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.good_traffic(committed_database, setup)
    task_id = f"redelivered-{uuid.uuid4().hex}"
    first = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id, task_id=task_id)
    second = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id, task_id=task_id)
    assert first["action"] == "promote" and not first["replayed"]
    assert second["replayed"] and second["decision_id"] == first["decision_id"]
    # A retry under a new id re-reads: the new stage has no evidence yet, so it holds.
    retry = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
    assert retry["action"] == "hold"
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("ramping", 5.0)
    promotes = [
        d for d in sc.decisions(committed_database, setup.rollout_id) if d.kind == "canary_promote"
    ]
    assert len(promotes) == 1 and promotes[0].task_id == task_id
    actions = sc.audit_actions(committed_database, setup.rollout_id)
    assert actions.count(("automation", "rollout.promote")) == 1


def test_redelivered_sweep_promotes_once(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.good_traffic(committed_database, setup)
    task_id = f"sweep-{uuid.uuid4().hex}"
    runs = [sc.run_task(automation_app, "evaluate_canaries", task_id=task_id) for _ in range(2)]
    mine = [next(r for r in run if r["rollout_id"] == setup.rollout_id) for run in runs]
    assert mine[0]["action"] == "promote" and not mine[0]["replayed"]
    assert mine[1]["replayed"] and mine[1]["decision_id"] == mine[0]["decision_id"]
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("ramping", 5.0)
