"""PATCH /admin/v1/rollouts/{id} depth_ladder: validation, storage, and the snapshot."""

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import AuditEvent
from specwire import PolicySnapshot
from tests.control.conftest import created, write_model_dir


def _sibling_pool(
    client: TestClient,
    headers: dict[str, str],
    seeded: dict[str, Any],
    *,
    k: int,
    draft_sample_method: str = "greedy",
    name: str | None = None,
    pair_id: int | None = None,
    **version_fields: Any,
) -> dict[str, Any]:
    """A pool on a new version of the seeded pair (or of `pair_id`) at depth `k`, the
    seeded version's fields unless `version_fields` says otherwise."""
    own = seeded["version"]
    version = created(
        client.post(
            f"/admin/v1/pairs/{pair_id or seeded['pair']['id']}/versions",
            json={
                "method": own["method"],
                "target_ref": own["target_ref"],
                "draft_ref": own["draft_ref"],
                "num_speculative_tokens": k,
                "draft_sample_method": draft_sample_method,
                **version_fields,
            },
            headers=headers,
        )
    )
    return created(
        client.post(
            "/admin/v1/pools",
            json={
                "name": name or f"tiny-k{k}",
                "served_model_name": "tiny",
                "target_ref": seeded["spec_pool"]["target_ref"],
                "pair_version_id": version["id"],
            },
            headers=headers,
        )
    )


def _patch(client: TestClient, headers: dict[str, str], rollout_id: int, ladder: Any) -> Any:
    current = client.get(f"/admin/v1/rollouts/{rollout_id}", headers=headers)
    return client.patch(
        f"/admin/v1/rollouts/{rollout_id}",
        json={"depth_ladder": ladder},
        headers={**headers, "If-Match": current.headers["etag"]},
    )


def test_a_ladder_is_stored_and_compiled_into_the_snapshot(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    seeded: dict[str, Any],
) -> None:
    k5 = _sibling_pool(app_client, admin_headers, seeded, k=5)
    k2 = _sibling_pool(app_client, admin_headers, seeded, k=2)
    rollout_id = seeded["rollout"]["id"]
    ladder = {
        "rungs": [
            {"pool_id": k5["id"], "max_load": 2.0},
            {"pool_id": seeded["spec_pool"]["id"], "max_load": 6.0},
            {"pool_id": k2["id"]},
        ],
        "hysteresis": 0.5,
        "min_dwell_s": 10,
        "load_smoothing_s": 1.5,
    }
    resp = _patch(app_client, admin_headers, rollout_id, ladder)
    assert resp.status_code == 200, resp.text
    stored = resp.json()["depth_ladder"]
    assert [r["num_speculative_tokens"] for r in stored["rungs"]] == [5, 3, 2]

    snap = PolicySnapshot.model_validate_json(
        app_client.get("/internal/v1/snapshot", headers=internal_headers).content
    )
    spec = next(r for r in snap.rollouts if r.id == rollout_id)
    assert spec.depth_ladder is not None
    assert [(r.pool_id, r.num_speculative_tokens, r.max_load) for r in spec.depth_ladder.rungs] == [
        (k5["id"], 5, 2.0),
        (seeded["spec_pool"]["id"], 3, 6.0),
        (k2["id"], 2, None),
    ]
    assert spec.depth_ladder.min_dwell_s == 10.0
    assert spec.depth_ladder.load_smoothing_s == 1.5

    cleared = _patch(app_client, admin_headers, rollout_id, None)
    assert cleared.status_code == 200 and cleared.json()["depth_ladder"] is None


