"""The gateway's /metrics behind an optional token, tenant labels optionally hashed,
/docs and /openapi.json switchable off (issue #21, item 5); a real gateway on
loopback serving a snapshot file."""

import hashlib
from pathlib import Path

import httpx

from gateway.metrics import GatewayMetrics
from tests.gateway.policy import make_snapshot
from tests.gateway.server import dead_url, run_gateway


def test_metrics_token_and_docs_switch(tmp_path: Path) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    with run_gateway(tmp_path / "a", snapshot, metrics_token="scrape-me", docs_enabled=False) as gw:
        assert httpx.get(gw.base_url + "/metrics").status_code == 401
        wrong = httpx.get(gw.base_url + "/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_token"
        ok = httpx.get(gw.base_url + "/metrics", headers={"Authorization": "Bearer scrape-me"})
        assert ok.status_code == 200 and "specroute_gateway_requests_total" in ok.text
        assert [httpx.get(gw.base_url + p).status_code for p in ("/docs", "/openapi.json")] == [
            404,
            404,
        ]
    with run_gateway(tmp_path / "b", snapshot) as gw:
        assert httpx.get(gw.base_url + "/metrics").status_code == 200
        assert httpx.get(gw.base_url + "/openapi.json").status_code == 200


def test_tenant_labels_can_be_hashed_and_stay_bounded() -> None:
    hashed = GatewayMetrics(top_k_segments=2, hash_tenants=True)
    for i in range(50):
        hashed.observe_quota_rejection(f"tenant-{i}")
    text = hashed.render()[0].decode()
    assert "tenant-" not in text
    # The first tenants take the free slots: their series carry the digest.
    digest = "t-" + hashlib.sha256(b"tenant-0").hexdigest()[:12]
    lines = [line for line in text.splitlines() if line.startswith("specroute_gateway_quota_rej")]
    labels = {line.split('tenant="')[1].split('"')[0] for line in lines if 'tenant="' in line}
    assert len(labels) <= 3 and digest in labels  # top 2 plus other
    plain = GatewayMetrics(top_k_segments=2)
    plain.observe_quota_rejection("tenant-49")
    assert 'tenant="tenant-49"' in plain.render()[0].decode()
