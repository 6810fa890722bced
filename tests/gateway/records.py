"""One RequestRecord factory for the telemetry, metrics and flusher tests."""

from dataclasses import replace

from gateway.telemetry import RequestRecord
from specwire import Arm

BASE = RequestRecord(
    request_id="r",
    tenant="acme",
    segment_id=1,
    segment_name="code",
    arm=Arm.SPEC,
    pair_version_id=7,
    rollout_id=3,
    reason="cohort_spec",
    outcome="ok",
    http_status=200,
    prompt_tokens=10,
    completion_tokens=20,
    drafts=8,
    drafted_tokens=24,
    accepted_tokens=12,
    accepted_per_position=(6, 4, 2),
    ttft_ms=50.0,
    tpot_ms=5.0,
    e2e_ms=145.0,
    finished_at=0.0,
)


# What a baseline-arm request (no speculation) reports; a real engine summary with
# drafts=0 has no accepted positions either (gateway.proxy.sanitize).
NO_SPEC_WORK: dict[str, object] = {
    "drafts": 0,
    "drafted_tokens": 0,
    "accepted_tokens": 0,
    "accepted_per_position": (),
}


def make_record(**overrides: object) -> RequestRecord:
    """A spec-arm request in segment `code` (pair version 7, rollout 3), with overrides."""
    return replace(BASE, **overrides)  # type: ignore[arg-type]