def test_bad_ladders_are_typed_422s(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rollout_id = seeded["rollout"]["id"]
    own = seeded["spec_pool"]["id"]
    k5 = _sibling_pool(app_client, admin_headers, seeded, k=5)
    other = _sibling_pool(
        app_client, admin_headers, seeded, k=2, draft_sample_method="probabilistic", name="odd"
    )
    k2 = _sibling_pool(app_client, admin_headers, seeded, k=2)

    def code(rungs: list[dict[str, Any]]) -> tuple[int, str, Any]:
        resp = _patch(app_client, admin_headers, rollout_id, {"rungs": rungs})
        err = resp.json()["error"]
        return resp.status_code, err["code"], err.get("param")

    # differs in more than k
    status, c, _ = code([{"pool_id": own, "max_load": 4}, {"pool_id": other["id"]}])
    assert (status, c) == (422, "depth_ladder_invalid")
    # a baseline pool
    status, c, _ = code(
        [{"pool_id": own, "max_load": 4}, {"pool_id": seeded["baseline_pool"]["id"]}]
    )
    assert (status, c) == (422, "depth_ladder_invalid")
    # not deepest first
    status, c, _ = code([{"pool_id": k2["id"], "max_load": 4}, {"pool_id": own}])
    assert (status, c) == (422, "depth_ladder_invalid")
    # without the rollout's own pool
    status, c, _ = code([{"pool_id": k5["id"], "max_load": 4}, {"pool_id": k2["id"]}])
    assert (status, c) == (422, "depth_ladder_invalid")
    # bounds not increasing, or the last one bounded: schema errors
    status, _, _ = code(
        [
            {"pool_id": k5["id"], "max_load": 4},
            {"pool_id": own, "max_load": 3},
            {"pool_id": k2["id"]},
        ]
    )
    assert status == 422
    status, _, _ = code([{"pool_id": own, "max_load": 4}, {"pool_id": k2["id"], "max_load": 8}])
    assert status == 422
    # a pool that does not exist
    status, c, _ = code([{"pool_id": own, "max_load": 4}, {"pool_id": 999_999}])
    assert status == 422
    after = app_client.get(f"/admin/v1/rollouts/{rollout_id}", headers=admin_headers).json()
    assert after["depth_ladder"] is None


def _rollout_audits(session: Session, rollout_id: int) -> int:
    count = session.scalar(
        select(func.count())
        .select_from(AuditEvent)
        .where(AuditEvent.entity_type == "rollout", AuditEvent.entity_id == str(rollout_id))
    )
    return int(count or 0)


def test_a_good_ladder_is_stored_once_and_audited(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rollout_id = seeded["rollout"]["id"]
    k5 = _sibling_pool(app_client, admin_headers, seeded, k=5)
    audits = _rollout_audits(session, rollout_id)
    before = app_client.get(f"/admin/v1/rollouts/{rollout_id}", headers=admin_headers)
    resp = _patch(
        app_client,
        admin_headers,
        rollout_id,
        {"rungs": [{"pool_id": k5["id"], "max_load": 3}, {"pool_id": seeded["spec_pool"]["id"]}]},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["version"] == before.json()["version"] + 1
    assert [r["pool_id"] for r in resp.json()["depth_ladder"]["rungs"]] == [
        k5["id"],
        seeded["spec_pool"]["id"],
    ]
    assert _rollout_audits(session, rollout_id) == audits + 1
    audit = session.scalars(
        select(AuditEvent)
        .where(AuditEvent.entity_type == "rollout", AuditEvent.entity_id == str(rollout_id))
        .order_by(AuditEvent.id.desc())
    ).first()
    assert audit is not None and audit.before is not None and audit.after is not None
    assert audit.before["depth_ladder"] is None
    assert audit.after["depth_ladder"] == resp.json()["depth_ladder"]


@pytest.mark.parametrize(
    ("other", "fields"),
    [
        ("pair", ["pair_id"]),
        ("draft", ["draft_ref", "draft_digest"]),
        ("engine", ["engine_version"]),
    ],
)
def test_a_rung_serving_another_pair_is_refused_and_nothing_changes(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    session: Session,
    tmp_path: Path,
    other: str,
    fields: list[str],
) -> None:
    """A rung pool on a twin pair (same directories, another pair), on another draft
    (same tokenizer and vocabulary, other weights) or on another engine version: a
    typed 422 naming the rung and the fields, and the rollout untouched (no new
    version, no ladder, no audit record)."""
    rollout_id = seeded["rollout"]["id"]
    if other == "pair":
        twin = created(
            app_client.post("/admin/v1/pairs", json={"name": "tiny-twin"}, headers=admin_headers)
        )
        rung = _sibling_pool(
            app_client, admin_headers, seeded, k=5, name="twin-k5", pair_id=twin["id"]
        )
    elif other == "draft":
        draft = write_model_dir(tmp_path / "draft-b")
        rung = _sibling_pool(
            app_client, admin_headers, seeded, k=5, name="draft-b-k5", draft_ref=str(draft)
        )
    else:
        rung = _sibling_pool(
            app_client, admin_headers, seeded, k=5, name="next-k5", engine_version="vllm 0.33.0"
        )
    audits = _rollout_audits(session, rollout_id)
    before = app_client.get(f"/admin/v1/rollouts/{rollout_id}", headers=admin_headers)

    resp = _patch(
        app_client,
        admin_headers,
        rollout_id,
        {"rungs": [{"pool_id": rung["id"], "max_load": 3}, {"pool_id": seeded["spec_pool"]["id"]}]},
    )

    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "depth_ladder_invalid"
    assert error["param"] == "depth_ladder.rungs[0].pool_id"
    assert error["details"]["fields"] == fields
    assert error["message"].endswith("in more than k: " + ", ".join(fields))
    if other == "pair":
        assert "of pair 'tiny-twin', not 'tiny'" in error["message"]
    after = app_client.get(f"/admin/v1/rollouts/{rollout_id}", headers=admin_headers)
    assert after.headers["etag"] == before.headers["etag"]
    assert after.json() == before.json()
    assert after.json()["depth_ladder"] is None
    assert _rollout_audits(session, rollout_id) == audits
