"""Schemathesis over the internal API: no generated request yields a 5xx, and every
error has the one typed body. Bounded so it stays well under a minute per backend."""

import json
from typing import Any

import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from tests.control.internal.factories import build_world
from tests.fixtures.db import AgentHeaders

EXAMPLES_PER_OPERATION = 40


def test_no_server_errors_on_internal_api(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    # Real rows, so generated ids sometimes hit an existing pool instead of always 404.
    world = build_world(session)
    session.commit()
    agent = agent_headers(world.spec_pool.id)
    app = app_client.app
    assert isinstance(app, FastAPI)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [
        operation
        for operation in (result.ok() for result in schema.get_all_operations())  # type: ignore[union-attr]
        if operation.path.startswith("/internal/v1")
    ]
    assert len(operations) == 5
    failures: list[str] = []
    statuses: set[int] = set()

    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(), with_auth=st.booleans())
        def check(case: Any, with_auth: bool) -> None:
            # Each route with the principal it is for: the agent's routes with an agent
            # enrolled for the world's spec pool, the gateway's with the gateway token.
            principal = (
                agent if "/workers/" in case.path or "/pools/" in case.path else (internal_headers)
            )
            headers = {**(case.headers or {}), **(principal if with_auth else {})}
            response = case.call(headers=headers)
            statuses.add(response.status_code)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:300]}"
                )
            elif response.status_code >= 400:
                body = json.loads(response.content)
                assert set(body) == {"error"}, response.text
                assert {"message", "type", "code"} <= set(body["error"]), response.text

        check()

    assert failures == []
    # The run reached past auth and validation, not only 401s and 422s.
    # (An agent asking for another pool, existing or not, is 403: no existence oracle.)
    assert {200, 401, 403, 422} <= statuses
