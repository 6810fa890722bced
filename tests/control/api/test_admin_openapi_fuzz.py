"""Schemathesis over the admin OpenAPI: no generated request yields a 5xx.

Bounded (a few examples per operation, no shrinking database) so the run
stays well under two minutes per backend on a loaded machine.
"""

import json
from typing import Any

import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.core.result import Ok

EXAMPLES_PER_OPERATION = 10


def test_no_server_errors_on_admin_api(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    app = app_client.app
    assert isinstance(app, FastAPI)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = []
    for result in schema.get_all_operations():
        # An operation schemathesis cannot parse is itself a defect in our OpenAPI.
        assert isinstance(result, Ok), result.err()
        if result.ok().path.startswith("/admin/v1"):
            operations.append(result.ok())
    assert len(operations) >= 25
    failures: list[str] = []
    calls = 0

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
            nonlocal calls
            calls += 1
            headers = {**(case.headers or {}), **(admin_headers if with_auth else {})}
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:300]}"
                )
            elif response.status_code >= 400:
                # Every error, whatever produced it, has the one typed body.
                body = json.loads(response.content)
                assert set(body) == {"error"}, response.text
                assert {"message", "type", "code"} <= set(body["error"]), response.text

        check()

    assert calls >= len(operations) * 2
    assert failures == []
