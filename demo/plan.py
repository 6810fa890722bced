"""What the demo registers through the admin REST API, and the registering itself.

The segments differ in what speculation has to work with on the bundled pair:
code completion at temperature 0 (greedy: the draft must match the target's
argmax), prose at 0.7 and creative text at 1.3 (probabilistic drafting: the
draft must match the target's distribution), two-token labels, which leave
no room to amortise a draft, and a tenant whose requests name its own LoRA adapter
of the target (rot13), which the unadapted draft was never trained to follow.
Nothing here says which segment wins: that depends on the pair (see
engine/tiny_pair/MODEL_CARD.md) and the machine, and the automation decides on what
the gateway measured.
"""

from dataclasses import dataclass, field
from typing import Any

from engine.pools.probe_prompts import CODE_PROMPTS, PROSE_PROMPTS
from engine.tiny.styles import rot13
from specwire.admin_client import AdminClient as AdminClient

PAIR_NAME = "tiny"
SERVED_MODEL = "tiny"
# NOTE: a short context and batch keep each CPU engine's start-up and memory low.
ENGINE_ARGS: dict[str, Any] = {"max-model-len": 512, "max-num-seqs": 16}


@dataclass(frozen=True)
class SegmentPlan:
    """One traffic segment: its selector task, sampling, and the load sent to it."""

    name: str
    task: str
    tenant: str
    temperature: float
    prompts: tuple[str, ...]
    max_tokens: int
    rate_per_s: float  # mean Poisson arrival rate
    max_in_flight: int  # arrivals beyond this are shed (open loop, bounded)
    users: int  # distinct `user` values, so sticky cohorts spread over both arms
    # A LoRA adapter the segment's requests name as their model (vLLM's API); the
    # segment's selector then requires it, and both pools serve it.
    adapter: str | None = None

    def selector(self) -> dict[str, list[str]]:
        if self.adapter is None:
            return {"tasks": [self.task]}
        return {"tasks": [self.task], "adapters": [self.adapter]}


# The bundled LoRA adapter of the tiny target (engine/tiny_pair/adapters/rot13): trained
# on ROT13-enciphered text the draft never saw, so the unadapted draft's acceptance
# collapses on its tenant's requests (MODEL_CARD.md: mean acceptance length ~1.1).
DEMO_ADAPTER = "rot13"
CIPHER_PROMPTS = tuple(rot13(p) for p in CODE_PROMPTS)


ALL_SEGMENTS: tuple[SegmentPlan, ...] = (
    # NOTE: low concurrency for code at T=0: on two shared CPU cores a speculating
    # engine can only win while its batch stays small.
    SegmentPlan("code-completion", "code", "acme", 0.0, CODE_PROMPTS, 48, 0.5, 2, 24),
    SegmentPlan("prose", "prose", "acme", 0.7, PROSE_PROMPTS, 48, 0.6, 3, 24),
    SegmentPlan("creative", "creative", "globex", 1.3, PROSE_PROMPTS, 48, 0.6, 3, 24),
    # NOTE: two-token answers (labels, yes/no): the one decode step after the first token
    # costs k draft passes plus a wider verify on the spec arm and cannot be amortised
    # over accepted tokens, however high the acceptance. Where speculation cannot pay.
    # Two requests a second: a label costs little, and each arm needs a monitoring block
    # (10 requests) every few seconds for the evidence to settle within the demo.
    SegmentPlan("short-labels", "classify", "globex", 0.0, PROSE_PROMPTS, 2, 2.0, 4, 48),
    # A tenant's own adapter on the target, drafted for by the unadapted draft: the pair
    # serves it, but most drafts are rejected.
    SegmentPlan(
        "cipher-adapter", "cipher", "initech", 0.0, CIPHER_PROMPTS, 48, 0.5, 2, 24, DEMO_ADAPTER
    ),
)

