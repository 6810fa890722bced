"""A failed request is classified where the gateway sees it: a 4xx the engine relays
(the client's invalid request) is a client error, counted apart and never against the
arm; an engine fault, a 5xx, a timeout or a broken stream is an arm error.

On a real HTTP engine (a small FastAPI app answering like vLLM: its 400 body for an
invalid request, a 500, a stall) behind a real gateway; the telemetry windows, the
request records and the gateway's own /metrics are read back.
"""

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client.parser import text_string_to_metric_families

from control.stats.windows import combine_windows
from specwire import Arm, RequestRecordDoc, TelemetryWindow
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
INVALID, FAULT, STALL, BROKEN, OK = "invalid", "fault", "stall", "broken", "ok"
# vLLM 0.32's answer to n=2 at temperature 0 (its ErrorResponse shape).
VLLM_400 = {
    "error": {
        "message": "n must be 1 when using greedy sampling, got 2.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
# The gateway's request timeout, and the stall that outlasts it. NOTE: wide enough that
# the quick answers never meet it on a loaded 2-core machine (0.5 s did, once).
TIMEOUT_S, STALL_S = 2.0, 4.0
_CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'


def _engine() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        mode = body["messages"][0]["content"]
        if mode == INVALID:
            return JSONResponse(VLLM_400, status_code=400)
        if mode == FAULT:
            return JSONResponse({"error": {"message": "CUDA error", "code": 500}}, 500)
        if mode == STALL:
            await asyncio.sleep(STALL_S)
        if mode == BROKEN:

            async def events() -> Any:
                yield _CHUNK
                raise RuntimeError("engine died mid-stream")  # uvicorn drops the connection

            return StreamingResponse(events(), media_type="text/event-stream")
        if body.get("stream"):
            return Response(_CHUNK + b"data: [DONE]\n\n", media_type="text/event-stream")
        usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        return JSONResponse({"choices": [{"message": {"content": "hi"}}], "usage": usage})

    return app


@pytest.fixture()
def gateway(tmp_path: Any) -> Iterator[GatewayServer]:
    with serve_app(_engine()) as url:
        # Every request goes to the spec arm (rollout at full); the baseline pool has no
        # worker, so a request the spec pool fails cannot be served there either.
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[])
        with run_gateway(
            tmp_path, snapshot, request_timeout_s=TIMEOUT_S, breaker_failure_threshold=1000
        ) as gw:
            yield gw


def _post(gw: GatewayServer, mode: str, **extra: Any) -> httpx.Response:
    body = {"model": "tiny", "messages": [{"role": "user", "content": mode}], **extra}
    return httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=AUTH, timeout=10)


def _drain(
    gw: GatewayServer, requests: int
) -> tuple[list[TelemetryWindow], list[RequestRecordDoc]]:
    windows: list[TelemetryWindow] = []
    records: list[RequestRecordDoc] = []
    for _ in range(500):  # 10 s
        for batch in gw.state.aggregator.drain_all():
            windows += batch.windows
            records += batch.requests
        if sum(w.requests for w in windows) >= requests:
            return windows, records
        time.sleep(0.02)
    raise AssertionError("the gateway never recorded the requests")


def _metrics(gw: GatewayServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{gw.base_url}/metrics", timeout=10).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _requests_total(arm: str, outcome: str, status: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {
        "segment": "acme-chat",
        "arm": arm,
        "pair_version": "7",
        "outcome": outcome,
        "status": status,
    }
    return "specroute_gateway_requests_total", tuple(sorted(labels.items()))


def test_an_engine_400_is_a_client_error_and_faults_are_arm_errors(gateway: GatewayServer) -> None:
    gw = gateway
    invalid = _post(gw, INVALID, n=2, temperature=0)
    assert invalid.status_code == 400, invalid.text
    assert "n must be 1" in invalid.json()["error"]["message"]
    invalid_streamed = _post(gw, INVALID, n=2, temperature=0, stream=True)
    assert invalid_streamed.status_code == 400
    fault = _post(gw, FAULT)
    assert fault.status_code == 502, fault.text
    stall = _post(gw, STALL)
    assert stall.status_code == 504, stall.text
    broken = _post(gw, BROKEN, stream=True)
    assert broken.status_code == 200  # the status line left with the first event
    assert '"code": "stream_broken"' in broken.text
    assert _post(gw, OK).status_code == 200

    windows, records = _drain(gw, requests=6)
    assert sum(w.requests for w in windows) == 6
    assert sum(w.errors for w in windows) == 3  # fault, stall, broken
    assert sum(w.client_errors for w in windows) == 2  # the two 400s
    # The rollout's spec arm: the 400s, the stall, the broken stream and the success.
    # (The 500 moved on to the baseline pool, which had no worker: it ends there.)
    # NOTE: summed: the requests may straddle a window boundary.
    spec = combine_windows([w for w in windows if w.arm is Arm.SPEC and w.rollout_id is not None])
    assert (spec.requests, spec.errors, spec.client_errors) == (5, 2, 2)
    # A client error has no latency sample: e2e holds the 2 arm errors and the success.
    assert spec.e2e.total == 3
    assert spec.completion_tokens == 1

    by_outcome = sorted((r.arm, r.outcome, r.http_status, r.error_code) for r in records)
    assert by_outcome == [
        (Arm.BASELINE, "error", 502, "engine_error"),
        (Arm.SPEC, "client_error", 400, "upstream_rejected"),
        (Arm.SPEC, "client_error", 400, "upstream_rejected"),
        (Arm.SPEC, "error", 502, "stream_broken"),
        (Arm.SPEC, "error", 504, "upstream_timeout"),
        (Arm.SPEC, "ok", 200, None),
    ]

    samples = _metrics(gw)
    assert samples[_requests_total("spec", "client_error", "400")] == 2
    assert samples[_requests_total("spec", "error", "502")] == 1
    assert samples[_requests_total("spec", "error", "504")] == 1
    assert samples[_requests_total("spec", "ok", "200")] == 1
    assert samples[_requests_total("baseline", "error", "502")] == 1
    assert _requests_total("spec", "error", "400") not in samples
    e2e = ("specroute_gateway_e2e_seconds_count", (("arm", "spec"), ("segment", "acme-chat")))
    assert samples[e2e] == 3
