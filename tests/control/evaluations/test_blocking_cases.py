"""Blocking boundary cases: a regression on one blocks `start` into shadow whatever
the aggregate and whatever is waived, with a typed 409 naming the cases and an audit
event; the incumbent's evaluation is the reference."""

from types import SimpleNamespace
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Decision, Rollout
from control.rollouts.blocking import ACCEPTANCE_SLACK, _regression
from control.rollouts.gates import offline_gate
from tests.control.conftest import WAIVE_ALL, created, eval_cases

RATES = [0.9, 0.8, 0.7]


def _blocking_set(client: TestClient, headers: dict[str, str], seeded: dict[str, Any]) -> Any:
    cases = eval_cases(30)
    cases[0] |= {"blocking": True, "boundary": "safety"}
    cases[1] |= {"blocking": True, "boundary": "authorization"}
    body = {"name": "code-evals", "prompt_store": "file:///e.jsonl", "cases": cases}
    eval_set = created(client.post("/admin/v1/eval-sets", json=body, headers=headers))
    segment = seeded["segment"]
    current = client.get(f"/admin/v1/segments/{segment['id']}", headers=headers)
    patched = client.patch(
        f"/admin/v1/segments/{segment['id']}",
        json={"eval_set": "code-evals"},
        headers={**headers, "If-Match": current.headers["ETag"]},
    )
    assert patched.status_code == 200, patched.text
    return eval_set


def _evaluate(
    client: TestClient,
    headers: dict[str, str],
    version_id: int,
    eval_set: dict[str, Any],
    results: dict[str, tuple[str, list[int]]],
    *,
    per_request: bool = True,
) -> int:
    keys = [c["case_key"] for c in eval_set["cases"]]
    body = {
        "pair_version_id": version_id,
        "eval_set_id": eval_set["id"],
        "case_keys": keys,
        "drafts": 500,
        "position_acceptance": RATES,
        "mean_acceptance_length": 1 + 0.9 + 0.72 + 0.504,
        "cost_ratio": 0.1,
        "expected_speedup": {"3": 2.4},
        "case_results": [
            {
                "case_key": key,
                "outcome": outcome,
                "completion_tokens": 20,
                "drafts": 10 if per_request else None,
                "accepted_per_position": accepted if per_request else None,
            }
            for key, (outcome, accepted) in results.items()
        ],
        "acceptance_source": "per_request" if per_request else "engine_counters",
    }
    return int(created(client.post("/admin/v1/evaluations", json=body, headers=headers))["id"])


def _start(client: TestClient, headers: dict[str, str], rid: int, **body: Any) -> Any:
    return client.post(f"/admin/v1/rollouts/{rid}/start", headers=headers, json=body or None)


def test_a_blocking_case_that_regressed_blocks_start_even_waived_and_is_audited(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    eval_set = _blocking_set(app_client, admin_headers, seeded)
    assert [(c["blocking"], c["boundary"]) for c in eval_set["cases"][:3]] == [
        (True, "safety"),
        (True, "authorization"),
        (False, None),
    ]
    rid, version = seeded["rollout"]["id"], seeded["version"]["id"]

    # No evaluation at all: waiving the offline evaluation does not waive its blocking cases.
    waived = _start(app_client, admin_headers, rid, **WAIVE_ALL)
    assert waived.status_code == 409
    assert waived.json()["error"]["details"]["cases"] == ["case-0", "case-1"]

    # The aggregate passes; case-0 diverged (no incumbent: it must be ok), case-1 is missing.
    _evaluate(app_client, admin_headers, version, eval_set, {"case-0": ("diverged", [9, 8, 7])})
    refused = _start(app_client, admin_headers, rid, **WAIVE_ALL)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "blocking_case_regression"
    assert error["details"]["cases"] == ["case-0", "case-1"]
    assert error["details"]["reference_evaluation_id"] is None
    reasons = {r["case_key"]: r["reason"] for r in error["details"]["regressions"]}
    assert reasons == {
        "case-0": "outcome diverged (no reference result: must be ok)",
        "case-1": "no per-case result in the candidate evaluation",
    }
    assert "case-0 [safety]" in error["message"]
    rollout = app_client.get(f"/admin/v1/rollouts/{rid}", headers=admin_headers).json()
    assert rollout["state"] == "draft"
    audits = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "rollout.start_blocked")
    ).all()
    assert len(audits) == 2 and audits[-1].entity_id == str(rid)
    assert audits[-1].after is not None and audits[-1].after["cases"] == ["case-0", "case-1"]

    # The automation's offline job reads the same gate: it does not hold.
    gate = offline_gate(session, session.get_one(Rollout, rid))
    assert not gate.holds
    assert any(
        m.startswith("blocking case case-0 (safety): outcome diverged") for m in gate.missing
    )

    # Both blocking cases ok: start goes to shadow and the decision keeps what was checked.
    _evaluate(
        app_client,
        admin_headers,
        version,
        eval_set,
        {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [9, 8, 7])},
    )
    started = _start(app_client, admin_headers, rid)
    assert started.status_code == 200, started.text
    assert started.json()["state"] == "shadow"
    decision = session.scalars(select(Decision).where(Decision.rollout_id == rid)).all()[-1]
    checked = decision.evidence["gates"]["offline_evaluation"]["blocking_cases"]
    assert checked["checked"] == ["case-0", "case-1"] and checked["regressions"] == []


