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

    @property
    def rejected_draft_tokens(self) -> int:
        """Drafted tokens the target did not accept: the draft work a quota weighs separately."""
        return max(self.drafted_tokens - self.accepted_tokens, 0)
