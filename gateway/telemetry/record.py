"""One finished request, as the request path hands it to telemetry and metrics.

Privacy by default: the record carries ids, decision, counts and latencies, and
has no field that could hold prompt or completion text.
"""

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.telemetry.positions import PositionCounts
from specwire import Arm, Outcome, RequestRecordDoc, SamplingSummary
from specwire.requests import Endpoint

__all__ = ["Outcome", "RequestFacts", "RequestRecord", "Routing", "record_doc", "sampled"]


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the request asked for, as its per-request record keeps it (no text)."""

    tenant_id: int
    endpoint: Endpoint
    stream: bool
    model: str
    adapter: str | None
    sampling: SamplingSummary
    received_at: float  # time.time() on arrival
    sample_rate: float = 1.0  # the tenant's share of requests that get a record

    def sampled(self, request_id: str) -> bool:
        return sampled(request_id, self.sample_rate)


def sampled(request_id: str, sample_rate: float) -> bool:
    """Whether a request gets a record, deterministic per request id: a retried id is
    kept or skipped alike."""
    if sample_rate >= 1.0:
        return True
    if sample_rate <= 0.0:
        return False
    digest = hashlib.blake2b(request_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest) / 2.0**64 < sample_rate


@dataclass(frozen=True, slots=True)
class Routing:
    """Where the decision sent the request, beyond the telemetry key."""

    rollout_id: int | None  # the segment's rollout, whatever the reason
    rollout_version: int | None
    pair_label: str | None
    pool_id: int | None
    engine_version: str | None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    request_id: str
    tenant: str
    segment_id: int | None
    segment_name: str | None
    arm: Arm
    pair_version_id: int | None
    rollout_id: int | None
    reason: str  # a DecisionReason value
    outcome: Outcome
    http_status: int
    prompt_tokens: int
    completion_tokens: int
    # From the engine's per-request metrics.speculative_decoding summary; 0 on the baseline arm.
    drafts: int
    drafted_tokens: int
    accepted_tokens: int
    accepted_per_position: tuple[int, ...]
    ttft_ms: float | None
    tpot_ms: float | None  # (e2e - ttft) / (completion_tokens - 1) when > 1 token
    e2e_ms: float
    finished_at: float  # time.time()
    # Where it went and what load it met there (None: never reached a worker).
    worker_id: str | None = None
    gateway_load: int | None = None  # this gateway's other requests in flight on the worker
    engine_running: int | None = None  # the worker's running count at its last heartbeat
    engine_waiting: int | None = None  # ... and its waiting count
    # For the per-request record (None: no record, e.g. in aggregation-only tests).
    facts: RequestFacts | None = None
    routing: Routing | None = None
    error_code: str | None = None
    # (drafted, accepted) per response-position bucket (gateway.telemetry.positions);
    # None: the engine sent no per-step arrays.
    by_response_position: PositionCounts | None = None
    # What the serving worker's agent reported (engine version + specroute build).
    engine_build: str | None = None

    @property
    def e2e_per_token_ms(self) -> float | None:
        """End-to-end time per output token: what a caller waits per token, bursts or not."""
        return self.e2e_ms / self.completion_tokens if self.completion_tokens > 0 else None

    @property
    def judged_positions(self) -> int | None:
        """Draft positions the target judged (see control.stats.acceptance); None without
        per-position counters."""
        if self.drafts <= 0 or not self.accepted_per_position:
            return None
        return self.drafts + self.accepted_tokens - self.accepted_per_position[-1]

    def counts(self) -> dict[str, int]:
        """What this request adds to each plain counter of its window: one entry per
        `specwire.COUNTER_FIELDS` name."""
        return {
            "requests": 1,
            "errors": 1 if self.outcome == "error" else 0,
            "client_errors": 1 if self.outcome == "client_error" else 0,
            "cancellations": 1 if self.outcome == "cancelled" else 0,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "drafts": self.drafts,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
        }

    def latencies(self) -> dict[str, float | None]:
        """This request's sample for each latency histogram of its window (None: no sample),
        one entry per `specwire.HISTOGRAM_FIELDS` name. A client error has none:
        the time an engine takes to refuse a bad request says nothing of the arm."""
        if self.outcome == "client_error":
            return dict.fromkeys(("ttft", "tpot", "e2e", "e2e_per_token"))
        return {
            "ttft": self.ttft_ms,
            "tpot": self.tpot_ms,
            "e2e": self.e2e_ms,
            "e2e_per_token": self.e2e_per_token_ms,
        }

    @property
    def rejected_draft_tokens(self) -> int:
        """Drafted tokens the target did not accept: the draft work a quota weighs separately."""
        return max(self.drafted_tokens - self.accepted_tokens, 0)


def record_doc(rec: RequestRecord) -> RequestRecordDoc | None:
    """The per-request record shipped to control; None when the request was not sampled."""
    facts = rec.facts
    if facts is None or not facts.sampled(rec.request_id):
        return None
    routing = rec.routing or Routing(None, None, None, None, None)
    return RequestRecordDoc(
        request_id=rec.request_id,
        received_at=datetime.fromtimestamp(facts.received_at, UTC),
        tenant_id=facts.tenant_id,
        tenant=rec.tenant,
        endpoint=facts.endpoint,
        stream=facts.stream,
        model=facts.model,
        adapter=facts.adapter,
        segment_id=rec.segment_id,
        segment=rec.segment_name,
        rollout_id=routing.rollout_id,
        rollout_version=routing.rollout_version,
        pair_version_id=rec.pair_version_id,
        pair=routing.pair_label,
        arm=rec.arm,
        reason=rec.reason,
        pool_id=routing.pool_id,
        worker_id=rec.worker_id,
        engine_version=routing.engine_version,
        engine_build=rec.engine_build,
        sampling=facts.sampling,
        prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens,
        drafts=rec.drafts,
        drafted_tokens=rec.drafted_tokens,
        accepted_tokens=rec.accepted_tokens,
        accepted_per_position=list(rec.accepted_per_position[:64]),
        ttft_ms=rec.ttft_ms if rec.ttft_ms is None else max(rec.ttft_ms, 0.0),
        tpot_ms=rec.tpot_ms if rec.tpot_ms is None else max(rec.tpot_ms, 0.0),
        e2e_ms=max(rec.e2e_ms, 0.0),
        outcome=rec.outcome,
        http_status=rec.http_status,
        error_code=rec.error_code,
    )
