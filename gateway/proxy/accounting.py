"""Turn one finished request into a RequestRecord: telemetry, metrics and quota charge."""

import asyncio
import logging
import time
from dataclasses import dataclass, field

from gateway.decision.decide import Decision
from gateway.decision.reasons import RANDOMIZED
from gateway.proxy.records import request_record
from gateway.proxy.relay import RelayResult
from gateway.quota.limiter import Reservation, weighted_cost
from gateway.routing.balancer import Lease
from gateway.state import GatewayState
from gateway.telemetry.record import RequestFacts, RequestRecord, Routing
from specwire import QuotaWeights, TenantSpec, failure_outcome

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
    # The request was with an engine that dropped it before answering (its client left
    # while a non-streamed answer was generated): charged as one that reached it.
    sent: bool = False

    async def finish(self, result: RelayResult) -> None:
        """Record once; later calls (an error raised after the relay finished) are no-ops."""
        if self.recorded or self.decision is None:
            return
        self.recorded = True
        d = self.decision
        rec = request_record(
            result,
            request_id=self.request_id,
            tenant=self.tenant.name,
            decision=d,
            lease=self.lease,
            started=self.started,
            arm=d.arm,
            reason=str(d.reason),
            rollout_id=d.rollout.id if d.rollout and d.reason in RANDOMIZED else None,
            facts=self.facts,
            routing=Routing(
                rollout_id=d.rollout.id if d.rollout else None,
                rollout_version=d.rollout.version if d.rollout else None,
                pair_label=d.pair.label if d.pair else None,
                pool_id=d.pool.id,
                engine_version=d.pair.engine_version if d.pair else None,
            ),
        )
        self.state.aggregator.record(rec)
        self.state.metrics.observe_request(rec)
        ladder = d.rollout.depth_ladder if d.rollout is not None else None
        if ladder is not None and d.rollout and rec.drafts > 0 and rec.accepted_per_position:
            self.state.depth.observe(d.rollout.id, rec.drafts, rec.accepted_per_position[0])
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
        elif self.lease is not None or self.sent:
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
        """Account a request that failed before an engine accepted it: a 4xx (the engine
        refused it, the quota is spent) is a client error, never the arm's."""
        result = RelayResult(
            outcome=failure_outcome(http_status), http_status=http_status, error_code=error_code
        )
        await self.finish(result)

    async def _charge(self, cost: float) -> None:
        try:
            if self.reservation is not None:
                await self.state.quota.settle(self.reservation, cost)
            else:
                await self.state.quota.charge_cost(self.tenant, cost)
        except Exception as exc:
            # A quota store outage must not fail requests that were already served.
            log.warning("quota charge failed: %s", type(exc).__name__)
