"""Read the figures a heartbeat carries from a vLLM server's Prometheus /metrics.

vLLM names (0.32): `vllm:kv_cache_usage_perc` (a fraction 0..1, despite the
name), `vllm:num_requests_running`, `vllm:num_requests_waiting`, and, only on a
speculating server, `vllm:spec_decode_num_drafts_total`,
`..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
`..._num_accepted_tokens_per_pos_total{position="i"}`; `vllm:generation_tokens_total`
(tokens the engine emitted, on any server). Samples carry an
`engine` label; several engines (data parallel) in one server are summed.

Per step and memory (issue #25 item 4): `vllm:iteration_tokens_total` is a
histogram observed once per engine step, so its `_count` counts engine steps
(batched target forward passes); `vllm:request_decode_time_seconds` sums each
finished request's first-to-last token time; `vllm:cache_config_info` (a gauge
at 1) carries `num_gpu_blocks` and `block_size` in its labels. vLLM 0.32 has no
series for draft time or verification time separately.
"""

from collections import defaultdict
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from specwire import SpecCounters

KV_CACHE = "vllm:kv_cache_usage_perc"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATED = "vllm:generation_tokens_total"
ENGINE_STEPS = "vllm:iteration_tokens_total_count"
DECODE_SECONDS = "vllm:request_decode_time_seconds_sum"
DECODE_REQUESTS = "vllm:request_decode_time_seconds_count"
CACHE_CONFIG = "vllm:cache_config_info"
_SUMMED = (RUNNING, WAITING, DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATED)
_STEP_SERIES = (ENGINE_STEPS, DECODE_SECONDS, DECODE_REQUESTS)


@dataclass(frozen=True)
class EngineMetrics:
    kv_cache_usage: float
    running: int
    waiting: int
    spec: SpecCounters | None  # None: the server does not speculate
    generation_tokens: int | None = None  # None: the server exports no such counter
    engine_steps: int | None = None  # None: no vllm:iteration_tokens_total
    decode_seconds: float | None = None
    decode_requests: int | None = None
    kv_blocks_total: int | None = None  # None: no vllm:cache_config_info
    kv_blocks_used: int | None = None
    kv_block_size: int | None = None

    @property
    def speculating(self) -> bool:
        return self.spec is not None


def parse_engine_metrics(text: str) -> EngineMetrics:
    sums: dict[str, float] = defaultdict(float)
    kv_usages: list[float] = []
    usage_by_engine: dict[str, float] = {}
    blocks_by_engine: dict[str, int] = {}
    block_sizes: set[int] = set()
    per_position: dict[int, float] = defaultdict(float)
    seen: set[str] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name == KV_CACHE:
                kv_usages.append(sample.value)
                usage_by_engine[sample.labels.get("engine", "")] = sample.value
            elif name == ACCEPTED_PER_POS:
                per_position[int(sample.labels["position"])] += sample.value
            elif name in _SUMMED or name in _STEP_SERIES:
                sums[name] += sample.value
            elif name == CACHE_CONFIG:
                blocks = _int_label(sample.labels, "num_gpu_blocks")
                size = _int_label(sample.labels, "block_size")
                if blocks is None:
                    continue
                blocks_by_engine[sample.labels.get("engine", "")] = blocks
                if size is not None:
                    block_sizes.add(size)
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
    used: int | None = None
    if blocks_by_engine:
        used = round(
            sum(
                min(max(usage_by_engine.get(e, 0.0), 0.0), 1.0) * n
                for e, n in blocks_by_engine.items()
            )
        )
    return EngineMetrics(
        kv_cache_usage=min(max(kv, 0.0), 1.0),
        running=int(sums[RUNNING]),
        waiting=int(sums[WAITING]),
        spec=spec,
        generation_tokens=int(sums[GENERATED]) if GENERATED in seen else None,
        engine_steps=int(sums[ENGINE_STEPS]) if ENGINE_STEPS in seen else None,
        decode_seconds=sums[DECODE_SECONDS] if DECODE_SECONDS in seen else None,
        decode_requests=int(sums[DECODE_REQUESTS]) if DECODE_REQUESTS in seen else None,
        kv_blocks_total=sum(blocks_by_engine.values()) if blocks_by_engine else None,
        kv_blocks_used=used,
        # NOTE: engines of one server share the cache config; several sizes: not one figure.
        kv_block_size=next(iter(block_sizes)) if len(block_sizes) == 1 else None,
    )


def _int_label(labels: dict[str, str], name: str) -> int | None:
    """A label holding a count ("819"), or None when it is absent or "None"."""
    value = labels.get(name, "")
    return int(value) if value.isdigit() else None
