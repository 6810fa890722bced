"""The shadow stage judged by a real Celery worker: the canary starts only on the shadow's
exit criterion, with a decision record; a failing shadow rolls back; a second shadow
follows a rolled-back canary."""

import pytest

from control.automation.celery_app import AutomationCelery
from control.db import Database
from control.decisions.record import SECTIONS
from control.rollouts.gates import StageGate
from control.rollouts.service import MissingEvidence, transition_rollout
from control.rollouts.state_machine import RolloutAction
from tests.control.automation import scenario as sc


def test_shadow_passes_into_canary_then_a_second_shadow_fails(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database, shadow=True)
    sc.idle_spec_pool(committed_database, setup)
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("shadow", 10.0)
    # The canary sweep leaves a shadow alone; only the shadow's own rule moves it.
    assert sc.run_task(automation_app, "evaluate_canaries") == []

    result: dict[str, object] = {}
    fed: list[int] = []
    for _ in range(4):
        fed.extend(sc.good_traffic(committed_database, setup))
        [result] = [
            r
            for r in sc.run_task(automation_app, "evaluate_shadows")
            if r["rollout_id"] == setup.rollout_id
        ]
        if result["action"] != "hold":
            break
    assert result["action"] == "start" and result["to_state"] == "canary", result
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("canary", 1.0)
    passed = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert (passed.kind, passed.from_state, passed.to_state) == (
        "shadow_passed",
        "shadow",
        "canary",
    )
    assert passed.actor == "automation" and passed.task_id is not None
    verdict = passed.evidence["verdict"]
    assert verdict["checks"] == {
        "acceptance_accepted": True,
        "mean_acceptance_length": True,
        "latency_at_canary_load": True,
        "p95_within_margin": True,
        "error_rate_within_margin": True,
    }
    assert passed.evidence["window_ids"] == sorted(fed)
    assert passed.evidence["gates"]["shadow"]["holds"] is True
    assert "waived" not in passed.evidence
    assert passed.record_markdown is not None
    assert passed.record_markdown.startswith("# Start rollout")
    assert "The canary starts: 1 % of the segment's cohorts" in passed.record_markdown
    for section in SECTIONS:
        assert f"## {section}" in passed.record_markdown
    assert ("automation", "rollout.start") in sc.audit_actions(committed_database, setup.rollout_id)

    # The canary is judged as any canary from here, on evidence since it began.
    sc.good_traffic(committed_database, setup)
    promoted = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
    assert promoted["action"] == "promote", promoted

    # Rolled back, a fresh attempt goes through a shadow again; a bad draft fails it.
    current = sc.rollout(committed_database, setup.rollout_id)
    sc.admin_transition(
        committed_database, setup.rollout_id, RolloutAction.ROLLBACK, current.version
    )
    with committed_database.session() as s:
        rolled = sc.rollout(committed_database, setup.rollout_id)
        with pytest.raises(MissingEvidence):
            transition_rollout(
                s,
                setup.rollout_id,
                RolloutAction.START,
                expected_version=rolled.version,
                actor=sc.ADMIN,
                reason="again",
                evidence=None,
                task_id=None,
                kind=None,
            )
    with committed_database.session() as s:
        transition_rollout(
            s,
            setup.rollout_id,
            RolloutAction.START,
            expected_version=rolled.version,
            actor=sc.ADMIN,
            reason="offline evidence on file",
            evidence=None,
            task_id=None,
            kind=None,
            waive=frozenset({StageGate.OFFLINE_EVALUATION}),
        )
    assert sc.rollout(committed_database, setup.rollout_id).state == "shadow"
    for _ in range(5):
        sc.feed(committed_database, setup, spec_alpha=0.2, spec_tpot_ms=10.0, baseline_tpot_ms=20.0)
        result = sc.run_task(automation_app, "evaluate_shadow", setup.rollout_id)
        if result["action"] != "hold":
            break
    assert result["action"] == "rollback", result
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("rolled_back", 0.0)
    failed = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert (failed.kind, failed.from_state) == ("shadow_low_acceptance", "shadow")
    assert failed.record_markdown is not None and "shadow failed" in failed.record_markdown


