"""The request path, one step per function, in the design's order:

    intake → decide → admit → route → relay → account

`serve` runs them; the OpenAI routes only hand it the HTTP request. Each step
reads what the steps before it produced and does one thing: intake turns HTTP
into an authenticated, validated `Arrival`; decide picks the arm; admit books
the quota estimate; route opens the request on the chosen pool (or, before the
first byte, on its fallback); relay streams the engine's answer back; account
(`gateway.proxy.accounting`) turns the finished request into its record, its
metrics and its quota charge. The floor below holds the pieces the steps use:
request bodies and intake parsing (`gateway.proxy`), the pure decision, the
balancer, the quota limiters and the engine client.
"""

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Literal, cast

from fastapi import Request, Response

from gateway.decision.decide import Decision, DecisionInput, Override, decide
from gateway.decision.features import request_features, sampling_summary
from gateway.errors import (
    ClientDisconnected,
    GatewayError,
    PermissionDenied,
    QuotaExceeded,
    RequestValidationFailed,
    ServiceUnavailable,
    UpstreamClientError,
)
from gateway.proxy.accounting import Accounting
from gateway.proxy.client_stream import DisconnectWatch
from gateway.proxy.intake import (
    JSONBody,
    authenticate,
    engine_body,
    read_json,
    request_id_of,
    validate,
)
from gateway.proxy.records import refusal_record
from gateway.proxy.relay import RelayResult, relay_json, relay_stream
from gateway.proxy.schemas import SamplingParams
from gateway.proxy.upstream import Opened, PoolExhausted, open_on_pool, tagged
from gateway.quota.guarded import QuotaStoreUnavailable
from gateway.quota.limiter import PROMPT_BYTES_PER_TOKEN, Reservation, admission_estimate
from gateway.state import GatewayState
from gateway.telemetry.record import RequestFacts, sampled
from specwire import PolicySnapshot, RequestFeatures, TenantSpec

log = logging.getLogger(__name__)

OVERRIDE_HEADER = "x-specroute-speculation"
TASK_HEADER = "x-specroute-task"
SESSION_HEADER = "x-specroute-session"


@dataclass(slots=True)
class Intake:
    """What the gateway knows of a request before intake accepts it: enough for the
    record of one refused before routing."""

    request_id: str
    path: str
    started: float  # time.monotonic(): TTFT and e2e count from here, body reading included
    received_at: float  # time.time()
    tenant: TenantSpec | None = None  # once the key is recognised
    stream: bool = False  # once the body is valid

    @property
    def endpoint(self) -> Literal["chat", "completions"]:
        return "chat" if self.path.endswith("/chat/completions") else "completions"


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request past intake: who sent it, what it asks, and when it arrived."""

    request_id: str
    path: str
    tenant: TenantSpec
    snapshot: PolicySnapshot  # the policy the request is decided and charged under
    received: JSONBody
    body: SamplingParams
    features: RequestFeatures
    cohort_key: str
    override: Override | None
    started: float  # time.monotonic(): TTFT and e2e count from here, body reading included
    received_at: float  # time.time()

    @property
    def facts(self) -> RequestFacts:
        return RequestFacts(
            tenant_id=self.tenant.id,
            endpoint="chat" if self.path.endswith("/chat/completions") else "completions",
            stream=self.body.stream,
            model=self.features.model,
            adapter=self.features.adapter,
            sampling=sampling_summary(self.body),
            received_at=self.received_at,
            sample_rate=self.tenant.request_sample_rate,
        )


async def serve(
    state: GatewayState, request: Request, schema: type[SamplingParams], path: str
) -> Response:
    """One completion request through every step."""
    seen = Intake(request_id_of(request), path, time.monotonic(), time.time())
    try:
        arrival = await intake(state, request, schema, seen)
        decision = decide_arm(state, arrival)
    except GatewayError as exc:
        refused_before_routing(state, seen, exc)
        raise
    request.state.decision_header = decision.header()
    acct = account(state, arrival, decision)
    try:
        acct.reservation = await admit(state, arrival)
        opened, watch = await route_watched(state, request, arrival, decision, acct)
    except GatewayError as exc:
        await refused(state, acct, exc)
        raise
    dispatched(state, arrival, opened, acct)
    request.state.decision_header = opened.decision.header()
    return await relay(state, request, arrival, opened, acct, watch)


async def intake(
    state: GatewayState, request: Request, schema: type[SamplingParams], seen: Intake
) -> Arrival:
    """Authenticate the key, read and validate the body, check the model is allowed;
    `seen` learns the tenant and the stream flag as they become known."""
    tenant = seen.tenant = authenticate(request, state.store, state.auth_guard)
    received = await read_json(request, state.settings.max_body_bytes, state.body_deadlines)
    body = validate(schema, received.doc)
    seen.stream = body.stream
    if tenant.allowed_models is not None and body.model not in tenant.allowed_models:
        raise PermissionDenied(
            f"This key may not use the model '{body.model}'",
            code="model_not_allowed",
            param="model",
        )
    snapshot = state.store.snapshot
    assert snapshot is not None  # authenticate() checked readiness
    features = request_features(
        body, tenant=tenant.name, task=request.headers.get(TASK_HEADER), snapshot=snapshot
    )
    return Arrival(
        request_id=seen.request_id,
        path=seen.path,
        tenant=tenant,
        snapshot=snapshot,
        received=received,
        body=body,
        features=features,
        cohort_key=body.user or request.headers.get(SESSION_HEADER) or seen.request_id,
        override=_override(request),
        started=seen.started,
        received_at=seen.received_at,
    )


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


def decide_arm(state: GatewayState, arrival: Arrival) -> Decision:
    """The pure decision on the current snapshot: segment, rollout, cohort, arm; then,
    on a rollout with a depth ladder, the rung for the spec arm's current load."""
    decision = decide(
        DecisionInput(
            snapshot=arrival.snapshot,
            snapshot_age_s=state.store.age_s(),
            tenant=arrival.tenant,
            features=arrival.features,
            body=arrival.body,
            cohort_key=arrival.cohort_key,
            override=arrival.override,
            request_id=arrival.request_id,
        )
    )
    return state.depth.route(decision, arrival.snapshot)


