"""A request record turned into an eval case: the set's next version, labels from the
record's settings, the prompt reference from the operator, no text."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent
from tests.control.conftest import created, eval_cases
from tests.control.requests.records import batch, record

DIGEST = "ab" * 32


def _case(**kw: Any) -> dict[str, Any]:
    return {
        "from_request": "req-incident-1",
        "prompt_ref": "incidents:1",
        "prompt_sha256": DIGEST,
        "reviewer": "oncall@example.com",
        "refresh_by": "2999-06-30",
    } | kw


def test_a_request_becomes_a_production_incident_case_of_the_next_version(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    session: Session,
) -> None:
    stored = app_client.post(
        "/internal/v1/telemetry",
        json=batch(
            [record("req-incident-1", adapter="sql-lora", outcome="error", http_status=502)]
        ),
        headers=internal_headers,
    )
    assert stored.status_code in (200, 202), stored.text
    body = {"name": "code-evals", "prompt_store": "file:///e.jsonl", "cases": eval_cases(3)}
    v1 = created(app_client.post("/admin/v1/eval-sets", json=body, headers=admin_headers))

    v2 = created(
        app_client.post(
            f"/admin/v1/eval-sets/{v1['id']}/cases",
            json=_case(blocking=True, boundary="irreversible_action"),
            headers=admin_headers,
        )
    )
    assert (v2["name"], v2["version"], v2["case_count"]) == ("code-evals", 2, 4)
    assert [c["case_key"] for c in v2["cases"][:3]] == ["case-0", "case-1", "case-2"]
    case = v2["cases"][3]
    assert case["case_key"] == "incident-req-incident-1"
    assert (case["source"], case["prompt_ref"], case["prompt_sha256"]) == (
        "production_incident",
        "incidents:1",
        DIGEST,
    )
    assert (case["blocking"], case["boundary"]) == (True, "irreversible_action")
    assert case["labels"] == {
        "temperature": "0.7",
        "adapter": "sql-lora",
        "segment": "code",
        "tenant": "acme",
        "endpoint": "chat",
        "request": "req-incident-1",
    }
    assert case["why"] == "production request req-incident-1: outcome error, HTTP 502"
    assert case["supports"] == "incident: request req-incident-1"
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "eval_set.add_case"))
    assert [(a.entity_id, (a.after or {})["from_request"]) for a in audit] == [
        (str(v2["id"]), "req-incident-1")
    ]

    def add(set_id: int, **kw: Any) -> Any:
        return app_client.post(
            f"/admin/v1/eval-sets/{set_id}/cases", json=_case(**kw), headers=admin_headers
        )

    stale = add(v1["id"], case_key="other")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_eval_set"
    again = add(v2["id"])
    assert again.status_code == 409 and again.json()["error"]["code"] == "case_exists"
    unknown = add(v2["id"], from_request="never-seen")
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"]["param"] == "from_request"
    assert add(v2["id"], case_key="x", blocking=True).status_code == 422  # no boundary
    assert add(v2["id"], case_key="x", prompt_text="the prompt").status_code == 422
    assert add(98765).status_code == 404