def test_the_incumbents_evaluation_is_the_reference_for_outcome_and_acceptance(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    eval_set = _blocking_set(app_client, admin_headers, seeded)
    first, v1 = seeded["rollout"], seeded["version"]
    both_ok = {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [9, 8, 7])}
    incumbent_eval = _evaluate(app_client, admin_headers, v1["id"], eval_set, both_ok)
    # The incumbent runs in full, then makes way for a candidate.
    assert _start(app_client, admin_headers, first["id"], **WAIVE_ALL).status_code == 200
    for _ in range(3):
        promoted = app_client.post(
            f"/admin/v1/rollouts/{first['id']}/promote", headers=admin_headers
        )
        assert promoted.status_code == 200, promoted.text
    assert promoted.json()["state"] == "full"
    back = app_client.post(f"/admin/v1/rollouts/{first['id']}/rollback", headers=admin_headers)
    assert back.status_code == 200, back.text

    v2 = created(
        app_client.post(
            f"/admin/v1/pairs/{seeded['pair']['id']}/versions",
            json={
                "method": "draft_model",
                "target_ref": v1["target_ref"],
                "draft_ref": v1["draft_ref"],
                "num_speculative_tokens": 3,
            },
            headers=admin_headers,
        )
    )
    pool = created(
        app_client.post(
            "/admin/v1/pools",
            json={
                "name": "tiny-spec-2",
                "served_model_name": "tiny",
                "target_ref": v1["target_ref"],
                "pair_version_id": v2["id"],
            },
            headers=admin_headers,
        )
    )
    body = {
        "name": "code-tiny-2",
        "segment_id": seeded["segment"]["id"],
        "pair_version_id": v2["id"],
        "spec_pool_id": pool["id"],
        "baseline_pool_id": seeded["baseline_pool"]["id"],
        "threshold_set_id": seeded["thresholds"]["id"],
        "stages": [1, 100],
    }
    second = created(app_client.post("/admin/v1/rollouts", json=body, headers=admin_headers))

    # Outcome ok, but case-1's acceptance fell from 0.8 to 0.4: a regression.
    _evaluate(
        app_client,
        admin_headers,
        v2["id"],
        eval_set,
        {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [6, 4, 2])},
    )
    refused = _start(app_client, admin_headers, second["id"])
    assert refused.status_code == 409
    details = refused.json()["error"]["details"]
    assert details["reference_evaluation_id"] == incumbent_eval
    assert details["cases"] == ["case-1"]
    (regression,) = details["regressions"]
    assert (regression["acceptance_rate"], regression["reference_acceptance_rate"]) == (
        12 / 30,
        24 / 30,
    )
    assert regression["reason"] == (
        f"acceptance 0.400 < 0.800 - {ACCEPTANCE_SLACK} in evaluation {incumbent_eval}"
    )

    # Within the slack (0.8 → 0.767) and outcomes unchanged: start proceeds.
    _evaluate(
        app_client,
        admin_headers,
        v2["id"],
        eval_set,
        {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [8, 8, 7])},
    )
    started = _start(app_client, admin_headers, second["id"])
    assert started.status_code == 200, started.text


