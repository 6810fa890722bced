"""Per-case results of offline evaluations, stored by case key (never text), and the
diff that lists the cases that changed most between two evaluations."""

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import EvaluationCaseResult
from specwire.admin_client import AdminClient
from tests.control.conftest import created, qualify_offline, sdk_http
from tests.fixtures.db import ADMIN_TOKEN


def sdk(app_client: TestClient) -> AdminClient:
    # NOTE: a TestClient runs the real app in-process (no socket).
    http = TestClient(
        app_client.app,
        base_url="http://testserver/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    return AdminClient("http://testserver", http=sdk_http(http))


def _result(key: str, outcome: str = "ok", accepted: tuple[int, ...] = (8, 6, 4)) -> dict[str, Any]:
    return {
        "case_key": key,
        "outcome": outcome,
        "completion_tokens": 32,
        "drafts": 10,
        "accepted_per_position": list(accepted),
    }


def evaluation_body(offline: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """The qualifying evaluation's body again, with per-case results."""
    e = offline["evaluation"]
    keys = [c["case_key"] for c in offline["eval_set"]["cases"]]
    return {
        "pair_version_id": e["pair_version_id"],
        "eval_set_id": e["eval_set_id"],
        "case_keys": keys,
        "drafts": e["drafts"],
        "position_acceptance": e["position_acceptance"],
        "mean_acceptance_length": e["mean_acceptance_length"],
        "cost_ratio": e["cost_ratio"],
        "expected_speedup": e["expected_speedup"],
        "case_results": results,
    }


def test_case_results_are_stored_by_key_with_acceptance_and_listed(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    session: Session,
) -> None:
    offline = qualify_offline(app_client, admin_headers, seeded, cases=4)
    assert offline["evaluation"]["case_result_count"] == 0
    results = [_result("case-0"), _result("case-1", "diverged", (10, 10, 10)), _result("case-2")]
    posted = created(
        app_client.post(
            "/admin/v1/evaluations",
            json=evaluation_body(offline, results),
            headers=admin_headers,
        )
    )
    assert posted["case_result_count"] == 3
    rows = session.scalars(
        select(EvaluationCaseResult).where(EvaluationCaseResult.evaluation_id == posted["id"])
    ).all()
    assert {r.case_key: (r.outcome, r.acceptance_rate) for r in rows} == {
        "case-0": ("ok", 18 / 30),
        "case-1": ("diverged", 1.0),
        "case-2": ("ok", 18 / 30),
    }
    page = app_client.get(
        f"/admin/v1/evaluations/{posted['id']}/cases?limit=2", headers=admin_headers
    ).json()
    assert [r["case_key"] for r in page["items"]] == ["case-0", "case-1"]
    assert page["items"][1]["accepted_per_position"] == [10, 10, 10]
    assert page["next_cursor"] is not None
    rest = app_client.get(
        f"/admin/v1/evaluations/{posted['id']}/cases?cursor={page['next_cursor']}",
        headers=admin_headers,
    ).json()
    assert [r["case_key"] for r in rest["items"]] == ["case-2"] and rest["next_cursor"] is None
    listed = list(sdk(app_client).evaluations.cases(posted["id"]))
    assert [(r["case_key"], r["outcome"]) for r in listed] == [
        ("case-0", "ok"),
        ("case-1", "diverged"),
        ("case-2", "ok"),
    ]
    missing = app_client.get("/admin/v1/evaluations/98765/cases", headers=admin_headers)
    assert missing.status_code == 404


def test_bad_case_results_are_refused_with_the_field(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    offline = qualify_offline(app_client, admin_headers, seeded, cases=4)

    def post(results: list[dict[str, Any]]) -> Any:
        body = evaluation_body(offline, results)
        return app_client.post("/admin/v1/evaluations", json=body, headers=admin_headers)

    unknown = post([_result("case-0"), _result("not-run")])
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"]["unknown"] == ["not-run"]
    short = post([_result("case-0", accepted=(3, 2))])
    assert short.status_code == 422
    assert "3 accepted_per_position" in short.json()["error"]["message"]
    for bad in (
        [_result("case-0", accepted=(2, 5, 1))],  # acceptance is a prefix
        [_result("case-0", accepted=(11, 5, 1))],  # more than the steps
        [_result("case-0", outcome="great")],
        [_result("case-0"), _result("case-0")],
        [{**_result("case-0"), "prompt": "secret text"}],
    ):
        assert post(bad).status_code == 422, bad


def test_an_evaluation_from_engine_counters_carries_cases_without_acceptance(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    session: Session,
) -> None:
    offline = qualify_offline(app_client, admin_headers, seeded, cases=4)
    # Posted before the field existed: acceptance measured per request.
    assert offline["evaluation"]["acceptance_source"] == "per_request"
    unmeasured = [
        {**_result(key), "drafts": None, "accepted_per_position": None}
        for key in ("case-0", "case-1")
    ]
    body = evaluation_body(offline, unmeasured) | {"acceptance_source": "engine_counters"}
    posted = created(app_client.post("/admin/v1/evaluations", json=body, headers=admin_headers))
    assert posted["acceptance_source"] == "engine_counters"
    assert posted["case_result_count"] == 2
    rows = session.scalars(
        select(EvaluationCaseResult).where(EvaluationCaseResult.evaluation_id == posted["id"])
    ).all()
    assert {(r.drafts, r.accepted_per_position, r.acceptance_rate) for r in rows} == {
        (None, None, None)
    }
    page = app_client.get(f"/admin/v1/evaluations/{posted['id']}/cases", headers=admin_headers)
    assert [(r["drafts"], r["acceptance_rate"]) for r in page.json()["items"]] == [
        (None, None),
        (None, None),
    ]

    def refused(body: dict[str, Any]) -> str:
        response = app_client.post("/admin/v1/evaluations", json=body, headers=admin_headers)
        assert response.status_code == 422, response.text
        return str(response.json()["error"]["message"])

    # Counters with a per-case number, per request without one, half a measurement,
    # or slices (per-label acceptance) from counters: refused.
    counters = {"acceptance_source": "engine_counters"}
    assert "exactly when" in refused(evaluation_body(offline, [_result("case-0")]) | counters)
    assert "exactly when" in refused(evaluation_body(offline, unmeasured))
    half = [{**_result("case-0"), "drafts": None}]
    assert "both null or both set" in refused(evaluation_body(offline, half) | counters)
    slices = {"slices": {"task=code": {"cases": 2, "drafts": 10}}}
    assert "no slices" in refused(evaluation_body(offline, unmeasured) | counters | slices)


def test_diff_lists_the_cases_that_changed_most_worse_outcomes_first(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    offline = qualify_offline(app_client, admin_headers, seeded, cases=6)

    def post(results: list[dict[str, Any]]) -> int:
        body = evaluation_body(offline, results)
        return int(
            created(app_client.post("/admin/v1/evaluations", json=body, headers=admin_headers))[
                "id"
            ]
        )

    before = post(
        [
            _result("case-0"),
            _result("case-1", "diverged"),
            _result("case-2", accepted=(9, 9, 9)),
            _result("case-3"),
            _result("case-4"),
        ]
    )
    after = post(
        [
            _result("case-0", accepted=(9, 8, 7)),  # acceptance up 0.2
            _result("case-1"),  # better outcome
            _result("case-2", accepted=(3, 0, 0)),  # acceptance down 0.8
            _result("case-3", "error"),  # two ranks worse
            _result("case-4"),  # unchanged
            _result("case-5"),  # new
        ]
    )

    def diff(**params: Any) -> Any:
        return app_client.get(
            f"/admin/v1/evaluations/{after}/diff", params=params, headers=admin_headers
        )

    doc = diff(base=before).json()
    assert (doc["before_id"], doc["after_id"], doc["compared"], doc["changed"]) == (
        before,
        after,
        5,
        4,
    )
    assert (doc["worse"], doc["better"], doc["only_before"], doc["only_after"]) == (
        1,
        1,
        [],
        ["case-5"],
    )
    assert [c["case_key"] for c in doc["cases"]] == ["case-3", "case-1", "case-2", "case-0"]
    first = doc["cases"][0]
    assert (first["outcome_before"], first["outcome_after"], first["outcome_change"]) == (
        "ok",
        "error",
        "worse",
    )
    assert doc["cases"][2]["acceptance_delta"] == pytest.approx(3 / 30 - 27 / 30)
    assert [c["case_key"] for c in diff(base=before, limit=1).json()["cases"]] == ["case-3"]
    assert sdk(app_client).evaluations.diff(before, after, limit=2)["changed"] == 4

    aggregates_only = offline["evaluation"]["id"]
    refused = diff(base=aggregates_only)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "no_case_results"
    assert refused.json()["error"]["details"] == {"evaluation_id": aggregates_only}
    assert diff(base=98765).status_code == 404
    assert diff(base=before, limit=0).status_code == 422
