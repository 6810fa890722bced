"""Pairs and versions: registration validates artifacts and refuses incompatible pairs."""

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, PairVersion
from control.snapshot.version import current_snapshot_version
from tests.control.conftest import WAIVE_ALL


def _pair(client: TestClient, headers: dict[str, str], name: str = "tiny") -> dict[str, Any]:
    response = client.post(
        "/admin/v1/pairs", json={"name": name, "description": "d"}, headers=headers
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _register(client: TestClient, headers: dict[str, str], pair_id: int, **body: Any) -> Any:
    payload = {"method": "draft_model", "num_speculative_tokens": 3, **body}
    return client.post(f"/admin/v1/pairs/{pair_id}/versions", json=payload, headers=headers)


def test_create_pair_writes_row_and_audit(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    pair = _pair(app_client, admin_headers)
    assert pair["name"] == "tiny"
    assert pair["versions"] == []
    audit = session.scalars(select(AuditEvent).where(AuditEvent.entity_type == "pair")).one()
    assert (audit.action, audit.entity_id) == ("pair.create", str(pair["id"]))
    assert audit.after == {"name": "tiny", "description": "d"}
    duplicate = app_client.post("/admin/v1/pairs", json={"name": "tiny"}, headers=admin_headers)
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["code"] == "pair_name_taken"
    assert duplicate.json()["error"]["param"] == "name"


def test_invalid_body_is_422_with_field_errors(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    response = app_client.post(
        "/admin/v1/pairs", json={"name": "has space", "extra": 1}, headers=admin_headers
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    locs = sorted(tuple(e["loc"]) for e in error["field_errors"])
    assert locs == [("body", "extra"), ("body", "name")]


def test_register_compatible_version_records_digests_and_bumps_snapshot(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    pair = _pair(app_client, admin_headers)
    before = current_snapshot_version(session)
    response = _register(
        app_client,
        admin_headers,
        pair["id"],
        target_ref=model_dirs["target"],
        draft_ref=model_dirs["draft"],
        draft_sample_method="probabilistic",
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["version"] == 1
    assert body["status"] == "active"
    assert len(body["target_digest"]) == 64
    assert len(body["draft_digest"]) == 64
    assert body["target_digest"] != body["draft_digest"]
    assert len(body["tokenizer_hash"]) == 64
    assert body["chat_template_hash"] is not None
    row = session.get(PairVersion, body["id"])
    assert row is not None and row.draft_sample_method == "probabilistic"
    assert current_snapshot_version(session) == before + 1
    second = _register(
        app_client, admin_headers, pair["id"], method="ngram", target_ref=model_dirs["target"]
    )
    assert second.status_code == 201, second.text
    assert (second.json()["version"], second.json()["draft_digest"]) == (2, None)
    listed = app_client.get(f"/admin/v1/pairs/{pair['id']}/versions", headers=admin_headers)
    assert [v["version"] for v in listed.json()["items"]] == [1, 2]


def test_incompatible_pairs_are_refused_naming_the_mismatch(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    pair = _pair(app_client, admin_headers)
    vocab = _register(
        app_client,
        admin_headers,
        pair["id"],
        target_ref=model_dirs["target"],
        draft_ref=model_dirs["draft_other_vocab"],
    )
    assert vocab.status_code == 422
    assert vocab.json()["error"]["code"] == "pair_incompatible"
    assert vocab.json()["error"]["details"]["mismatch"] == "vocab_size"
    assert vocab.json()["error"]["param"] == "draft_ref"
    tokenizer = _register(
        app_client,
        admin_headers,
        pair["id"],
        target_ref=model_dirs["target"],
        draft_ref=model_dirs["draft_other_tokenizer"],
    )
    assert tokenizer.status_code == 422
    assert tokenizer.json()["error"]["details"]["mismatch"] == "tokenizer_hash"
    head_dim = _register(
        app_client,
        admin_headers,
        pair["id"],
        target_ref=model_dirs["target"],
        draft_ref=model_dirs["draft_bad_head_dim"],
    )
    assert head_dim.status_code == 422
    assert head_dim.json()["error"]["code"] == "unsupported_architecture"
    assert head_dim.json()["error"]["details"]["mismatch"] == "head_dim"
    no_draft = _register(app_client, admin_headers, pair["id"], target_ref=model_dirs["target"])
    assert no_draft.status_code == 422
    assert no_draft.json()["error"]["param"] == "draft_ref"
    # Inside the model roots (the test's tmp dir) but absent: named as missing.
    absent = str(Path(model_dirs["target"]).parent / "absent-model")
    missing = _register(app_client, admin_headers, pair["id"], method="ngram", target_ref=absent)
    assert missing.status_code == 422
    assert missing.json()["error"]["code"] == "missing_artifact"
    assert missing.json()["error"]["param"] == "target_ref"
    # Outside them: refused before the file system is looked at.
    outside = _register(
        app_client, admin_headers, pair["id"], method="ngram", target_ref="/nonexistent/model"
    )
    assert outside.status_code == 422
    assert outside.json()["error"]["code"] == "artifact_outside_model_roots"
    assert session.scalars(select(PairVersion)).all() == []


def test_retire_version_and_unknown_ids(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    pair = _pair(app_client, admin_headers)
    version = _register(
        app_client, admin_headers, pair["id"], method="ngram", target_ref=model_dirs["target"]
    ).json()
    before = current_snapshot_version(session)
    retired = app_client.post(
        f"/admin/v1/pairs/{pair['id']}/versions/{version['id']}/retire",
        json={"reason": "superseded"},
        headers=admin_headers,
    )
    assert retired.status_code == 200
    assert retired.json()["status"] == "retired"
    assert retired.json()["retired_at"] is not None
    assert current_snapshot_version(session) == before + 1
    audit = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "pair_version.retire")
    ).one()
    assert audit.reason == "superseded"
    assert audit.before is not None and audit.before["status"] == "active"
    assert audit.after is not None and audit.after["status"] == "retired"

    assert app_client.get("/admin/v1/pairs/424242", headers=admin_headers).status_code == 404
    missing_version = app_client.get(
        f"/admin/v1/pairs/{pair['id']}/versions/424242", headers=admin_headers
    )
    assert missing_version.status_code == 404
    assert missing_version.json()["error"]["code"] == "pair_version_not_found"
    has_versions = app_client.delete(
        f"/admin/v1/pairs/{pair['id']}", headers={**admin_headers, "If-Match": "*"}
    )
    assert has_versions.status_code == 409


def test_retiring_an_exposed_version_is_409(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rid = seeded["rollout"]["id"]
    assert app_client.post(
        f"/admin/v1/rollouts/{rid}/start", headers=admin_headers, json=WAIVE_ALL
    ).is_success
    pair_id, version_id = seeded["pair"]["id"], seeded["version"]["id"]
    response = app_client.post(
        f"/admin/v1/pairs/{pair_id}/versions/{version_id}/retire", headers=admin_headers
    )
    assert response.status_code == 409
    assert response.json()["error"]["details"]["rollouts"] == ["code-tiny"]


BUNDLED = Path(__file__).resolve().parents[3] / "engine" / "tiny_pair"


@pytest.mark.skipif(
    not (BUNDLED / "target" / "tokenizer.json").is_file(),
    reason="the bundled tiny pair has not been built in this checkout",
)
def test_the_bundled_tiny_pair_registers(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    pair = _pair(app_client, admin_headers, "bundled")
    response = _register(
        app_client,
        admin_headers,
        pair["id"],
        target_ref=str(BUNDLED / "target"),
        draft_ref=str(BUNDLED / "draft"),
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["target_digest"] != body["draft_digest"]


@pytest.mark.skipif(
    not (BUNDLED / "eagle" / "config.json").is_file(),
    reason="the bundled EAGLE head has not been built in this checkout",
)
def test_an_eagle_head_registers_against_its_target_and_a_foreign_one_is_refused(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    pair = _pair(app_client, admin_headers, "bundled-eagle")
    ok = _register(
        app_client,
        admin_headers,
        pair["id"],
        method="eagle",
        target_ref=str(BUNDLED / "target"),
        draft_ref=str(BUNDLED / "eagle"),
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["method"] == "eagle"
    assert ok.json()["draft_digest"] not in (None, ok.json()["target_digest"])
    # The draft LM is 128 wide: it cannot read the 256-wide target's features.
    foreign = _register(
        app_client,
        admin_headers,
        pair["id"],
        method="eagle",
        target_ref=str(BUNDLED / "target"),
        draft_ref=str(BUNDLED / "draft"),
    )
    assert foreign.status_code == 422, foreign.text
    error = foreign.json()["error"]
    assert error["code"] == "pair_incompatible"
    assert error["details"]["mismatch"] == "hidden_size"
