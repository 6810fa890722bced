"""The request path's steps one at a time (gateway.pipeline), on real loopback sockets.

The routes' end-to-end behaviour is covered by the other gateway tests; these
check that each step does its one job when called on its own.
"""

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from gateway import pipeline
from gateway.app import build_state
from gateway.decision.features import request_features
from gateway.decision.reasons import DecisionReason as R
from gateway.errors import GatewayError
from gateway.proxy.engine_http import EngineClient
from gateway.proxy.intake import JSONBody
from gateway.proxy.schemas import ChatCompletionBody
from gateway.settings import GatewaySettings
from gateway.state import GatewayState
from specwire import Arm, PolicySnapshot
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import dead_url, serve_app

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    # A real HTTP peer answering like an engine (non-streamed), to be routed to.
    engine = FastAPI()

    @engine.post("/v1/chat/completions")
    def answer() -> JSONResponse:
        return JSONResponse({"choices": [{"message": {"content": "hi"}}]})

    with serve_app(engine) as url:
        yield url


@asynccontextmanager
async def _state(tmp_path: Path, snapshot: PolicySnapshot) -> AsyncIterator[GatewayState]:
    state = build_state(GatewaySettings(snapshot_file=tmp_path / "s.json", gateway_id="t"))
    state.store.replace(snapshot, etag=None, confirmed=True)
    state.engine_client = EngineClient(connect_timeout_s=2.0)
    try:
        yield state
    finally:
        await state.engine.close()
        await state.control_client.aclose()


def _arrival(state: GatewayState) -> pipeline.Arrival:
    snapshot = state.store.snapshot
    tenant = state.store.tenant_for_key(TENANT_KEY)
    assert snapshot is not None and tenant is not None
    raw = json.dumps(CHAT).encode()
    body = ChatCompletionBody.model_validate(CHAT)
    return pipeline.Arrival(
        request_id="req-1",
        path="/v1/chat/completions",
        tenant=tenant,
        snapshot=snapshot,
        received=JSONBody(raw, dict(CHAT)),
        body=body,
        features=request_features(body, tenant=tenant.name, task=None, snapshot=snapshot),
        cohort_key="req-1",
        override=None,
        started=0.0,
        received_at=0.0,
    )


async def test_route_falls_back_to_the_baseline_pool_before_the_first_byte(
    tmp_path: Path, engine_url: str
) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[engine_url])
    async with _state(tmp_path, snapshot) as state:
        arrival = _arrival(state)
        decision = pipeline.decide_arm(state, arrival)
        assert decision.arm is Arm.SPEC
        acct = pipeline.account(state, arrival, decision)
        opened = await pipeline.route(state, arrival, decision, acct)
        try:
            assert (opened.decision.arm, opened.decision.reason) == (
                Arm.BASELINE,
                R.POOL_UNAVAILABLE,
            )
            assert acct.decision is opened.decision  # accounted under the arm it went to
            assert opened.response.status == 200
            assert json.loads(await opened.response.read())["choices"][0]["message"] == {
                "content": "hi"
            }
        finally:
            opened.response.release()
            opened.lease.release()


async def test_route_with_both_pools_down_names_the_last_decision_tried(tmp_path: Path) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    async with _state(tmp_path, snapshot) as state:
        arrival = _arrival(state)
        decision = pipeline.decide_arm(state, arrival)
        acct = pipeline.account(state, arrival, decision)
        with pytest.raises(GatewayError) as raised:
            await pipeline.route(state, arrival, decision, acct)
        assert raised.value.status_code == 503 and raised.value.code == "engine_unreachable"
        header = raised.value.headers["x-specroute-decision"]
        assert header == "arm=baseline; reason=pool_unavailable"
        assert acct.decision is not None and acct.decision.arm is Arm.BASELINE


async def test_admit_books_nothing_for_a_tenant_without_a_quota(
    tmp_path: Path, engine_url: str
) -> None:
    snapshot = make_snapshot(spec_urls=[engine_url], baseline_urls=[engine_url])
    async with _state(tmp_path, snapshot) as state:
        arrival = _arrival(state)
        assert arrival.tenant.quota.weighted_tokens_per_minute is None
        assert await pipeline.admit(state, arrival) is None
