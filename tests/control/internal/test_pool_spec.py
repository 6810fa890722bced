"""GET /internal/v1/pools/{id}/spec and /pools/by-name/{name}/spec."""

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from specwire import PoolSpec
from tests.control.internal.factories import build_world
from tests.fixtures.db import AgentHeaders


def test_spec_pool_carries_the_speculative_config_of_its_pair_version(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()

    by_id = app_client.get(
        f"/internal/v1/pools/{world.spec_pool.id}/spec", headers=agent_headers(world.spec_pool.id)
    )
    by_name = app_client.get(
        "/internal/v1/pools/by-name/tiny-spec/spec", headers=agent_headers(world.spec_pool.id)
    )

    assert by_id.status_code == 200 and by_name.status_code == 200
    assert by_id.json() == by_name.json()
    spec = PoolSpec.model_validate(by_id.json())
    assert (spec.id, spec.name, spec.served_model_name) == (world.spec_pool.id, "tiny-spec", "tiny")
    assert spec.target_ref == "/models/tiny-target"
    assert spec.engine_args == {"max-model-len": 512, "enforce-eager": True}
    assert spec.desired_workers == 2
    assert spec.speculative_config is not None
    assert spec.speculative_config.to_vllm() == {
        "method": "draft_model",
        "model": "/models/tiny-draft",
        "num_speculative_tokens": 3,
        "draft_sample_method": "probabilistic",
    }
    assert spec.pair_version is not None
    assert (spec.pair_version.id, spec.pair_version.label) == (
        world.pair_version.id,
        "tiny-code-v3",
    )


def test_baseline_pool_has_no_speculation(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()
    resp = app_client.get(
        f"/internal/v1/pools/{world.baseline_pool.id}/spec",
        headers=agent_headers(world.baseline_pool.id),
    )
    spec = PoolSpec.model_validate(resp.json())
    assert (spec.name, spec.pair_version, spec.speculative_config) == ("tiny-base", None, None)
    assert (spec.engine_args, spec.desired_workers) == ({}, 1)


def test_unknown_pool_is_the_same_403_as_another_agents_pool(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    """No existence oracle: an agent learns nothing about pools it is not enrolled for."""
    world = build_world(session)
    session.commit()
    headers = agent_headers(world.spec_pool.id)
    answers = []
    for path in (
        "/internal/v1/pools/424242/spec",
        f"/internal/v1/pools/{world.baseline_pool.id}/spec",
        "/internal/v1/pools/by-name/nope/spec",
        f"/internal/v1/pools/by-name/{world.baseline_pool.name}/spec",
    ):
        resp = app_client.get(path, headers=headers)
        answers.append((resp.status_code, resp.json()))
    assert answers[0][0] == 403
    assert answers[0][1]["error"]["code"] == "pool_not_enrolled"
    assert all(answer == answers[0] for answer in answers), answers
    # An enrolment for a pool that does not exist is enrolled for nothing.
    ghost = app_client.get("/internal/v1/pools/424242/spec", headers=agent_headers(424242))
    assert ghost.status_code == 403
    bad_id = app_client.get("/internal/v1/pools/abc/spec", headers=agent_headers(424242))
    assert bad_id.status_code == 422