# What `specroute demo` sends unless --adapter-segment: the segments that name no adapter.
# NOTE: an adapter segment makes both pools LoRA-enabled and adds its traffic. On a
# slower machine of this kind the five-segment demo promoted nothing (bench/RESULTS.md,
# "Demo outcomes"): steps were slower, and the other segments' acceptance fell, which
# was vLLM's CPU LoRA bug that engine/vllm_fix/lora_rows.py now fixes. The five-segment
# demo has not been measured again since the fix.
DEFAULT_SEGMENTS: tuple[SegmentPlan, ...] = tuple(s for s in ALL_SEGMENTS if s.adapter is None)


def demo_segments(adapter_segment: bool) -> tuple[SegmentPlan, ...]:
    """The demo's segments, with or without the one whose requests name a LoRA adapter."""
    return ALL_SEGMENTS if adapter_segment else DEFAULT_SEGMENTS


# Tuned so each rollout can be judged within a few minutes of CPU traffic: a
# dozen requests per arm, 30 s of stage dwell, evaluation every 20 s (see demo.py).
DEMO_THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.5,
    "min_mean_acceptance_length": 1.8,
    "min_speedup": 1.0,
    "max_kv_cache_usage": 0.95,
    "min_samples": 12,
    # NOTE: every promotion check asks for the spec arm to be shown not worse, by an
    # always-valid bound. A hundred requests per arm cannot bound an error-rate
    # difference below the default 1 % (at 0 errors the bound is 6-10 % after 4 min);
    # and the cost-realistic target's spec arm answers its first token 1.2-1.35x later
    # than the baseline (the draft's prefill), whose bound was 1.7-2.0 after 4 min.
    "error_rate_margin": 0.15,
    "ttft_margin": 1.0,
    "stage_dwell_seconds": 30,
    # NOTE: guards (every 5 s) judge at once, so a losing segment is disabled by a guard
    # (with its record) rather than rolled back by the slower canary evaluation.
    "guard_dwell_seconds": 0,
    "probation_percentage": 10.0,
    # Longer than any demo: a disabled segment stays disabled, so the report is stable.
    "cooldown_seconds": 3600,
    "max_inconclusive_rounds": 12,
    # min_speedup 1.0: a stage whose speedup is conclusively below 1 at its own load is
    # slower, not merely not faster enough, so the demo rolls it back (with its record)
    # instead of pausing it for an admin (the default).
    "no_benefit_action": "rollback",
}

# The demo serves the cost-realistic pair: the tiny target plus this many zero-output
# blocks (same distribution; a step streams ~150 MB of weights, so a draft is cheap
# beside it, as in real deployments). See engine/tiny/heavy.py.
DEMO_EXTRA_LAYERS = 40

# Canary at 50 %: both arms fill quickly; one promotion reaches full (and a record).
DEMO_STAGES: list[float] = [50.0, 100.0]


@dataclass
class Provisioned:
    pair_version_id: int
    spec_pool: str
    baseline_pool: str
    threshold_set_id: int
    segment_ids: dict[str, int] = field(default_factory=dict)
    rollout_ids: dict[str, int] = field(default_factory=dict)  # segment name -> rollout id
    tenant_keys: dict[str, str] = field(default_factory=dict)  # tenant name -> API key

    def to_json(self) -> dict[str, Any]:
        return {
            "pair_version_id": self.pair_version_id,
            "spec_pool": self.spec_pool,
            "baseline_pool": self.baseline_pool,
            "threshold_set_id": self.threshold_set_id,
            "segment_ids": self.segment_ids,
            "rollout_ids": self.rollout_ids,
            "tenants": sorted(self.tenant_keys),
        }


