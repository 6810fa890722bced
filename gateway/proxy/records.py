"""A finished engine request as a RequestRecord, for the caller's accounting and the shadow.

Both fill the record the same way from what the relay learned (usage, speculative
counters, first token) and where the request ran; they differ only in the arm,
reason and rollout they report and in the per-request facts they attach. A request
refused before routing gets a bare record (`refusal_record`): who, when, the typed
error; nothing it sent.
"""

import time
from datetime import UTC, datetime

from gateway.decision.decide import Decision
from gateway.proxy.relay import RelayResult
from gateway.routing.balancer import Lease
from gateway.telemetry.record import RequestFacts, RequestRecord, Routing
from specwire import NOT_ROUTED, Arm, RequestRecordDoc, TenantSpec, failure_outcome
from specwire.requests import Endpoint


def request_record(
    result: RelayResult,
    *,
    request_id: str,
    tenant: str,
    decision: Decision,
    lease: Lease | None,
    started: float,
    arm: Arm,
    reason: str,
    rollout_id: int | None,
    facts: RequestFacts | None = None,
    routing: Routing | None = None,
) -> RequestRecord:
    """The record of a request that started at `started` (time.monotonic()) and ends now."""
    e2e_ms = (time.monotonic() - started) * 1000.0
    ttft_ms = (
        (result.first_token_at - started) * 1000.0 if result.first_token_at is not None else None
    )
    prompt = result.usage.prompt_tokens if result.usage else 0
    completion = result.usage.completion_tokens if result.usage else 0
    tpot_ms = (
        (e2e_ms - ttft_ms) / (completion - 1) if ttft_ms is not None and completion > 1 else None
    )
    segment = decision.segment
    return RequestRecord(
        request_id=request_id,
        tenant=tenant,
        segment_id=segment.id if segment else None,
        segment_name=segment.name if segment else None,
        arm=arm,
        pair_version_id=decision.pair_version_id,
        rollout_id=rollout_id,
        reason=reason,
        outcome=result.outcome,
        http_status=result.http_status,
        prompt_tokens=prompt,
        completion_tokens=completion,
        drafts=result.spec.drafts,
        drafted_tokens=result.spec.drafted_tokens,
        accepted_tokens=result.spec.accepted_tokens,
        accepted_per_position=result.spec.accepted_per_position,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        e2e_ms=e2e_ms,
        finished_at=time.time(),
        worker_id=lease.worker.id if lease else None,
        gateway_load=lease.load_at_dispatch if lease else None,
        engine_running=lease.worker.running if lease else None,
        engine_waiting=lease.worker.waiting if lease else None,
        facts=facts,
        routing=routing,
        error_code=result.error_code,
        by_response_position=result.spec.by_response_position,
        engine_build=lease.worker.engine_build if lease else None,
    )


def refusal_record(
    *,
    request_id: str,
    endpoint: Endpoint,
    tenant: TenantSpec | None,
    stream: bool,
    received_at: float,
    started: float,
    http_status: int,
    error_code: str,
) -> RequestRecordDoc:
    """The record of a request refused before routing: no arm, model or sampling (the
    body was not accepted, and a model name the gateway does not serve is the
    caller's text), the tenant only when its key was recognised."""
    return RequestRecordDoc(
        request_id=request_id,
        received_at=datetime.fromtimestamp(received_at, UTC),
        tenant_id=tenant.id if tenant else None,
        tenant=tenant.name if tenant else None,
        endpoint=endpoint,
        stream=stream,
        model=None,
        arm=None,
        reason=NOT_ROUTED,
        e2e_ms=max((time.monotonic() - started) * 1000.0, 0.0),
        outcome=failure_outcome(http_status),
        http_status=http_status,
        error_code=error_code,
    )
