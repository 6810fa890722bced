"""The engine telemetry the agents heartbeat (specwire.EngineTelemetry), as
Prometheus families: engine steps, decode time, KV blocks and the host's energy.

vLLM 0.32 exports no draft or verification time; the decode seconds cover both, and
the recording rules in dashboards/rules.yml derive the per-step and per-token ratios
from these counters (docs/metrics.md).
"""

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.orm import Session

from control import observability_queries as q

PREFIX = "specroute_control_"
_SINCE = "since the server started (restarts with it), as its agent last reported"


def engine_telemetry_families(s: Session) -> Iterator[Metric]:
    labels = ["pool", "worker", "pair_version"]
    steps = CounterMetricFamily(
        PREFIX + "worker_engine_steps",
        "Engine steps (batched target forward passes: the sample count of "
        f"vllm:iteration_tokens_total), {_SINCE}. Unit: steps.",
        labels=labels,
    )
    decode = CounterMetricFamily(
        PREFIX + "worker_decode_seconds",
        "First-to-last token time summed over the engine's finished requests "
        f"(vllm:request_decode_time_seconds_sum: draft and verification together), {_SINCE}. "
        "Unit: seconds.",
        labels=labels,
    )
    decoded = CounterMetricFamily(
        PREFIX + "worker_decode_requests",
        f"Finished requests behind worker_decode_seconds (its _count), {_SINCE}. Unit: requests.",
        labels=labels,
    )
    blocks = GaugeMetricFamily(
        PREFIX + "worker_kv_blocks",
        "KV-cache blocks of the worker's engines at its last heartbeat: state=used "
        "(vllm:kv_cache_usage_perc x num_gpu_blocks) or total (num_gpu_blocks of "
        "vllm:cache_config_info). Unit: blocks.",
        labels=[*labels, "state"],
    )
    running = GaugeMetricFamily(
        PREFIX + "worker_running_sequences",
        "Sequences the worker's engines were running at its last heartbeat "
        "(vllm:num_requests_running), the denominator of KV blocks per sequence. "
        "Unit: sequences.",
        labels=labels,
    )
    energy = CounterMetricFamily(
        PREFIX + "worker_energy_joules",
        "Host energy the worker's agent measured since it started (RAPL package domains, "
        "NVML devices; wraps unfolded): the whole host's, not the server's share. Only "
        "where the host exposes a counter. Unit: joules.",
        labels=labels,
    )
    source = GaugeMetricFamily(
        PREFIX + "worker_energy_source_info",
        "1 per worker, labelled with where its energy figure comes from (rapl:..., "
        "nvml:...) or 'absent: REASON' when the host exposes no counter. Unit: info.",
        labels=[*labels, "source"],
    )
    for pool, worker, pv, n_running, t in q.worker_engine_telemetry(s):
        if not t:
            continue
        values = [pool, worker, "none" if pv is None else str(pv)]
        if t.get("engine_steps") is not None:
            steps.add_metric(values, float(t["engine_steps"]))
        if t.get("decode_seconds") is not None:
            decode.add_metric(values, float(t["decode_seconds"]))
        if t.get("decode_requests") is not None:
            decoded.add_metric(values, float(t["decode_requests"]))
        if t.get("kv_blocks_total") is not None:
            blocks.add_metric([*values, "total"], float(t["kv_blocks_total"]))
            blocks.add_metric([*values, "used"], float(t.get("kv_blocks_used") or 0))
            running.add_metric(values, float(n_running))
        if t.get("energy_joules") is not None:
            energy.add_metric(values, float(t["energy_joules"]))
        source.add_metric([*values, str(t.get("energy_source") or "absent: not reported")], 1.0)
    yield from (steps, decode, decoded, blocks, running, energy, source)