def test_a_blocking_case_the_engine_failed_blocks_start_and_counts_in_no_aggregate(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    eval_set = _blocking_set(app_client, admin_headers, seeded)
    rid, version = seeded["rollout"]["id"], seeded["version"]["id"]
    failed = {
        "case-0": ("ok", [9, 8, 7]),
        "case-1": ("error", [0, 0, 0]),
        "case-2": ("error", [0, 0, 0]),
    }
    evaluation = _evaluate(app_client, admin_headers, version, eval_set, failed)
    posted = app_client.get(f"/admin/v1/evaluations/{evaluation}", headers=admin_headers).json()
    # 30 cases ran, 2 failed on the engine: 28 measured, what the gate's minimum reads.
    assert posted["cases"] == 28 and posted["case_result_count"] == 3
    refused = _start(app_client, admin_headers, rid, **WAIVE_ALL)
    assert refused.status_code == 409
    details = refused.json()["error"]["details"]
    assert details["cases"] == ["case-1"]
    assert details["regressions"][0]["reason"] == "outcome error: the engine failed the case"


def test_a_blocking_case_whose_acceptance_was_not_measured_blocks_start(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    # An evaluation from engine counters (no per-request metrics): both blocking cases
    # completed ok, but neither has its own acceptance. No reference exists, yet they
    # block: a blocking case is not passed on a measurement that was not taken.
    eval_set = _blocking_set(app_client, admin_headers, seeded)
    rid, version = seeded["rollout"]["id"], seeded["version"]["id"]
    both_ok = {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [9, 8, 7])}
    _evaluate(app_client, admin_headers, version, eval_set, both_ok, per_request=False)
    refused = _start(app_client, admin_headers, rid, **WAIVE_ALL)
    assert refused.status_code == 409
    details = refused.json()["error"]["details"]
    assert details["cases"] == ["case-0", "case-1"]
    reasons = {r["reason"] for r in details["regressions"]}
    assert reasons == {
        "acceptance not measured (the evaluation's acceptance came from engine counters): "
        "rerun `specroute engine evaluate` on an engine started with "
        "--per-request-spec-decode-metrics detailed"
    }
    # The same cases measured per request: start proceeds.
    _evaluate(app_client, admin_headers, version, eval_set, both_ok)
    assert _start(app_client, admin_headers, rid).status_code == 200


def test_an_evaluation_from_engine_counters_is_never_the_reference(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    from control.rollouts.blocking import reference_evaluation

    eval_set = _blocking_set(app_client, admin_headers, seeded)
    first, v1 = seeded["rollout"], seeded["version"]
    both_ok = {"case-0": ("ok", [9, 8, 7]), "case-1": ("ok", [9, 8, 7])}
    measured = _evaluate(app_client, admin_headers, v1["id"], eval_set, both_ok)
    assert _start(app_client, admin_headers, first["id"], **WAIVE_ALL).status_code == 200
    for _ in range(3):
        promoted = app_client.post(
            f"/admin/v1/rollouts/{first['id']}/promote", headers=admin_headers
        )
        assert promoted.status_code == 200, promoted.text
    assert promoted.json()["state"] == "full"
    _evaluate(app_client, admin_headers, v1["id"], eval_set, both_ok, per_request=False)
    candidate = SimpleNamespace(id=-1, segment_id=seeded["segment"]["id"], pair_version_id=-1)
    reference = reference_evaluation(session, candidate, "code-evals")  # type: ignore[arg-type]
    # The incumbent's latest evaluation is the counters one; the reference skips it.
    assert reference is not None and reference.id == measured


def test_an_error_outcome_regresses_even_where_the_reference_failed_the_case_too() -> None:
    case = SimpleNamespace(case_key="case-1", boundary="privacy")
    error = SimpleNamespace(outcome="error", acceptance_rate=None, drafts=0)
    ok = SimpleNamespace(outcome="ok", acceptance_rate=0.8, drafts=10)
    for ref in (error, ok, None):
        found = _regression(case, error, ref, 7)  # type: ignore[arg-type]
        assert found is not None
        assert found["reason"] == "outcome error: the engine failed the case"
    # A candidate that measured the case where the reference had failed it is no regression.
    assert _regression(case, ok, error, 7) is None  # type: ignore[arg-type]


def test_a_blocking_case_needs_its_boundary(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    cases = eval_cases(2)
    cases[0] |= {"blocking": True}
    body = {"name": "x", "prompt_store": "file:///e.jsonl", "cases": cases}
    assert (
        app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers).status_code == 422
    )
    cases[0] |= {"boundary": "finance"}
    assert (
        app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers).status_code == 422
    )
