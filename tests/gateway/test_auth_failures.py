"""Failed API keys at the gateway: counted by reason and rate-limited per source
address with 429 + Retry-After (issue #21, item 4), on a real gateway (uvicorn on
loopback) serving a snapshot file."""

import re
from pathlib import Path

import httpx

from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import dead_url, run_gateway

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


def _failures(base_url: str) -> dict[str, float]:
    text = httpx.get(base_url + "/metrics").text
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(
            r'^specroute_gateway_auth_failures_total\{reason="([a-z_]+)"\} (\S+)$', text, re.M
        )
    }


def test_wrong_keys_are_counted_then_429_with_retry_after(tmp_path: Path) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    with run_gateway(
        tmp_path, snapshot, auth_failure_burst=3, auth_failure_refill_per_second=0.25
    ) as gw:
        assert _failures(gw.base_url) == {
            "missing_token": 0.0,
            "invalid_token": 0.0,
            "rate_limited": 0.0,
        }
        url = gw.base_url + "/v1/chat/completions"
        wrong = {"Authorization": "Bearer sk-sr-wrong"}
        statuses = [
            httpx.post(url, json=CHAT, headers=wrong).status_code,
            httpx.post(url, json=CHAT).status_code,
            httpx.get(gw.base_url + "/v1/models", headers=wrong).status_code,
        ]
        assert statuses == [401, 401, 401]
        limited = httpx.post(url, json=CHAT, headers=wrong)
        assert limited.status_code == 429
        assert limited.headers["Retry-After"] == "4"
        assert limited.json()["error"]["code"] == "auth_rate_limited"
        # The address as a whole waits, whatever key it sends now.
        good = httpx.get(
            gw.base_url + "/v1/models", headers={"Authorization": f"Bearer {TENANT_KEY}"}
        )
        assert good.status_code == 429
        assert _failures(gw.base_url) == {
            "missing_token": 1.0,
            "invalid_token": 2.0,
            "rate_limited": 2.0,
        }


def test_valid_keys_cost_nothing(tmp_path: Path) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    with run_gateway(tmp_path, snapshot, auth_failure_burst=1) as gw:
        auth = {"Authorization": f"Bearer {TENANT_KEY}"}
        for _ in range(25):
            assert httpx.get(gw.base_url + "/v1/models", headers=auth).status_code == 200
        assert httpx.get(gw.base_url + "/v1/models").status_code == 401
        assert httpx.get(gw.base_url + "/v1/models").status_code == 429
