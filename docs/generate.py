"""Generates docs/configuration.md, docs/engine-args.md and docs/metrics.md from the code.

The configuration reference is read off the pydantic-settings classes (env var,
type, default, description); the metrics catalog joins each live metric's name,
type, labels and help text with the catalog entries below (numerator,
denominator, unit, window, PromQL). A test fails when a metric has no entry
or the committed files are stale: `python docs/generate.py` rewrites them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_settings import BaseSettings

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    numerator: str
    denominator: str
    unit: str
    window: str
    promql: str


# NOTE: one entry per metric family; the test keeps this in step with the code.
CATALOG: dict[str, Entry] = {
    "specroute_gateway_requests": Entry(
        "finished requests",
        "—",
        "requests",
        "cumulative; rate over 5m",
        'sum by (segment, arm) (rate(specroute_gateway_requests_total{outcome="error"}[5m])) '
        "/ sum by (segment, arm) "
        '(rate(specroute_gateway_requests_total{outcome!="client_error"}[5m]))',
    ),
    "specroute_gateway_tokens": Entry(
        "prompt or completion tokens (kind label) the engine reported in usage",
        "—",
        "tokens",
        "cumulative; rate over 1m",
        "sum by (kind) (rate(specroute_gateway_tokens_total[1m]))",
    ),
    "specroute_gateway_spec_drafts": Entry(
        "draft proposals = target verification passes on the spec arm",
        "—",
        "drafts",
        "cumulative; rate over 5m",
        "1 + sum(rate(specroute_gateway_spec_accepted_tokens_total[5m])) "
        "/ sum(rate(specroute_gateway_spec_drafts_total[5m]))",
    ),
    "specroute_gateway_spec_drafted_tokens": Entry(
        "draft tokens proposed",
        "—",
        "tokens",
        "cumulative; rate over 5m",
        "sum by (segment) (rate(specroute_gateway_spec_drafted_tokens_total[5m]))",
    ),
    "specroute_gateway_spec_accepted_tokens": Entry(
        "draft tokens the target accepted",
        "drafted tokens (acceptance rate)",
        "tokens",
        "cumulative; rate over 5m",
        "sum by (segment) (rate(specroute_gateway_spec_accepted_tokens_total[5m])) "
        "/ sum by (segment) (rate(specroute_gateway_spec_drafted_tokens_total[5m]))",
    ),
    "specroute_gateway_spec_full_proposals": Entry(
        "draft proposals accepted whole (all k tokens)",
        "specroute_gateway_spec_drafts_total (correction rate: 1 - the ratio)",
        "drafts",
        "rate over 5m",
        "segment:specroute_full_proposal_acceptance:ratio_rate5m",
    ),
    "specroute_gateway_spec_judged_positions": Entry(
        "specroute_gateway_spec_accepted_tokens_total",
        "draft positions the target judged",
        "ratio 0..1",
        "rate over 5m",
        "segment:specroute_judged_acceptance_rate:ratio_rate5m",
    ),
    "specroute_gateway_spec_accepted_tokens_by_position": Entry(
        "accepted draft tokens at a draft position",
        "drafts (share of drafts accepted at that position)",
        "tokens",
        "cumulative; rate over 5m",
        "sum by (segment, position) "
        "(rate(specroute_gateway_spec_accepted_tokens_by_position_total[5m])) "
        "/ ignoring (position) group_left "
        "sum by (segment) (rate(specroute_gateway_spec_drafts_total[5m]))",
    ),
    "specroute_gateway_spec_drafted_tokens_by_response_position": Entry(
        "draft tokens proposed by verify steps that began in the response-position bucket",
        "—",
        "tokens",
        "cumulative; rate over 5m",
        "sum by (segment, position_bucket) "
        "(rate(specroute_gateway_spec_drafted_tokens_by_response_position_total[5m]))",
    ),
    "specroute_gateway_spec_accepted_tokens_by_response_position": Entry(
        "draft tokens accepted in verify steps that began in the response-position bucket",
        "specroute_gateway_spec_drafted_tokens_by_response_position_total, same bucket",
        "tokens (ratio 0..1 as acceptance)",
        "cumulative; rate over 5m",
        "segment:specroute_acceptance_rate_by_response_position:ratio_rate5m",
    ),
    "specroute_gateway_ttft_seconds": Entry(
        "time from request arrival to the first content chunk",
        "—",
        "seconds",
        "histogram; quantile over 5m",
        "histogram_quantile(0.5, sum by (le, segment, arm) "
        "(rate(specroute_gateway_ttft_seconds_bucket[5m])))",
    ),
    "specroute_gateway_tpot_seconds": Entry(
        "end-to-end minus TTFT",
        "completion tokens − 1",
        "seconds per token",
        "histogram; quantile over 5m",
        "histogram_quantile(0.5, sum by (le, segment, arm) "
        "(rate(specroute_gateway_tpot_seconds_bucket[5m])))",
    ),
    "specroute_gateway_e2e_seconds": Entry(
        "request arrival to last byte",
        "—",
        "seconds",
        "histogram; quantile over 5m",
        "histogram_quantile(0.99, sum by (le, arm) "
        "(rate(specroute_gateway_e2e_seconds_bucket[5m])))",
    ),
    "specroute_gateway_decisions": Entry(
        "routing decisions by reason and arm",
        "all decisions (arm share)",
        "decisions",
        "cumulative; rate over 5m",
        'sum(rate(specroute_gateway_decisions_total{arm="spec"}[5m])) '
        "/ sum(rate(specroute_gateway_decisions_total[5m]))",
    ),
    "specroute_gateway_depth_switches": Entry(
        "switches of a segment's depth ladder to another rung (k label: the new rung's "
        "depth; reason label: load, no_worker, acceptance_reset)",
        "—",
        "switches",
        "cumulative; rate over 5m",
        "segment_reason:specroute_depth_switches:rate5m",
    ),
    "specroute_gateway_depth_rung_k": Entry(
        "the depth k of the rung a segment's depth ladder routes spec requests to",
        "—",
        "draft tokens per step",
        "instant (as of the ladder's last change)",
        "max by (segment) (specroute_gateway_depth_rung_k)",
    ),
    "specroute_gateway_snapshot_version": Entry(
        "version of the snapshot the gateway routes on",
        "—",
        "version",
        "instant",
        "max by (instance) (specroute_gateway_snapshot_version)",
    ),
    "specroute_gateway_snapshot_age_seconds": Entry(
        "now − the snapshot's generated_at",
        "—",
        "seconds",
        "instant",
        "max by (instance) (specroute_gateway_snapshot_age_seconds)",
    ),
    "specroute_gateway_quota_store_failures": Entry(
        "quota store (Redis) calls that failed or timed out, by operation (`admit`,"
        " `settle`, `charge`, `reconcile`: the replay of calls whose outcome was unknown)",
        "—",
        "calls",
        "cumulative; increase over 5m",
        "sum by (instance) (increase(specroute_gateway_quota_store_failures_total[5m]))",
    ),
    "specroute_gateway_auth_failures": Entry(
        "requests refused for their API key (missing, unknown or revoked), and those "
        "refused with 429 because their address failed too often (reason label)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (reason) (rate(specroute_gateway_auth_failures_total[5m]))",
    ),
    "specroute_gateway_refusals": Entry(
        "requests answered with a typed error before their routing decision, by the "
        "status answered and the gateway's own code (status 499: the client left)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (status, code) (rate(specroute_gateway_refusals_total[5m]))",
    ),
    "specroute_gateway_quota_rejections": Entry(
        "requests refused with 429 (weighted-token budget spent)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (tenant) (rate(specroute_gateway_quota_rejections_total[5m]))",
    ),
    "specroute_gateway_shadow_mirrors": Entry(
        "shadow mirrors by outcome (ok, error, client_error, cancelled over budget, skipped "
        "at the cap, no_worker)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (outcome) (rate(specroute_gateway_shadow_mirrors_total[5m]))",
    ),
    "specroute_gateway_contract_pairs": Entry(
        "output contract: requests answered by both arms in the background and "
        "compared, by outcome (greedy: equal, unequal; sampled: sampled_spec_higher, "
        "sampled_spec_lower, sampled_tie; incomplete: an arm failed or timed out; "
        "skipped at the in-flight cap)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (outcome) (rate(specroute_gateway_contract_pairs_total[5m]))",
    ),
    "specroute_gateway_outstanding_requests": Entry(
        "requests in flight to a worker",
        "—",
        "requests",
        "instant",
        "sum by (pool) (specroute_gateway_outstanding_requests)",
    ),
    "specroute_gateway_telemetry_batches_flushed": Entry(
        "telemetry batches acknowledged by control",
        "—",
        "batches",
        "cumulative; increase over 1h",
        "increase(specroute_gateway_telemetry_batches_flushed_total[1h])",
    ),
    "specroute_gateway_telemetry_batches_dropped": Entry(
        "telemetry batches never delivered, by reason",
        "—",
        "batches",
        "cumulative; increase over 1h",
        "sum by (reason) (increase(specroute_gateway_telemetry_batches_dropped_total[1h]))",
    ),
    "specroute_gateway_request_records_dropped": Entry(
        "sampled per-request records not shipped, by reason",
        "—",
        "records",
        "cumulative; increase over 1h",
        "sum by (reason) (increase(specroute_gateway_request_records_dropped_total[1h]))",
    ),
    "specroute_gateway_telemetry_batches_pending": Entry(
        "telemetry batches waiting for delivery",
        "—",
        "batches",
        "instant",
        "max by (instance) (specroute_gateway_telemetry_batches_pending)",
    ),
    "specroute_control_auth_failures": Entry(
        "admin/internal requests refused before their route: missing or unknown token, "
        "or 429 because their address failed too often (reason label)",
        "—",
        "requests",
        "cumulative; rate over 5m",
        "sum by (reason) (rate(specroute_control_auth_failures_total[5m]))",
    ),
    "specroute_control_rollout_state": Entry(
        "1 for the rollout's current state",
        "—",
        "boolean",
        "instant (read from SQL per scrape)",
        'changes(specroute_control_rollout_state{state="disabled"}[1h])',
    ),
    "specroute_control_rollout_spec_percentage": Entry(
        "share of the segment's cohorts on the spec arm",
        "—",
        "percent",
        "instant (read from SQL per scrape)",
        "specroute_control_rollout_spec_percentage",
    ),
    "specroute_control_rollout_min_acceptance_rate": Entry(
        "the exposing rollout's min_acceptance_rate (its threshold set)",
        "—",
        "ratio 0..1",
        "instant",
        "max by (segment) (specroute_control_rollout_min_acceptance_rate)",
    ),
    "specroute_control_segment_latency_slo_seconds": Entry(
        "the segment's TTFT or TPOT p95 target (ttft_slo_p95_s, tpot_slo_p95_s)",
        "—",
        "seconds",
        "instant (read from SQL per scrape)",
        "rate(specroute_gateway_ttft_seconds_bucket[1h]) and on (segment, le) "
        'specroute_control_segment_latency_slo_seconds{kind="ttft"}',
    ),
    "specroute_control_worker_cpu_seconds": Entry(
        "user + system CPU seconds of the worker's vLLM process tree (its agent's psutil)",
        "—",
        "CPU seconds",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "sum by (pool) (rate(specroute_control_worker_cpu_seconds_total[5m]))",
    ),
    "specroute_control_worker_accepted_tokens": Entry(
        "draft tokens the worker's engine accepted (vllm:spec_decode_num_accepted_tokens)",
        "—",
        "tokens",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "sum by (pool, pair_version) (rate(specroute_control_worker_accepted_tokens_total[5m]))",
    ),
    "specroute_control_worker_generation_tokens": Entry(
        "tokens the worker's engine emitted (vllm:generation_tokens)",
        "—",
        "tokens",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "sum by (pool) (rate(specroute_control_worker_generation_tokens_total[5m]))",
    ),
    "specroute_control_decisions": Entry(
        "decision rows (flips) by kind, target state and actor type",
        "—",
        "decisions",
        "cumulative (row count); increase over 15m",
        "sum by (kind) (increase(specroute_control_decisions_total[15m]))",
    ),
    "specroute_control_pool_workers": Entry(
        "registered workers by pool and last reported health",
        "—",
        "workers",
        "instant (read from SQL per scrape)",
        'sum by (pool) (specroute_control_pool_workers{kind="spec", health="healthy"}) == 0',
    ),
    "specroute_control_pool_queue_depth": Entry(
        "requests running or waiting in the pool's engines (healthy workers, last heartbeat)",
        "—",
        "requests",
        "instant (last heartbeats)",
        'sum by (pool) (specroute_control_pool_queue_depth{state="waiting"})',
    ),
    "specroute_control_worker_kv_cache_usage": Entry(
        "KV-cache usage last reported by the worker's agent",
        "—",
        "ratio 0..1",
        "instant (last heartbeat)",
        "max by (pool) (specroute_control_worker_kv_cache_usage)",
    ),
    "specroute_control_worker_engine_steps": Entry(
        "engine steps: batched target forward passes (vllm:iteration_tokens_total count)",
        "—",
        "steps",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "pool:specroute_engine_steps_per_emitted_token:ratio_rate5m",
    ),
    "specroute_control_worker_decode_seconds": Entry(
        "first-to-last token seconds of finished requests (vllm:request_decode_time_seconds "
        "sum): draft and verification together",
        "—",
        "seconds",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "pool:specroute_decode_seconds_per_sequence_step:ratio_rate5m",
    ),
    "specroute_control_worker_decode_requests": Entry(
        "finished requests behind the decode seconds (vllm:request_decode_time_seconds count)",
        "—",
        "requests",
        "cumulative since the server started, as of its last heartbeat; rate over 5m",
        "sum by (pool) (rate(specroute_control_worker_decode_requests_total[5m]))",
    ),
    "specroute_control_worker_kv_blocks": Entry(
        "KV-cache blocks in use (state=used: kv_cache_usage_perc x num_gpu_blocks) or in "
        "all (state=total)",
        "—",
        "blocks",
        "instant (last heartbeat)",
        "pool:specroute_kv_blocks_per_running_sequence:avg5m",
    ),
    "specroute_control_worker_running_sequences": Entry(
        "sequences running in the worker's engines (vllm:num_requests_running)",
        "—",
        "sequences",
        "instant (last heartbeat)",
        "sum by (pool) (specroute_control_worker_running_sequences)",
    ),
    "specroute_control_worker_energy_joules": Entry(
        "host energy since the agent started (RAPL package domains + NVML devices)",
        "—",
        "joules (rate: watts)",
        "cumulative since the agent started; rate over 5m",
        "max by (pool, worker) (rate(specroute_control_worker_energy_joules_total[5m]))",
    ),
    "specroute_control_worker_energy_source_info": Entry(
        "1, labelled with the energy counter's source or 'absent: REASON'",
        "—",
        "info",
        "instant (last heartbeat)",
        "count by (pool, source) (specroute_control_worker_energy_source_info)",
    ),
    "specroute_control_adapter_acceptance_rate": Entry(
        "accepted tokens of the spec-arm requests naming the adapter (records, last hour)",
        "drafted tokens of the same requests",
        "ratio 0..1",
        "trailing 1 h of request records (read from SQL per scrape)",
        'min by (adapter) (specroute_control_adapter_acceptance_rate{adapter!=""})',
    ),
    "specroute_control_adapter_mean_acceptance_length": Entry(
        "accepted tokens of the spec-arm requests naming the adapter (records, last hour)",
        "drafts of the same requests (plus 1: the target's own token)",
        "tokens per target step",
        "trailing 1 h of request records (read from SQL per scrape)",
        "specroute_control_adapter_mean_acceptance_length",
    ),
    "specroute_control_adapter_drafts": Entry(
        "drafts (speculation steps) of the requests naming the adapter (records, last hour)",
        "—",
        "drafts",
        "trailing 1 h of request records (read from SQL per scrape)",
        "sum by (adapter) (specroute_control_adapter_drafts)",
    ),
    "specroute_control_snapshot_version": Entry(
        "current snapshot version in the database",
        "—",
        "version",
        "instant",
        "specroute_control_snapshot_version",
    ),
}


# What each metric leaves out: read a ratio or a percentile knowing which requests
# never reach it. Every catalog entry has one (the docs test checks).
BEFORE_ROUTING = "requests refused before routing (bad key, body or model; override not allowed)"
ADAPTER_EXCLUSIONS = (
    "requests no record was kept for (the tenant's request_sample_rate, records past the "
    "gateway's per-window cap); the baseline arm; adapters and pairs with no draft in the hour"
)
NO_TELEMETRY = "workers whose last heartbeat carried no engine telemetry (agents before it)"
EXCLUSIONS: dict[str, str] = {
    "specroute_gateway_requests": BEFORE_ROUTING,
    "specroute_gateway_tokens": (
        f"{BEFORE_ROUTING}; requests whose engine sent no usage (failed or cancelled "
        "before it; streams without include_usage still report it to the gateway)"
    ),
    "specroute_gateway_spec_drafts": (
        "the baseline arm; spec requests whose engine sent no per-request speculative summary"
    ),
    "specroute_gateway_spec_drafted_tokens": (
        "the baseline arm; spec requests whose engine sent no per-request speculative summary"
    ),
    "specroute_gateway_spec_accepted_tokens": (
        "the baseline arm; spec requests whose engine sent no per-request speculative summary"
    ),
    "specroute_gateway_spec_full_proposals": (
        "the baseline arm; spec requests without per-position counters"
    ),
    "specroute_gateway_spec_judged_positions": (
        "the baseline arm; spec requests without per-position counters"
    ),
    "specroute_gateway_spec_accepted_tokens_by_position": (
        "the baseline arm; positions past the last label value are folded into it"
    ),
    "specroute_gateway_spec_drafted_tokens_by_response_position": (
        "the baseline arm; requests with n > 1 (vLLM sends no per-request spec metrics); "
        "requests whose engine sent no per-step arrays count under position_bucket=unknown"
    ),
    "specroute_gateway_spec_accepted_tokens_by_response_position": (
        "as spec_drafted_tokens_by_response_position"
    ),
    "specroute_gateway_ttft_seconds": (
        f"{BEFORE_ROUTING}; non-streaming requests (no first token is seen); requests that "
        "failed or were cancelled before their first token"
    ),
    "specroute_gateway_tpot_seconds": (
        "non-streaming requests; requests with fewer than 2 completion tokens"
    ),
    "specroute_gateway_e2e_seconds": f"{BEFORE_ROUTING}; client errors (a 4xx after routing)",
    "specroute_gateway_decisions": "requests refused before a decision (bad key, body, model)",
    "specroute_gateway_depth_switches": (
        "rollouts without a depth ladder; requests the ladder leaves alone (baseline, "
        "fallback, mirrored and paired-check copies); an acceptance reset on the default "
        "rung (no switch)"
    ),
    "specroute_gateway_depth_rung_k": (
        "rollouts without a depth ladder; ladders that have served no spec request in "
        "this process since it started or the ladder changed"
    ),
    "specroute_gateway_snapshot_version": "—",
    "specroute_gateway_snapshot_age_seconds": "—",
    "specroute_gateway_quota_store_failures": "tenants without a quota (never checked)",
    "specroute_gateway_quota_rejections": "tenants without a quota",
    "specroute_gateway_auth_failures": (
        "refusals before authentication (gateway not ready); a bad body with a bad key "
        "is counted here, since the key is checked first"
    ),
    "specroute_gateway_refusals": (
        "requests with a routing decision, refused or failed after it (quota 429, no "
        "healthy worker, an engine's refusal or error: counted in requests_total); "
        "answers other than typed errors (readyz 503)"
    ),
    "specroute_gateway_shadow_mirrors": "rollouts not in the shadow stage",
    "specroute_gateway_contract_pairs": (
        "requests with n > 1, outside the rollout's contract_pair_percentage, or with "
        "parameters the spec arm cannot serve losslessly"
    ),
    "specroute_gateway_outstanding_requests": "other gateways' requests to the same worker",
    "specroute_gateway_telemetry_batches_flushed": "windows with no request (never sent)",
    "specroute_gateway_telemetry_batches_dropped": "—",
    "specroute_gateway_request_records_dropped": (
        "requests the tenant's request_sample_rate left unsampled (not drops)"
    ),
    "specroute_gateway_telemetry_batches_pending": "—",
    "specroute_control_rollout_state": "deleted rollouts",
    "specroute_control_rollout_spec_percentage": "rollouts in a non-exposing state (reported 0)",
    "specroute_control_rollout_min_acceptance_rate": "rollouts not exposing spec traffic",
    "specroute_control_segment_latency_slo_seconds": (
        "none: every segment, plus the defaults under the gateway's none and other labels"
    ),
    "specroute_control_worker_cpu_seconds": (
        "workers whose agent does not know the server's pid; the agent's own CPU; CPU "
        "outside the server's process tree (draft and target share it, both counted)"
    ),
    "specroute_control_worker_accepted_tokens": (
        "baseline workers; spec workers whose last heartbeat had no spec counters"
    ),
    "specroute_control_worker_generation_tokens": (
        "servers whose /metrics has no vllm:generation_tokens_total"
    ),
    "specroute_control_decisions": "holds (no flip) and flips that lost a compare-and-set",
    "specroute_control_pool_workers": "workers never registered by a heartbeat",
    "specroute_control_pool_queue_depth": (
        "unhealthy workers; requests queued at the gateway rather than in the engine"
    ),
    "specroute_control_worker_kv_cache_usage": "—",
    "specroute_control_worker_engine_steps": (
        f"{NO_TELEMETRY}; steps whose outputs the API server never processed (the count is kept "
        "by the API server, one per batch of engine outputs)"
    ),
    "specroute_control_worker_decode_seconds": (
        f"{NO_TELEMETRY}; requests still running (counted when they finish); the prefill (time to "
        "first token); requests aborted before their first token"
    ),
    "specroute_control_worker_decode_requests": f"{NO_TELEMETRY}; requests still running",
    "specroute_control_worker_kv_blocks": (
        f"{NO_TELEMETRY}; servers without vllm:cache_config_info num_gpu_blocks; blocks held only "
        "by the prefix cache (free and reusable: not in use)"
    ),
    "specroute_control_worker_running_sequences": (
        f"{NO_TELEMETRY} or without vllm:cache_config_info; waiting sequences"
    ),
    "specroute_control_worker_energy_joules": (
        "hosts without RAPL powercap or a readable NVML (then only the info series, "
        "source=absent: REASON); RAPL sub-domains (inside the package figure); DRAM and "
        "platform (psys) domains; the counter is the whole host's, not the server's share"
    ),
    "specroute_control_worker_energy_source_info": NO_TELEMETRY,
    "specroute_control_adapter_acceptance_rate": ADAPTER_EXCLUSIONS,
    "specroute_control_adapter_mean_acceptance_length": ADAPTER_EXCLUSIONS,
    "specroute_control_adapter_drafts": ADAPTER_EXCLUSIONS,
    "specroute_control_snapshot_version": "—",
    "specroute_control_auth_failures": "refusals of a valid token (403 scopes, 413 bodies)",
}


# Ratios on-call reads that are recording rules (dashboards/rules.yml), not metrics a
# process exports: (what it says, entry, exclusions, owner).
DERIVED: dict[str, tuple[str, Entry, str, str]] = {
    "gateway:specroute_contract_equal_share:ratio_rate5m": (
        "Equal share at T=0: of the greedy requests answered by both arms and compared, "
        "the share whose completion tokens were equal. Lossless speculation keeps it at 1; "
        "the automation's output-contract guard judges the same counts per rollout.",
        Entry(
            'rate of specroute_gateway_contract_pairs_total{outcome="equal"}',
            'rate of specroute_gateway_contract_pairs_total{outcome=~"equal|unequal"}',
            "ratio",
            "5 m rates of gateway counters",
            "gateway:specroute_contract_equal_share:ratio_rate5m",
        ),
        "incomplete pairs (an arm failed or timed out) and skipped checks; windows with no "
        "compared pair (no series)",
        "control-plane maintainers (values: the pair version's owners)",
    ),
    "gateway:specroute_contract_sampled_spec_higher_share:ratio_rate5m": (
        "Divergence statistic at T > 0: of the sampled requests answered by both arms "
        "whose completions the target scored differently, the share where the spec "
        "arm's completion had the higher mean log-probability. Lossless speculation "
        "keeps it at 1/2; far from it, one arm samples from another distribution. The "
        "automation's output-contract guard tests the same counts per rollout.",
        Entry(
            'rate of specroute_gateway_contract_pairs_total{outcome="sampled_spec_higher"}',
            "rate of specroute_gateway_contract_pairs_total"
            '{outcome=~"sampled_spec_higher|sampled_spec_lower"}',
            "ratio",
            "5 m rates of gateway counters",
            "gateway:specroute_contract_sampled_spec_higher_share:ratio_rate5m",
        ),
        "ties, incomplete pairs and skipped checks; windows with no compared sampled "
        "pair (no series)",
        "control-plane maintainers (values: the pair version's owners)",
    ),
    "pool:specroute_cpu_seconds_per_accepted_token:ratio_rate5m": (
        "Cost per accepted token: engine CPU seconds of a spec pool per draft token its "
        "engines accepted, per pool and pair version.",
        Entry(
            "rate of specroute_control_worker_cpu_seconds_total (the pool's workers)",
            "rate of specroute_control_worker_accepted_tokens_total (same workers)",
            "CPU seconds per accepted token",
            "5 m rates of heartbeat counters (heartbeat every 5 s)",
            "pool:specroute_cpu_seconds_per_accepted_token:ratio_rate5m",
        ),
        "baseline pools; windows with no accepted token (no series, not +Inf); CPU "
        "outside the servers' process trees (agents, gateway); idle busy-waiting of the "
        "engine core is included, so an idle pool's ratio is high",
        "control-plane maintainers (values: the pair version's owners)",
    ),
    "pool:specroute_cpu_seconds_per_generated_token:ratio_rate5m": (
        "Engine CPU seconds per emitted token, every pool: the baseline pool's figure is "
        "the cost speculation must beat.",
        Entry(
            "rate of specroute_control_worker_cpu_seconds_total (the pool's workers)",
            "rate of specroute_control_worker_generation_tokens_total (same workers)",
            "CPU seconds per token",
            "5 m rates of heartbeat counters (heartbeat every 5 s)",
            "pool:specroute_cpu_seconds_per_generated_token:ratio_rate5m",
        ),
        "windows with no emitted token (no series); CPU outside the servers' process "
        "trees; idle busy-waiting is included",
        "control-plane maintainers",
    ),
    "pool:specroute_target_passes_per_emitted_token:ratio_rate5m": (
        "Target passes per emitted token, as a sequence sees them: each pass (a prefill "
        "or a verify step) emits its accepted draft tokens plus one, so passes = emitted "
        "- accepted. 1.0 on a baseline pool; 1 / mean acceptance length on a spec pool.",
        Entry(
            "rate of specroute_control_worker_generation_tokens_total minus rate of "
            "specroute_control_worker_accepted_tokens_total (0 on baseline pools)",
            "rate of specroute_control_worker_generation_tokens_total (same workers)",
            "target passes per emitted token",
            "5 m rates of heartbeat counters (heartbeat every 5 s)",
            "pool:specroute_target_passes_per_emitted_token:ratio_rate5m",
        ),
        "windows with no emitted token (no series); extra passes of a chunked prefill "
        "(a long prompt takes several, counted as one)",
        "control-plane maintainers (values: the pair version's owners)",
    ),
    "pool:specroute_engine_steps_per_emitted_token:ratio_rate5m": (
        "Engine steps (batched forward passes) per emitted token: below the target passes "
        "per token when the engine batches several sequences into one step.",
        Entry(
            "rate of specroute_control_worker_engine_steps_total",
            "rate of specroute_control_worker_generation_tokens_total (same workers)",
            "engine steps per emitted token",
            "5 m rates of heartbeat counters",
            "pool:specroute_engine_steps_per_emitted_token:ratio_rate5m",
        ),
        "windows with no emitted token (no series); workers without engine telemetry",
        "control-plane maintainers",
    ),
    "pool:specroute_decode_seconds_per_sequence_step:ratio_rate5m": (
        "Wall time of one decode step as a sequence sees it: draft proposal and target "
        "verification together (vLLM 0.32 exports no series for either alone: its timing "
        "series are time_to_first_token, inter_token_latency, "
        "request_time_per_output_token, e2e_request_latency and request_queue / prefill / "
        "decode / inference_time). Compare a spec pool's figure with its baseline pool's: "
        "the difference is the draft's cost plus the extra verified positions.",
        Entry(
            "rate of specroute_control_worker_decode_seconds_total",
            "rate of sequence steps after the first token: emitted - accepted - finished "
            "requests (specroute_control_worker_decode_requests_total)",
            "seconds per sequence step",
            "5 m rates of heartbeat counters",
            "pool:specroute_decode_seconds_per_sequence_step:ratio_rate5m",
        ),
        "requests in flight at the window's edges (their tokens count as emitted, their "
        "decode time when they finish); the prefill; windows without a step (no series)",
        "control-plane maintainers (values: the pair version's owners)",
    ),
    "pool:specroute_kv_blocks_per_running_sequence:avg5m": (
        "KV-cache blocks per running sequence: the time average of the blocks in use over "
        "the time average of the sequences running (NaN on a pool idle for 5 m).",
        Entry(
            'avg_over_time of specroute_control_worker_kv_blocks{state="used"}',
            "avg_over_time of specroute_control_worker_running_sequences (same workers)",
            "blocks per sequence (x block_size tokens)",
            "5 m, sampled at each scrape of the last heartbeat",
            "pool:specroute_kv_blocks_per_running_sequence:avg5m",
        ),
        "workers without engine telemetry; sequences that started and ended between two "
        "heartbeats; the prefix cache's free blocks",
        "control-plane maintainers",
    ),
    "segment:specroute_acceptance_rate_by_response_position:ratio_rate5m": (
        "Acceptance rate by the response position where each verify step began "
        "(position_bucket 0-15, 16-63, 64-255, 256+, unknown): whether drafts hold up "
        "deep in long responses.",
        Entry(
            "rate of specroute_gateway_spec_accepted_tokens_by_response_position_total",
            "rate of specroute_gateway_spec_drafted_tokens_by_response_position_total",
            "ratio 0..1",
            "5 m rates of gateway counters",
            "segment:specroute_acceptance_rate_by_response_position:ratio_rate5m",
        ),
        "the baseline arm; buckets with no drafted token in the window (no series)",
        "gateway maintainers (values: the pair version's owners)",
    ),
    "segment_reason:specroute_depth_switches:rate5m": (
        "Depth by load: how often a segment's depth ladder switches rung, by reason "
        "(load, no_worker, acceptance_reset), the new rungs' k summed. The dashboard "
        "panel shows it per minute (x 60) next to the rung's k "
        "(specroute_gateway_depth_rung_k).",
        Entry(
            "rate of specroute_gateway_depth_switches_total",
            "—",
            "switches per second",
            "5 m rates of gateway counters",
            "60 * segment_reason:specroute_depth_switches:rate5m",
        ),
        "as specroute_gateway_depth_switches_total; a segment whose ladder has never "
        "switched in this process (no series)",
        "gateway maintainers",
    ),
}


def owner_of(name: str) -> str:
    """Who answers for the metric: the component that produces it."""
    if name.startswith("specroute_gateway_spec_"):
        return "gateway maintainers (values: the pair version's owners)"
    if name.startswith("specroute_gateway_"):
        return "gateway maintainers"
    return "control-plane maintainers"


@dataclass(frozen=True)
class MetricInfo:
    name: str
    kind: str
    labels: tuple[str, ...]
    help: str


def gateway_metrics() -> list[MetricInfo]:
    from prometheus_client.metrics import MetricWrapperBase

    from gateway.metrics import GatewayMetrics

    m = GatewayMetrics(top_k_segments=1)
    out = []
    for value in vars(m).values():
        if isinstance(value, MetricWrapperBase):
            out.append(
                MetricInfo(
                    value._name, str(value._type), tuple(value._labelnames), value._documentation
                )
            )
    return out


def control_metrics() -> list[MetricInfo]:
    from control.db import Database
    from control.models import Base
    from control.observability import ControlCollector

    db = Database("sqlite://")
    Base.metadata.create_all(db.engine)
    out = []
    for fam in ControlCollector(lambda: db).collect():
        labels: tuple[str, ...] = tuple(getattr(fam, "_labelnames", ()))
        out.append(MetricInfo(fam.name, fam.type, labels, fam.documentation))
    db.dispose()
    # The counters control keeps in memory (not read from SQL).
    from prometheus_client import CollectorRegistry

    from control.api.request_gate import auth_failure_counter

    counter = auth_failure_counter(CollectorRegistry())
    out.append(
        MetricInfo(counter._name, "counter", tuple(counter._labelnames), counter._documentation)
    )
    return out


def all_metrics() -> list[MetricInfo]:
    return gateway_metrics() + control_metrics()


def metrics_markdown() -> str:
    lines = [
        "# Metrics catalog",
        "",
        "Generated by `python docs/generate.py` from the live metric definitions; do not edit.",
        "Each metric says what it leaves out (exclusions) and who answers for it (owner).",
        "Gateway metrics are served on the gateway's `GET /metrics`; control-plane metrics on",
        "the control plane's `GET /metrics` (read from SQL at scrape time). Counters carry the",
        "`_total` suffix in the exposition. Segment and tenant labels are capped to a top-K",
        "plus `other` so label sets stay bounded.",
        "",
    ]
    for info in all_metrics():
        entry = CATALOG[info.name]
        exposed = info.name + ("_total" if info.kind == "counter" else "")
        lines += [
            f"## `{exposed}`",
            "",
            info.help,
            "",
            "| | |",
            "|---|---|",
            f"| type | {info.kind} |",
            f"| labels | {', '.join(f'`{label}`' for label in info.labels) or '—'} |",
            f"| numerator | {entry.numerator} |",
            f"| denominator | {entry.denominator} |",
            f"| unit | {entry.unit} |",
            f"| window | {entry.window} |",
            f"| exclusions | {EXCLUSIONS[info.name]} |",
            f"| owner | {owner_of(info.name)} |",
            "",
            "```promql",
            entry.promql,
            "```",
            "",
        ]
    lines += ["# Derived ratios (recording rules in dashboards/rules.yml)", ""]
    for rule, (what, entry, exclusions, owner) in DERIVED.items():
        lines += [
            f"## `{rule}`",
            "",
            what,
            "",
            "| | |",
            "|---|---|",
            f"| numerator | {entry.numerator} |",
            f"| denominator | {entry.denominator} |",
            f"| unit | {entry.unit} |",
            f"| window | {entry.window} |",
            f"| exclusions | {exclusions} |",
            f"| owner | {owner} |",
            "",
        ]
    return "\n".join(lines)


def _env_rows(
    cls: type[BaseModel], prefix: str, path: str = ""
) -> list[tuple[str, str, str, str, str]]:
    """(variable, attribute path, type, default, description) per setting; a
    settings group's fields under the group's own prefix."""
    from specwire.settings import SettingsGroup

    rows = []
    for name, field in cls.model_fields.items():
        env = (prefix + name).upper()
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, SettingsGroup):
            group_prefix = str(ann.model_config.get("env_prefix", ""))
            rows += _env_rows(ann, group_prefix, f"{path}{name}.")
            continue
        if (
            isinstance(ann, type)
            and issubclass(ann, BaseModel)
            and not issubclass(ann, BaseSettings)
        ):
            rows += _env_rows(ann, env + "__", f"{path}{name}.")
            continue
        if field.default_factory is not None:
            default = "(computed)"
        else:
            value: Any = field.default
            if isinstance(value, SecretStr):
                value = "(dev default; set in production)"
            default = "unset" if value is None else f"`{value}`"
        type_name = getattr(ann, "__name__", str(ann)).replace("typing.", "").replace("|", "or")
        description = (field.description or "").replace("|", "\\|")
        rows.append((env, path + name, type_name, default, description))
    return rows


def _renamed_rows(cls: type[BaseSettings], prefix: str) -> list[tuple[str, str]]:
    """(old variable, new variable) for the names kept one release with a warning."""
    from specwire.settings import PlaneSettings

    pairs = [
        ((prefix + old).upper(), (prefix + new).upper())
        for old, new in getattr(cls, "renamed", {}).items()
    ]
    if issubclass(cls, PlaneSettings):
        for group in cls.groups().values():
            group_prefix = str(group.model_config.get("env_prefix", ""))
            pairs += [
                ((group_prefix + old).upper(), (group_prefix + new).upper())
                for old, new in group.renamed.items()
            ]
    return sorted(pairs)


def settings_classes() -> list[tuple[str, type[BaseSettings], str]]:
    from control.settings import ControlSettings
    from dashboards.rules import RulesSettings
    from gateway.settings import GatewaySettings

    return [
        ("Control plane and automation", ControlSettings, "SPECROUTE_"),
        ("Gateway", GatewaySettings, "SPECROUTE_GATEWAY_"),
        ("Alert rules (`python -m dashboards.rules`)", RulesSettings, "SPECROUTE_"),
    ]


def configuration_markdown() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated by `python docs/generate.py` from the settings classes; do not edit.",
        "Every setting is an environment variable (a `.env` file is not read). The",
        "settings are grouped by subsystem (`setting` is the attribute path in code,",
        "e.g. `settings.quota.redis_failure`); a group's variables keep the flat names,",
        "which are also the keywords the settings classes take. Units are suffixes:",
        "`_s` seconds, `_ms` milliseconds, `_bytes`, `_days`.",
        "",
    ]
    for title, cls, prefix in settings_classes():
        lines += [f"## {title} (`{cls.__module__}.{cls.__name__}`)", ""]
        lines += [
            "| variable | setting | type | default | description |",
            "|---|---|---|---|---|",
        ]
        for env, path, type_name, default, desc in _env_rows(cls, prefix):
            lines.append(f"| `{env}` | `{path}` | {type_name} | {default} | {desc} |")
        lines.append("")
        renamed = _renamed_rows(cls, prefix)
        if renamed:
            lines += [
                "Renamed to the one unit convention; the old variables (and keywords) still",
                "work in this release, with a DeprecationWarning:",
                "",
                *(f"- `{old}` → `{new}`" for old, new in renamed),
                "",
            ]
    return "\n".join(lines)


def engine_args_markdown() -> str:
    from specwire.engine_args import ALLOWED_ENGINE_ARGS, RESERVED_ENGINE_FLAGS

    lines = [
        "# Pool engine arguments",
        "",
        "Generated by `python docs/generate.py` from `specwire/engine_args.py`; do not",
        "edit. A pool's `engine_args` may set only these vLLM server flags, with these values.",
        "Control refuses anything else with 422 (`details.flag` names the flag; codes",
        "`engine_arg_reserved`, `engine_arg_not_allowed`, `engine_arg_invalid`,",
        "`engine_arg_outside_model_roots`), and the launcher (`specroute engine up`) refuses",
        "it again before it builds the command line, whatever the database holds.",
        "",
        "Keys may be written `max-model-len`, `max_model_len` or `--max-model-len`; two",
        "spellings of one flag are refused. `true`/`false` render as `--flag`/`--no-flag`.",
        "Adapter paths (`lora-modules`) must resolve (after symlinks and `..`) inside the",
        "model roots: control's `SPECROUTE_MODEL_ROOTS`; on an engine host the same",
        "variable (a JSON list), else the defaults (`models` under the working directory,",
        "the bundled tiny pair, `$SPECROUTE_TINY_PAIR_DIR`).",
        "",
        "Everything else vLLM 0.32 accepts is refused: in particular every flag that loads",
        "a path, a Python class, a plugin or a template, reaches a network address or",
        "carries a secret (`trust-remote-code`, `worker-extension-cls`, `tokenizer`,",
        "`chat-template`, `allowed-local-media-path`, `*-config` JSON, ...).",
        "",
        "| flag | values | what it does |",
        "|---|---|---|",
    ]
    for flag, spec in ALLOWED_ENGINE_ARGS.items():
        lines.append(f"| `--{flag}` | {spec.value_text()} | {spec.description} |")
    lines += [
        "",
        "## Reserved: set by the launcher",
        "",
        ", ".join(f"`--{flag}`" for flag in sorted(RESERVED_ENGINE_FLAGS)),
        "",
    ]
    return "\n".join(lines)


OUTPUTS = {
    HERE / "configuration.md": configuration_markdown,
    HERE / "engine-args.md": engine_args_markdown,
    HERE / "metrics.md": metrics_markdown,
}


if __name__ == "__main__":
    for path, render in OUTPUTS.items():
        path.write_text(render())
        print(f"wrote {path}")