def account(state: GatewayState, arrival: Arrival, decision: Decision) -> Accounting:
    """The request's account, opened before anything can fail so every outcome is recorded."""
    acct = Accounting(
        state,
        arrival.request_id,
        arrival.tenant,
        arrival.snapshot.quota_weights,
        started=arrival.started,
        decision=decision,
        facts=arrival.facts,
    )
    acct.prompt_estimate = -(-len(arrival.received.raw) // PROMPT_BYTES_PER_TOKEN)
    return acct


async def admit(state: GatewayState, arrival: Arrival) -> Reservation | None:
    """Admit the request against its tenant's quota and book its estimated cost
    (None: nothing booked)."""
    tenant = arrival.tenant
    if tenant.quota.weighted_tokens_per_minute is None:
        return None
    body = arrival.body
    estimate = admission_estimate(
        prompt_bytes=len(arrival.received.raw),
        max_tokens=getattr(body, "max_completion_tokens", None) or body.max_tokens,
        weights=arrival.snapshot.quota_weights,
    )
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


async def route(
    state: GatewayState, arrival: Arrival, decision: Decision, acct: Accounting
) -> Opened:
    """Open the request on a worker of the decision's pool; when none takes it, on the
    fallback pool (reason `pool_unavailable`). Nothing is retried once an engine accepted."""
    stream = arrival.body.stream
    body = engine_body(arrival.received, stream=stream)
    upstream = state.settings.upstream
    timeout_s = upstream.first_token_timeout_s if stream else upstream.request_timeout_s
    candidate = decision
    tried: list[str] = []
    engine_error: GatewayError | None = None  # the last engine's own failure, if any
    while True:
        try:
            return await open_on_pool(
                client=state.engine,
                balancer=state.balancer,
                decision=candidate,
                path=arrival.path,
                body=body,
                request_id=arrival.request_id,
                header_timeout_s=timeout_s,
                response_header_timeout_s=(
                    state.settings.upstream.response_header_timeout_s if stream else None
                ),
            )
        except PoolExhausted as exhausted:
            # NOTE: an engine's own failure (a 500 on the first pool) is the answer even
            # when the fallback pool has no worker; otherwise the body names the pool the
            # decision header names (the last one tried). `details.tried` lists them all.
            tried.append(candidate.pool.name)
            engine_error = exhausted.error or engine_error
            earlier = f" (tried before: {', '.join(tried[:-1])})" if len(tried) > 1 else ""
            error = engine_error or ServiceUnavailable(
                f"No healthy worker in pool '{candidate.pool.name}'{earlier}",
                code="no_healthy_worker",
            )
            error.details = (error.details or {}) | {"tried": list(tried)}
            error = tagged(error, candidate)
        if candidate.fallback is None:
            raise error
        candidate = candidate.fall_back()
        acct.route(candidate)


async def route_watched(
    state: GatewayState, request: Request, arrival: Arrival, decision: Decision, acct: Accounting
) -> tuple[Opened, DisconnectWatch | None]:
    """`route`, watched for the client leaving when the answer is not streamed: its
    headers come with its end, so the wait for them is the whole generation, and an
    engine kept on a request nobody reads any more is a leak (vLLM aborts it when its
    own client goes). The watch goes on to the relay (None: a stream, which arms its own)."""
    if arrival.body.stream:
        return await route(state, arrival, decision, acct), None
    watch = DisconnectWatch(request.receive)
    try:
        return await route(state, arrival, decision, acct), watch
    except asyncio.CancelledError:
        left = watch.swallow()
        watch.stop()
        if not left:
            raise
        # NOTE: the cancelled wait dropped the engine connection (EngineClient.post)
        # and released the lease (open_on_pool): the engine sees its client leave.
        # Charged its prompt estimate, as a stream left before its first token is.
        acct.sent = True
        await acct.finish(RelayResult(outcome="cancelled", http_status=499))
        raise ClientDisconnected() from None
    except BaseException:
        watch.stop()
        raise


def refused_before_routing(state: GatewayState, seen: Intake, exc: GatewayError) -> None:
    """Record a request refused before routing (bad key, body, model or header): who and
    when as far as known, and the typed error. It reaches none of the routed requests'
    counters or histograms; the answer's rendering counts it in refusals_total."""
    if not sampled(seen.request_id, seen.tenant.request_sample_rate if seen.tenant else 1.0):
        return
    doc = refusal_record(
        request_id=seen.request_id,
        endpoint=seen.endpoint,
        tenant=seen.tenant,
        stream=seen.stream,
        received_at=seen.received_at,
        started=seen.started,
        http_status=exc.status_code,
        error_code=exc.code or exc.error_type,
    )
    state.aggregator.record_refusal(doc, time.time())


async def refused(state: GatewayState, acct: Accounting, exc: GatewayError) -> None:
    """Account a request that never reached an engine (quota, no worker, engine refusal),
    under the arm last tried: after a fallback, that is the other one."""
    routed = acct.decision
    assert routed is not None
    state.metrics.observe_decision(str(routed.reason), routed.arm)
    # NOTE: an engine refusal's code is the engine's text: the record keeps ours.
    code = exc.default_code if isinstance(exc, UpstreamClientError) else exc.code
    await acct.fail(exc.status_code, code)


def dispatched(state: GatewayState, arrival: Arrival, opened: Opened, acct: Accounting) -> None:
    """An engine accepted the request: note where, and start its shadow copy if sampled."""
    acct.dispatched(opened.decision, opened.lease)
    # Shadow: the copy goes out only once the caller's own request is with an engine.
    state.shadow.maybe_mirror(
        opened.decision,
        path=arrival.path,
        doc=arrival.received.doc,
        request_id=arrival.request_id,
        tenant=arrival.tenant,
    )
    # Output contract: a sampled greedy request is also answered by both arms, compared.
    state.pair_checks.maybe_check(
        opened.decision,
        path=arrival.path,
        doc=arrival.received.doc,
        request_id=arrival.request_id,
    )
    state.metrics.observe_decision(str(opened.decision.reason), opened.decision.arm)


async def relay(
    state: GatewayState,
    request: Request,
    arrival: Arrival,
    opened: Opened,
    acct: Accounting,
    watch: DisconnectWatch | None = None,
) -> Response:
    """Stream (or return) the engine's answer; `acct.finish` accounts it when it ends."""
    headers = {"x-request-id": arrival.request_id, "x-specroute-decision": opened.decision.header()}
    settings = state.settings
    body = arrival.body
    if body.stream:
        return await relay_stream(
            opened,
            request,
            keep_usage=bool(body.stream_options and body.stream_options.include_usage),
            started=acct.started,
            first_token_timeout_s=settings.upstream.first_token_timeout_s,
            idle_timeout_s=settings.upstream.idle_timeout_s,
            hold_headers=settings.upstream.hold_stream_headers,
            headers=headers,
            finish=acct.finish,
            max_event_bytes=settings.upstream.engine_max_body_bytes,
        )
    return await relay_json(
        opened,
        request,
        timeout_s=settings.upstream.request_timeout_s,
        headers=headers,
        finish=acct.finish,
        max_body_bytes=settings.upstream.engine_max_body_bytes,
        watch=watch,
    )
