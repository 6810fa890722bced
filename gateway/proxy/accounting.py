"""Turn one finished request into a RequestRecord: telemetry, metrics and quota charge."""

import asyncio
import logging
import time
from dataclasses import dataclass, field

from control.contract import QuotaWeights, TenantSpec
from gateway.decision.decide import Decision
from gateway.decision.reasons import RANDOMIZED
from gateway.proxy.relay import RelayResult
from gateway.quota.limiter import Reservation, weighted_cost
from gateway.routing.balancer import Lease
from gateway.state import GatewayState
from gateway.telemetry.record import RequestFacts, RequestRecord, Routing

log = logging.getLogger(__name__)


@dataclass
class Accounting:
    state: GatewayState
    request_id: str
    tenant: TenantSpec
    weights: QuotaWeights
    started: float = field(default_factory=time.monotonic)
    decision: Decision | None = None
    lease: Lease | None = None
    facts: RequestFacts | None = None
    recorded: bool = False
    reservation: Reservation | None = None  # booked at admission, settled at finish
    prompt_estimate: int = 0  # prompt tokens assumed when the engine's usage never came

    async def finish(self, result: RelayResult) -> None:
        """Record once; later calls (an error raised after the relay finished) are no-ops."""
        if self.recorded or self.decision is None:
            return
        self.recorded = True
        now = time.monotonic()
        e2e_ms = (now - self.started) * 1000.0
        ttft_ms = (
            (result.first_token_at - self.started) * 1000.0
            if result.first_token_at is not None
            else None
        )
        prompt = result.usage.prompt_tokens if result.usage else 0
        completion = result.usage.completion_tokens if result.usage else 0
        tpot_ms = (
            (e2e_ms - ttft_ms) / (completion - 1)
            if ttft_ms is not None and completion > 1
            else None
        )
        d = self.decision
        lease = self.lease
        rec = RequestRecord(
            request_id=self.request_id,
            tenant=self.tenant.name,
            segment_id=d.segment.id if d.segment else None,
            segment_name=d.segment.name if d.segment else None,
            arm=d.arm,
            pair_version_id=d.pair_version_id,
            rollout_id=d.rollout.id if d.rollout and d.reason in RANDOMIZED else None,
            reason=str(d.reason),
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
            facts=self.facts,
            routing=Routing(
                rollout_id=d.rollout.id if d.rollout else None,
                rollout_version=d.rollout.version if d.rollout else None,
                pair_label=d.pair.label if d.pair else None,
                pool_id=d.pool.id,
                engine_version=d.pair.engine_version if d.pair else None,
            ),
            error_code=result.error_code,
        )
        self.state.aggregator.record(rec)
        self.state.metrics.observe_request(rec)
        cost = self._cost(result, rec)
        if self.reservation is not None or cost > 0:
            # NOTE: charged in the background: this may run while the client's
            # connection is being torn down, and must not delay or be cancelled with it.
            task = asyncio.get_running_loop().create_task(self._charge(cost))
            self.state.background.add(task)
            task.add_done_callback(self.state.background.discard)

    def _cost(self, result: RelayResult, rec: RequestRecord) -> float:
        """The weighted cost to charge: the engine's usage when it came; otherwise (the
        client left, the stream broke) the prompt as estimated at admission plus every
        token streamed so far, if the request reached an engine at all."""
        if result.usage is not None:
            prompt, completion = rec.prompt_tokens, rec.completion_tokens
        elif self.lease is not None:
            prompt, completion = self.prompt_estimate, result.streamed_tokens
        else:
            prompt = completion = 0
        if self.tenant.quota.weighted_tokens_per_minute is None:
            return 0.0
        return weighted_cost(
            prompt_tokens=prompt,
            completion_tokens=completion,
            rejected_draft_tokens=rec.rejected_draft_tokens,
            weights=self.weights,
        )

    def route(self, decision: Decision) -> None:
        """The request now goes where `decision` says (set again on a fallback)."""
        self.decision = decision

    def dispatched(self, decision: Decision, lease: Lease) -> None:
        """The engine accepted the request on `lease`'s worker, under `decision`."""
        self.decision = decision
        self.lease = lease

    async def fail(self, http_status: int, error_code: str | None = None) -> None:
        await self.finish(
            RelayResult(outcome="error", http_status=http_status, error_code=error_code)
        )

    async def _charge(self, cost: float) -> None:
        try:
            if self.reservation is not None:
                await self.state.quota.settle(self.reservation, cost)
            else:
                await self.state.quota.charge_cost(self.tenant, cost)
        except Exception as exc:
            # A quota store outage must not fail requests that were already served.
            log.warning("quota charge failed: %s", type(exc).__name__)
