"""One finished request, as the request path hands it to telemetry and metrics.

Privacy by default: the record carries ids, decision, counts and latencies, and
has no field that could hold prompt or completion text.
"""

from dataclasses import dataclass
from typing import Literal

from control.contract import Arm

Outcome = Literal["ok", "error", "cancelled"]


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

    @property
    def rejected_draft_tokens(self) -> int:
        """Drafted tokens the target did not accept: the draft work a quota weighs separately."""
        return max(self.drafted_tokens - self.accepted_tokens, 0)
