"""Builds the Grafana dashboard JSON from one list of panels.

`python dashboards/generate.py` rewrites dashboards/specroute.json; a test
checks the committed file is current and that every expression returns series
from a real Prometheus scraping a gateway and a control plane.
"""

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "specroute.json"

# (title, unit, [(expr, legend)], description)
PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    (
        "Draft acceptance rate by segment",
        "percentunit",
        [("segment:specroute_acceptance_rate:ratio_rate5m", "{{segment}} pv{{pair_version}}")],
        "Accepted / drafted tokens on the spec arm (5 m rate).",
    ),
    (
        "Acceptance by draft position",
        "percentunit",
        [
            (
                "sum by (segment, position) "
                "(rate(specroute_gateway_spec_accepted_tokens_by_position_total[5m])) "
                "/ ignoring (position) group_left "
                "sum by (segment) (rate(specroute_gateway_spec_drafts_total[5m]))",
                "{{segment}} pos {{position}}",
            )
        ],
        "Share of drafts whose token at this position was accepted.",
    ),
    (
        "Mean acceptance length",
        "short",
        [("segment:specroute_mean_acceptance_length:rate5m", "{{segment}}")],
        "1 + accepted / drafts: tokens emitted per target pass.",
    ),
    (
        "Target passes per emitted token (spec arm)",
        "short",
        [("segment:specroute_target_passes_per_token:ratio_rate5m", "{{segment}}")],
        "Drafts (verification passes) / completion tokens; 1.0 means no gain.",
    ),
    (
        "TPOT p50: spec vs baseline",
        "s",
        [("segment_arm:specroute_tpot_seconds:p50_5m", "{{segment}} {{arm}}")],
        "Time per output token after the first, median over 5 m.",
    ),
    (
        "TTFT p50: spec vs baseline",
        "s",
        [("segment_arm:specroute_ttft_seconds:p50_5m", "{{segment}} {{arm}}")],
        "Time to first token at the gateway, median over 5 m.",
    ),
    (
        "TPOT p95 / p99: spec vs baseline",
        "s",
        [
            ("segment_arm:specroute_tpot_seconds:p95_5m", "p95 {{segment}} {{arm}}"),
            ("segment_arm:specroute_tpot_seconds:p99_5m", "p99 {{segment}} {{arm}}"),
        ],
        "Tail time per output token over 5 m, next to the median above.",
    ),
    (
        "TTFT p95 / p99: spec vs baseline",
        "s",
        [
            ("segment_arm:specroute_ttft_seconds:p95_5m", "p95 {{segment}} {{arm}}"),
            ("segment_arm:specroute_ttft_seconds:p99_5m", "p99 {{segment}} {{arm}}"),
        ],
        "Tail time to first token over 5 m, next to the median above.",
    ),
    (
        "Full-proposal acceptance and correction rate",
        "percentunit",
        [
            ("segment:specroute_full_proposal_acceptance:ratio_rate5m", "full {{segment}}"),
            ("segment:specroute_correction_rate:ratio_rate5m", "corrected {{segment}}"),
        ],
        "Drafts accepted whole (all k tokens) / drafts, and 1 minus that: drafts the "
        "target corrected.",
    ),
    (
        "Arm shares by segment",
        "percentunit",
        [("segment_arm:specroute_request_share:rate5m", "{{segment}} {{arm}}")],
        "Share of each segment's finished requests served by each arm.",
    ),
    (
        "Routing decisions by reason",
        "reqps",
        [
            (
                "sum by (reason, arm) (rate(specroute_gateway_decisions_total[5m]))",
                "{{reason}} → {{arm}}",
            )
        ],
        "Why requests went where they went.",
    ),
    (
        "Flips over time",
        "short",
        [("sum by (kind) (increase(specroute_control_decisions_total[15m]))", "{{kind}}")],
        "Rollout flips (decision rows) by kind, per 15 m.",
    ),
    (
        "Spec exposure by rollout",
        "percent",
        [("specroute_control_rollout_spec_percentage", "{{rollout}}")],
        "Share of each segment's cohorts on the spec arm.",
    ),
    (
        "KV-cache usage per pool",
        "percentunit",
        [("max by (pool) (specroute_control_worker_kv_cache_usage)", "{{pool}}")],
        "Highest KV-cache usage reported by the pool's workers.",
    ),
    (
        "Queue depth per pool",
        "short",
        [("sum by (pool, state) (specroute_control_pool_queue_depth)", "{{pool}} {{state}}")],
        "Requests running and waiting in the pool's engines (healthy workers' heartbeats).",
    ),
    (
        "Engine CPU-seconds per token",
        "s",
        [
            (
                "pool:specroute_cpu_seconds_per_accepted_token:ratio_rate5m",
                "per accepted draft token {{pool}} pv{{pair_version}}",
            ),
            (
                "pool:specroute_cpu_seconds_per_generated_token:ratio_rate5m",
                "per emitted token {{pool}}",
            ),
        ],
        "CPU seconds of the pool's vLLM process trees (idle busy-waiting included) per "
        "draft token accepted and per token emitted, 5 m rates of the heartbeat counters.",
    ),
    (
        "Acceptance by response position",
        "percentunit",
        [
            (
                "segment:specroute_acceptance_rate_by_response_position:ratio_rate5m",
                "{{segment}} pos {{position_bucket}}",
            )
        ],
        "Accepted / drafted tokens by the response position (token index) where the verify "
        "step began; unknown: engines that sent no per-step arrays.",
    ),
    (
        "Target passes and engine steps per emitted token (engines)",
        "short",
        [
            (
                "pool:specroute_target_passes_per_emitted_token:ratio_rate5m",
                "passes per token {{pool}}",
            ),
            (
                "pool:specroute_engine_steps_per_emitted_token:ratio_rate5m",
                "engine steps per token {{pool}}",
            ),
        ],
        "From the engines' counters: (emitted - accepted) / emitted, 1.0 without "
        "speculation; and batched forward steps per emitted token.",
    ),
    (
        "Decode time per sequence step (draft + verification)",
        "s",
        [("pool:specroute_decode_seconds_per_sequence_step:ratio_rate5m", "{{pool}}")],
        "vLLM 0.32 exports no draft or verification time alone: decode seconds / steps "
        "after the first token. Spec minus baseline: the draft's cost per step.",
    ),
    (
        "KV blocks per running sequence",
        "short",
        [("pool:specroute_kv_blocks_per_running_sequence:avg5m", "{{pool}}")],
        "Time-averaged blocks in use / sequences running, per pool (5 m).",
    ),
    (
        "Host power per worker (RAPL / NVML)",
        "watt",
        [
            (
                "max by (pool, worker) (rate(specroute_control_worker_energy_joules_total[5m]))",
                "{{pool}} {{worker}}",
            )
        ],
        "Host energy rate from the agent's RAPL/NVML counter; empty where the host exposes "
        "none (see the energy source panel).",
    ),
    (
        "Energy source per worker",
        "short",
        [("specroute_control_worker_energy_source_info", "{{worker}}: {{source}}")],
        "Where each worker's energy figure comes from, or why it is absent.",
    ),
    (
        "Healthy workers per pool",
        "short",
        [('sum by (pool) (specroute_control_pool_workers{health="healthy"})', "{{pool}}")],
        "Workers whose last heartbeat was healthy.",
    ),
    (
        "Snapshot age at gateways",
        "s",
        [("specroute_gateway_snapshot_age_seconds", "{{instance}}")],
        "Past the TTL a gateway fails safe to the baseline arm.",
    ),
    (
        "Quota rejections",
        "reqps",
        [("sum by (tenant) (rate(specroute_gateway_quota_rejections_total[5m]))", "{{tenant}}")],
        "429s from spent weighted-token budgets.",
    ),
    (
        "Refusals before routing by status and code",
        "reqps",
        [
            (
                "sum by (status, code) (rate(specroute_gateway_refusals_total[5m]))",
                "{{status}} {{code}}",
            )
        ],
        "Requests answered with a typed error before a routing decision (bad JSON, body "
        "too large, unknown encoding or model, bad key, 404/405; 499: the client left). "
        "Auth failures are also in their own counter; quota 429s are not here.",
    ),
    (
        "Error ratio by arm",
        "percentunit",
        [("segment_arm:specroute_error_ratio:rate5m", "{{segment}} {{arm}}")],
        "Errors / finished requests (5 m rate).",
    ),
    (
        "Depth ladder: current rung k",
        "short",
        [("max by (segment) (specroute_gateway_depth_rung_k)", "{{segment}}")],
        "The depth k a segment's depth ladder sends spec requests to now; each gateway "
        "process keeps its own ladder state, the panel shows the highest.",
    ),
    (
        "Depth ladder switches per minute by reason",
        "short",
        [("60 * segment_reason:specroute_depth_switches:rate5m", "{{segment}} {{reason}}")],
        "Switches of a segment's depth ladder to another rung, by reason (load, no_worker, "
        "acceptance_reset): the 5 m rate, per minute.",
    ),
]


def panel(
    i: int, title: str, unit: str, targets: list[tuple[str, str]], desc: str
) -> dict[str, Any]:
    return {
        "id": i + 1,
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
            for j, (expr, legend) in enumerate(targets)
        ],
    }


def build() -> dict[str, Any]:
    return {
        "uid": "specroute-overview",
        "title": "specroute: speculative decoding overview",
        "tags": ["specroute"],
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                }
            ]
        },
        "panels": [panel(i, *p) for i, p in enumerate(PANELS)],
    }


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


if __name__ == "__main__":
    OUTPUT.write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUTPUT}")