def provision(
    admin: AdminClient,
    *,
    target_dir: str,
    draft_dir: str,
    segments: tuple[SegmentPlan, ...] = DEFAULT_SEGMENTS,
    thresholds: dict[str, Any] | None = None,
    adapter_dirs: dict[str, str] | None = None,
) -> Provisioned:
    """Register the pair, pools, threshold set, segments, tenants and keys, and one
    rollout per segment (in draft; `start_rollouts` puts them in canary).
    `adapter_dirs`: LoRA adapter name -> directory, served by both pools (every
    segment's adapter needs one)."""
    adapters = adapter_dirs or {}
    missing = {s.adapter for s in segments if s.adapter is not None} - set(adapters)
    if missing:
        raise ValueError(f"no directory for the segments' adapter(s) {sorted(missing)}")
    engine_args = dict(ENGINE_ARGS)
    if adapters:
        engine_args["lora-modules"] = [f"{name}={path}" for name, path in adapters.items()]
        engine_args["max-lora-rank"] = 8
    pair = admin.call("POST", "/pairs", json={"name": PAIR_NAME, "description": "bundled"})
    version = admin.call(
        "POST",
        f"/pairs/{pair['id']}/versions",
        json={
            "method": "draft_model",
            "target_ref": target_dir,
            "draft_ref": draft_dir,
            "num_speculative_tokens": 3,
            "draft_sample_method": "probabilistic",
        },
    )
    spec_pool = admin.call(
        "POST",
        "/pools",
        json={
            "name": "tiny-spec",
            "served_model_name": SERVED_MODEL,
            "target_ref": target_dir,
            "pair_version_id": version["id"],
            "engine_args": engine_args,
            "desired_workers": 1,
        },
    )
    baseline_pool = admin.call(
        "POST",
        "/pools",
        json={
            "name": "tiny-baseline",
            "served_model_name": SERVED_MODEL,
            "target_ref": target_dir,
            "engine_args": engine_args,
            "desired_workers": 1,
        },
    )
    threshold_set = admin.call(
        "POST", "/threshold-sets", json={"name": "demo", **(thresholds or DEMO_THRESHOLDS)}
    )
    out = Provisioned(
        pair_version_id=version["id"],
        spec_pool=spec_pool["name"],
        baseline_pool=baseline_pool["name"],
        threshold_set_id=threshold_set["id"],
    )
    tenant_ids: dict[str, int] = {}
    for tenant in sorted({s.tenant for s in segments}):
        row = admin.call("POST", "/tenants", json={"name": tenant})
        tenant_ids[tenant] = row["id"]
        key = admin.call("POST", f"/tenants/{row['id']}/keys", json={"name": "demo"})
        out.tenant_keys[tenant] = key["key"]
    for priority, seg in enumerate(segments):
        segment = admin.call(
            "POST",
            "/segments",
            json={
                "name": seg.name,
                "description": f"task={seg.task}, temperature {seg.temperature:g}"
                + (f", adapter {seg.adapter}" if seg.adapter else ""),
                "selector": seg.selector(),
                "priority": priority,
            },
        )
        out.segment_ids[seg.name] = segment["id"]
        rollout = admin.call(
            "POST",
            "/rollouts",
            json={
                "name": f"{seg.name}-tiny",
                "segment_id": segment["id"],
                "pair_version_id": version["id"],
                "spec_pool_id": spec_pool["id"],
                "baseline_pool_id": baseline_pool["id"],
                "threshold_set_id": threshold_set["id"],
                "stages": DEMO_STAGES,
            },
        )
        out.rollout_ids[seg.name] = rollout["id"]
    return out


def start_rollouts(admin: AdminClient, provisioned: Provisioned) -> None:
    """Draft -> canary. Called once both pools serve: a canary started while the engines
    still load would be disabled by the draft-unavailable guard, correctly but uselessly."""
    for segment, rollout_id in provisioned.rollout_ids.items():
        started = admin.call(
            "POST",
            f"/rollouts/{rollout_id}/start",
            # NOTE: the demo shows canaries; the offline and shadow stages are waived (audited).
            json={
                "reason": f"make demo: {segment}",
                "waive": ["offline_evaluation", "shadow"],
            },
        )
        if started["state"] != "canary":
            raise RuntimeError(f"rollout {rollout_id} is {started['state']} after start")
