"""Failed authentication on control: counted by reason and rate-limited per source
address with 429 + Retry-After (issue #21, item 4)."""

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from control.settings import ControlSettings
from tests.fixtures.db import TransactionBoundDatabase, _client


def _failures(client: TestClient) -> dict[str, float]:
    text = client.get("/metrics").text
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(
            r'^specroute_control_auth_failures_total\{reason="([a-z_]+)"\} (\S+)$', text, re.M
        )
    }


def test_failures_are_counted_and_an_address_that_fails_too_often_gets_429(
    control_app: FastAPI,
    control_settings: ControlSettings,
    bound_database: TransactionBoundDatabase,
    admin_headers: dict[str, str],
) -> None:
    settings = control_settings.model_copy(
        update={"auth_failure_burst": 3, "auth_failure_refill_per_second": 0.1}
    )
    with _client(control_app, settings, bound_database) as client:
        before = _failures(client)
        assert set(before) == {"missing_token", "invalid_token", "rate_limited"}
        wrong = {"Authorization": "Bearer sr-admin-nope"}
        statuses = [
            client.get("/admin/v1/pools", headers=wrong).status_code,
            client.post("/admin/v1/pools", content=b"{", headers=wrong).status_code,
            client.get("/internal/v1/snapshot").status_code,
        ]
        assert statuses == [401, 401, 401]
        limited = client.get("/admin/v1/pools", headers=wrong)
        assert limited.status_code == 429
        assert limited.headers["Retry-After"] == "10"
        assert limited.json()["error"]["code"] == "auth_rate_limited"
        # The address is held back as a whole: its credential is not even looked up.
        assert client.get("/admin/v1/pools", headers=admin_headers).status_code == 429
        after = _failures(client)
    delta = {reason: after[reason] - before[reason] for reason in after}
    assert delta == {"missing_token": 1.0, "invalid_token": 2.0, "rate_limited": 2.0}


def test_successful_requests_cost_nothing(
    control_app: FastAPI,
    control_settings: ControlSettings,
    bound_database: TransactionBoundDatabase,
    admin_headers: dict[str, str],
) -> None:
    settings = control_settings.model_copy(update={"auth_failure_burst": 1})
    with _client(control_app, settings, bound_database) as client:
        for _ in range(30):
            assert client.get("/admin/v1/pools", headers=admin_headers).status_code == 200
        assert client.get("/admin/v1/pools").status_code == 401
        assert client.get("/admin/v1/pools").status_code == 429