def test_offline_rollout_moves_into_shadow_when_an_evaluation_qualifies(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    from datetime import date

    from control.models import EvalCase, EvalSet, OfflineEvaluation, Segment

    setup = sc.create_rollout(committed_database, shadow=True)
    current = sc.rollout(committed_database, setup.rollout_id)
    sc.admin_transition(
        committed_database, setup.rollout_id, RolloutAction.ROLLBACK, current.version
    )
    current = sc.rollout(committed_database, setup.rollout_id)
    sc.admin_transition(
        committed_database, setup.rollout_id, RolloutAction.EVALUATE, current.version
    )
    assert sc.rollout(committed_database, setup.rollout_id).state == "offline"
    waiting = sc.run_task(automation_app, "advance_offline", setup.rollout_id)
    assert waiting["action"] == "wait" and "names no eval set" in waiting["reason"]

    with committed_database.session() as s:
        segment = s.get(Segment, setup.segment_id)
        assert segment is not None
        segment.eval_set = f"evals-{setup.rollout_id}"
        eval_set = EvalSet(
            name=segment.eval_set,
            version=1,
            prompt_store="file:///evals.jsonl",
            created_by="admin:test",
            cases=[
                EvalCase(
                    case_key=f"c{i}",
                    labels={},
                    why="w",
                    source="curated",
                    reviewer="r",
                    supports="s",
                    refresh_by=date(2999, 1, 1),
                    prompt_ref=f"p{i}",
                    prompt_sha256="0" * 64,
                )
                for i in range(20)
            ],
        )
        s.add(eval_set)
        s.flush()
        s.add(
            OfflineEvaluation(
                pair_version_id=setup.pair_version_id,
                eval_set_id=eval_set.id,
                cases=20,
                drafts=400,
                position_acceptance=[0.9, 0.8, 0.7],
                mean_acceptance_length=1 + 0.9 + 0.72 + 0.504,
                cost_ratio=0.1,
                expected_speedup={"3": 2.0},
                stale_case_keys=[],
                actor="admin:test",
            )
        )
    moved = [
        r
        for r in sc.run_task(automation_app, "advance_offlines")
        if r["rollout_id"] == setup.rollout_id
    ]
    assert moved[0]["action"] == "start" and moved[0]["to_state"] == "shadow", moved
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert (decision.kind, decision.from_state, decision.to_state) == (
        "offline_passed",
        "offline",
        "shadow",
    )
    assert decision.actor == "automation"
    assert decision.evidence["gates"]["offline_evaluation"]["holds"] is True
    assert decision.evidence["verdict"]["checks"]["expected_speedup"] is True
    assert decision.record_markdown is not None
    assert "The shadow starts: 10 % of the segment's requests" in decision.record_markdown


def test_a_shadow_seen_idle_waits_for_evidence_at_the_canarys_load(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    """A 1 % shadow, a canary that starts at 50 %, one spec worker: the mirrors ran at load 0
    but the canary would keep several requests in flight on that worker, so the shadow holds
    with advice instead of starting a canary its evidence does not cover."""
    setup = sc.create_rollout(
        committed_database, shadow=True, stages=(50.0, 100.0), shadow_percentage=1.0
    )
    sc.heartbeat(committed_database, setup, "spec-only")
    fed: list[int] = []
    for _ in range(2):
        fed.extend(sc.good_traffic(committed_database, setup))
        result = sc.run_task(automation_app, "evaluate_shadow", setup.rollout_id)
        assert result["action"] == "hold", result
    assert "no evidence at the canary's first stage's load" in result["reason"]
    assert "shadow_percentage" in result["reason"]
    assert sc.rollout(committed_database, setup.rollout_id).state == "shadow"
    held = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert (held.kind, held.to_state) == ("hold", "shadow")
    assert held.evidence["verdict"]["code"] == "no_evidence_at_next_load"
    assert held.evidence["verdict"]["checks"]["latency_at_canary_load"] is False
    assert held.evidence["verdict"]["checks"]["acceptance_accepted"] is True
    projection = held.evidence["statistics"]["next_stage"]
    assert projection["target"] == "canary's first stage"
    # The mirrors copy 1 % at most; the segment's rate is the callers' requests alone:
    # two batches of 100 in 10 s windows that start a moment apart.
    assert (projection["share_now"], projection["share_next"]) == (1.0, 50.0)
    assert 18.0 < projection["segment_rate_per_s"] <= 20.0
    assert projection["spec_load_now"] == 0.0 and projection["spec_workers"] == 1
    # Little's law: 49 % of 20 req/s, each as long as a mirror took, on one worker.
    assert projection["spec_load_next"] > 3.0
    assert projection["speedup"] is None
