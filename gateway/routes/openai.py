"""The OpenAI-compatible surface: chat completions, completions, models."""

import logging
import time
from typing import Any, Literal, cast

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from control.contract import TenantSpec
from gateway.decision.decide import DecisionInput, Override, decide
from gateway.decision.features import request_features, sampling_summary
from gateway.errors import (
    GatewayError,
    PermissionDenied,
    QuotaExceeded,
    RequestValidationFailed,
    ServiceUnavailable,
    UpstreamClientError,
)
from gateway.proxy.accounting import Accounting
from gateway.proxy.intake import authenticate, engine_body, read_json, request_id_of, validate
from gateway.proxy.relay import relay_json, relay_stream
from gateway.proxy.schemas import ChatCompletionBody, CompletionBody, SamplingParams
from gateway.proxy.upstream import open_upstream
from gateway.quota.guarded import QuotaStoreUnavailable
from gateway.quota.limiter import PROMPT_BYTES_PER_TOKEN, Reservation, admission_estimate
from gateway.state import GatewayState
from gateway.telemetry.record import RequestFacts

log = logging.getLogger(__name__)
router = APIRouter()

OVERRIDE_HEADER = "x-specroute-speculation"
TASK_HEADER = "x-specroute-task"
SESSION_HEADER = "x-specroute-session"

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": desc}
    for code, desc in {
        400: "Malformed JSON",
        401: "Missing or invalid API key",
        403: "Model or override header not allowed for this key",
        404: "Unknown model",
        413: "Body too large",
        422: "Invalid parameter type or value",
        429: "Tenant quota exhausted (Retry-After)",
        502: "Engine failure",
        503: "No healthy engine / no snapshot",
        504: "Engine timeout",
    }.items()
}


def gateway_state(request: Request) -> GatewayState:
    return cast(GatewayState, request.app.state.gateway)


def _override(request: Request) -> Override | None:
    value = request.headers.get(OVERRIDE_HEADER)
    if value is None:
        return None
    value = value.strip().lower()
    if value not in ("on", "off"):
        raise RequestValidationFailed(
            f"{OVERRIDE_HEADER} must be 'on' or 'off'", param=OVERRIDE_HEADER
        )
    return cast(Literal["on", "off"], value)


def _check_model_allowed(tenant: TenantSpec, model: str) -> None:
    if tenant.allowed_models is not None and model not in tenant.allowed_models:
        raise PermissionDenied(
            f"This key may not use the model '{model}'", code="model_not_allowed", param="model"
        )


