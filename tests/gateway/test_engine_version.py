"""A pair version validated on one engine version is not served by spec workers that
report another: the request goes to the baseline pool with a typed reason."""

from pathlib import Path

import httpx

from engine.fake import FakeUpstream
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app


def test_engine_version_mismatch_is_refused_from_the_spec_arm(tmp_path: Path) -> None:
    spec_engine, base_engine = FakeUpstream(2, 0.001, "tiny"), FakeUpstream(2, 0.001, "tiny")
    with (
        serve_app(spec_engine) as spec_url,
        serve_app(base_engine) as base_url,
    ):
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        auth = {"Authorization": f"Bearer {TENANT_KEY}"}
        decisions = {}
        for label, versions in (("match", ["0.32.0"]), ("mismatch", ["0.33.0"])):
            snapshot = make_snapshot(
                spec_urls=[spec_url],
                baseline_urls=[base_url],
                pair_engine_version="0.32.0",
                spec_engine_versions=versions,  # type: ignore[arg-type]
            )
            with run_gateway(tmp_path / label, snapshot) as gw:
                response = httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=auth)
                assert response.status_code == 200, response.text
                decisions[label] = response.headers["x-specroute-decision"]
    assert decisions["match"].startswith("arm=spec")
    assert decisions["mismatch"] == "arm=baseline; reason=engine_version_mismatch"
