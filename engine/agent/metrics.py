"""Read the figures a heartbeat carries from a vLLM server's Prometheus /metrics.

vLLM names (0.32): `vllm:kv_cache_usage_perc` (a fraction 0..1, despite the
name), `vllm:num_requests_running`, `vllm:num_requests_waiting`, and, only on a
speculating server, `vllm:spec_decode_num_drafts_total`,
`..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
`..._num_accepted_tokens_per_pos_total{position="i"}`; `vllm:generation_tokens_total`
(tokens the engine emitted, on any server). Samples carry an
`engine` label; several engines (data parallel) in one server are summed.
"""

from collections import defaultdict
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from control.contract import SpecCounters

KV_CACHE = "vllm:kv_cache_usage_perc"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATED = "vllm:generation_tokens_total"


@dataclass(frozen=True)
class EngineMetrics:
    kv_cache_usage: float
    running: int
    waiting: int
    spec: SpecCounters | None  # None: the server does not speculate
    generation_tokens: int | None = None  # None: the server exports no such counter

    @property
    def speculating(self) -> bool:
        return self.spec is not None


def parse_engine_metrics(text: str) -> EngineMetrics:
    sums: dict[str, float] = defaultdict(float)
    kv_usages: list[float] = []
    per_position: dict[int, float] = defaultdict(float)
    seen: set[str] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name == KV_CACHE:
                kv_usages.append(sample.value)
            elif name == ACCEPTED_PER_POS:
                per_position[int(sample.labels["position"])] += sample.value
            elif name in (RUNNING, WAITING, DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATED):
                sums[name] += sample.value
            else:
                continue
            seen.add(name)
    spec: SpecCounters | None = None
    if DRAFTS in seen:
        positions = range(max(per_position) + 1) if per_position else range(0)
        spec = SpecCounters(
            num_drafts=int(sums[DRAFTS]),
            num_draft_tokens=int(sums[DRAFT_TOKENS]),
            num_accepted_tokens=int(sums[ACCEPTED]),
            accepted_per_position=[int(per_position[i]) for i in positions],
        )
    # NOTE: the busiest engine decides memory pressure, not the average.
    kv = max(kv_usages, default=0.0)
    return EngineMetrics(
        kv_cache_usage=min(max(kv, 0.0), 1.0),
        running=int(sums[RUNNING]),
        waiting=int(sums[WAITING]),
        spec=spec,
        generation_tokens=int(sums[GENERATED]) if GENERATED in seen else None,
    )