async def _handle(request: Request, schema: type[SamplingParams], path: str) -> Response:
    started = time.monotonic()  # TTFT and e2e count from arrival, body reading included
    received_at = time.time()
    state = gateway_state(request)
    request_id = request_id_of(request)
    tenant = authenticate(request, state.store)
    received = await read_json(request, state.settings.max_body_bytes)
    body = validate(schema, received.doc)
    _check_model_allowed(tenant, body.model)
    snapshot = state.store.snapshot
    assert snapshot is not None  # authenticate() checked readiness
    features = request_features(
        body, tenant=tenant.name, task=request.headers.get(TASK_HEADER), snapshot=snapshot
    )
    decision = decide(
        DecisionInput(
            snapshot=snapshot,
            snapshot_age_s=state.store.age_s(),
            tenant=tenant,
            features=features,
            body=body,
            cohort_key=body.user or request.headers.get(SESSION_HEADER) or request_id,
            override=_override(request),
            request_id=request_id,
        )
    )
    request.state.decision_header = decision.header()
    facts = RequestFacts(
        tenant_id=tenant.id,
        endpoint="chat" if path.endswith("/chat/completions") else "completions",
        stream=body.stream,
        model=features.model,
        adapter=features.adapter,
        sampling=sampling_summary(body),
        received_at=received_at,
        sample_rate=tenant.request_sample_rate,
    )
    acct = Accounting(
        state,
        request_id,
        tenant,
        snapshot.quota_weights,
        started=started,
        decision=decision,
        facts=facts,
    )
    max_tokens = getattr(body, "max_completion_tokens", None) or body.max_tokens
    acct.prompt_estimate = -(-len(received.raw) // PROMPT_BYTES_PER_TOKEN)
    try:
        acct.reservation = await _admit(
            state,
            tenant,
            admission_estimate(
                prompt_bytes=len(received.raw),
                max_tokens=max_tokens,
                weights=snapshot.quota_weights,
            ),
        )
        opened = await open_upstream(
            client=state.engine,
            balancer=state.balancer,
            decision=decision,
            path=path,
            body=engine_body(received, stream=body.stream),
            request_id=request_id,
            header_timeout_s=(
                state.settings.first_token_timeout_s
                if body.stream
                else state.settings.request_timeout_s
            ),
            on_fallback=acct.route,
        )
    except GatewayError as exc:
        # Accounted under the arm last tried: after a fallback, that is the other one.
        routed = acct.decision or decision
        state.metrics.observe_decision(str(routed.reason), routed.arm)
        # NOTE: an engine refusal's code is the engine's text: the record keeps ours.
        code = exc.default_code if isinstance(exc, UpstreamClientError) else exc.code
        await acct.fail(exc.status_code, code)
        raise
    acct.dispatched(opened.decision, opened.lease)
    # Shadow: the copy goes out only once the caller's own request is with an engine.
    state.shadow.maybe_mirror(
        state, opened.decision, path=path, doc=received.doc, request_id=request_id, tenant=tenant
    )
    request.state.decision_header = opened.decision.header()
    state.metrics.observe_decision(str(opened.decision.reason), opened.decision.arm)
    headers = {"x-request-id": request_id, "x-specroute-decision": opened.decision.header()}
    if body.stream:
        keep_usage = bool(body.stream_options and body.stream_options.include_usage)
        return await relay_stream(
            opened,
            request,
            keep_usage=keep_usage,
            started=acct.started,
            first_token_timeout_s=state.settings.first_token_timeout_s,
            idle_timeout_s=state.settings.idle_timeout_s,
            hold_headers=state.settings.hold_stream_headers,
            headers=headers,
            finish=acct.finish,
        )
    return await relay_json(
        opened,
        request,
        timeout_s=state.settings.request_timeout_s,
        headers=headers,
        finish=acct.finish,
    )


async def _admit(state: GatewayState, tenant: TenantSpec, estimate: float) -> Reservation | None:
    """Admit the request and book its estimated cost (None: nothing booked)."""
    if tenant.quota.weighted_tokens_per_minute is None:
        return None
    try:
        verdict = await state.quota.admit(tenant, reserve=estimate)
    except QuotaStoreUnavailable as exc:
        raise ServiceUnavailable(
            "The quota store is unavailable and this gateway fails closed",
            code="quota_unavailable",
            headers={"Retry-After": str(max(1, int(-(-exc.retry_after_s // 1))))},
        ) from None
    except Exception as exc:
        # NOTE: fail open: a quota store outage must not take the front door down.
        log.warning("quota admission unavailable: %s", type(exc).__name__)
        return None
    if not verdict.allowed:
        state.metrics.observe_quota_rejection(tenant.name)
        raise QuotaExceeded(
            f"Tenant quota exhausted ({verdict.used:.0f} of {verdict.limit} weighted tokens/min)",
            retry_after_s=verdict.retry_after_s,
        )
    return verdict.reservation


def _body_doc(schema: type[SamplingParams]) -> dict[str, Any]:
    """The body schema for the OpenAPI document; parsing stays manual (400 vs 422, size cap)."""
    doc = schema.model_json_schema()
    defs = doc.pop("$defs", {})

    def inline(node: Any) -> Any:
        # "#/$defs/X" would resolve against the OpenAPI document root; our models nest
        # without cycles, so the definitions are simply inlined.
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": inline(doc)}},
        }
    }


@router.post("/v1/chat/completions", responses=_ERRORS, openapi_extra=_body_doc(ChatCompletionBody))
async def chat_completions(request: Request) -> Response:
    return await _handle(request, ChatCompletionBody, "/v1/chat/completions")


@router.post("/v1/completions", responses=_ERRORS, openapi_extra=_body_doc(CompletionBody))
async def completions(request: Request) -> Response:
    return await _handle(request, CompletionBody, "/v1/completions")


@router.get("/v1/models", responses={401: _ERRORS[401], 503: _ERRORS[503]})
async def list_models(request: Request) -> JSONResponse:
    state = gateway_state(request)
    request_id_of(request)
    tenant = authenticate(request, state.store)
    snapshot = state.store.snapshot
    assert snapshot is not None
    created = int(snapshot.generated_at.timestamp())
    names = sorted({n for p in snapshot.pools for n in (p.served_model_name, *p.adapters)})
    if tenant.allowed_models is not None:
        names = [n for n in names if n in tenant.allowed_models]
    data = [
        {"id": n, "object": "model", "created": created, "owned_by": "specroute"} for n in names
    ]
    return JSONResponse(
        {"object": "list", "data": data}, headers={"x-request-id": request.state.request_id}
    )
