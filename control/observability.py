"""Prometheus metrics of the control plane, read from SQL at scrape time.

The gateway exports what it measures per request; the control plane exports the
state it owns: rollouts (state, exposure), decisions (flips) by kind, pool worker
health and KV-cache usage from the agents' heartbeats, and the snapshot version.
A custom collector queries the database on each scrape (a handful of small
aggregate queries), so the numbers can never drift from the rows.
"""

import hmac
from collections.abc import Callable, Iterator
from datetime import timedelta

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from sqlalchemy.orm import Session

from control import observability_queries as q
from control.clock import now
from control.db import Database
from control.errors import Unauthorized
from control.observability_engine import engine_telemetry_families
from control.requests.acceptance import acceptance_by_adapter
from control.snapshot.version import current_snapshot_version
from specwire import (
    DEFAULT_TPOT_SLO_S,
    DEFAULT_TTFT_SLO_S,
    OVERFLOW_LABEL,
    UNSEGMENTED_LABEL,
    RolloutState,
)

PREFIX = "specroute_control_"
# Acceptance per adapter is exported over this trailing window of request records.
ADAPTER_WINDOW = timedelta(hours=1)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ControlCollector(Collector):
    def __init__(self, database: Callable[[], Database]) -> None:
        # NOTE: resolved per scrape so the collector follows app.state.database.
        self.database = database

    def collect(self) -> Iterator[Metric]:
        with self.database().session() as s:
            state = GaugeMetricFamily(
                PREFIX + "rollout_state",
                "1 for the state each rollout is in, 0 for the others. Unit: boolean.",
                labels=["rollout", "segment", "state"],
            )
            pct = GaugeMetricFamily(
                PREFIX + "rollout_spec_percentage",
                "Share of the segment's cohorts exposed to the spec arm (0 unless the "
                "state exposes). Unit: percent.",
                labels=["rollout", "segment"],
            )
            for rollout, segment, current, percentage in q.rollout_states(s):
                for st in RolloutState:
                    state.add_metric([rollout, segment, st.value], 1.0 if st == current else 0.0)
                exposing = RolloutState(current) in {
                    RolloutState.CANARY,
                    RolloutState.RAMPING,
                    RolloutState.FULL,
                    RolloutState.PROBATION,
                }
                pct.add_metric([rollout, segment], percentage if exposing else 0.0)
            yield state
            yield pct

            floor = GaugeMetricFamily(
                PREFIX + "rollout_min_acceptance_rate",
                "The acceptance rate an exposing rollout's guard tests against "
                "(min_acceptance_rate of its threshold set), for alerts on the same "
                "threshold. Unit: ratio 0..1.",
                labels=["rollout", "segment"],
            )
            for rollout, segment, minimum in q.rollout_acceptance_thresholds(s):
                floor.add_metric([rollout, segment], minimum)
            yield floor

            flips = CounterMetricFamily(
                PREFIX + "decisions",
                "Rollout flips stored as decision rows, by kind and actor "
                "(automation|admin:...). Unit: decisions. Flip rate: "
                "sum by (kind) (increase(specroute_control_decisions_total[1h])).",
                labels=["kind", "to_state", "actor_type"],
            )
            for kind, to_state, actor, n in q.decision_counts(s):
                kind_of_actor = "automation" if actor.startswith("automation") else "admin"
                flips.add_metric([kind, to_state, kind_of_actor], float(n))
            yield flips

            workers = GaugeMetricFamily(
                PREFIX + "pool_workers",
                "Registered workers per pool by health as last reported (healthy|unhealthy). "
                "Unit: workers. Spec pool down: healthy == 0.",
                labels=["pool", "kind", "health"],
            )
            kv = GaugeMetricFamily(
                PREFIX + "worker_kv_cache_usage",
                "KV-cache usage a worker's agent last reported (vLLM kv_cache_usage_perc). "
                "Unit: ratio 0..1.",
                labels=["pool", "worker"],
            )
            queue = GaugeMetricFamily(
                PREFIX + "pool_queue_depth",
                "Requests the pool's healthy workers last reported running or waiting in the "
                "engine (vLLM num_requests_running / num_requests_waiting), summed. "
                "Unit: requests.",
                labels=["pool", "kind", "state"],
            )
            counts = q.worker_health_counts(s)
            depth = q.pool_queue_depth(s)
            for pool_id, name, pair_version_id in q.pools(s):
                kind = "baseline" if pair_version_id is None else "spec"
                workers.add_metric([name, kind, "healthy"], counts.get((pool_id, True), 0))
                workers.add_metric([name, kind, "unhealthy"], counts.get((pool_id, False), 0))
                running, waiting = depth.get(pool_id, (0, 0))
                queue.add_metric([name, kind, "running"], running)
                queue.add_metric([name, kind, "waiting"], waiting)
            for pool_name, worker_id, usage in q.worker_kv_usage(s):
                kv.add_metric([pool_name, worker_id], usage)
            yield workers
            yield queue
            yield kv

            yield _segment_slos(s)
            yield from _engine_cost(s)
            yield from engine_telemetry_families(s)
            yield from _adapter_acceptance(s)

            version = GaugeMetricFamily(
                PREFIX + "snapshot_version",
                "Current policy snapshot version in the database. Unit: version number.",
            )
            version.add_metric([], float(current_snapshot_version(s)))
            yield version


def _segment_slos(s: Session) -> Metric:
    """Each segment's latency SLO targets, labelled with the gateway histogram bucket
    (`le`, formatted as the gateway's exposition formats it) that counts the requests
    within target: the burn-rate rules select that bucket with `and on (segment, le)`.
    The gateway's catch-all labels (no segment matched, beyond its top K) get the
    default targets."""
    slo = GaugeMetricFamily(
        PREFIX + "segment_latency_slo_seconds",
        "Latency SLO target of each segment: 95 % of its requests within this many "
        "seconds (kind=ttft|tpot); le is the gateway histogram bucket with that edge. "
        "Unit: seconds.",
        labels=["segment", "kind", "le"],
    )
    targets = {name: (ttft, tpot) for name, ttft, tpot in q.segment_slos(s)}
    for label in (UNSEGMENTED_LABEL, OVERFLOW_LABEL):
        targets.setdefault(label, (DEFAULT_TTFT_SLO_S, DEFAULT_TPOT_SLO_S))
    for name, (ttft, tpot) in sorted(targets.items()):
        slo.add_metric([name, "ttft", _le(ttft)], ttft)
        slo.add_metric([name, "tpot", _le(tpot)], tpot)
    return slo


def _engine_cost(s: Session) -> Iterator[Metric]:
    """The counters behind the cost per accepted token, per worker as its last heartbeat
    reported them; Prometheus divides their rates (pool:* recording rules)."""
    labels = ["pool", "worker", "pair_version"]
    since = "since the server started (restarts with it), as its agent last reported"
    cpu = CounterMetricFamily(
        PREFIX + "worker_cpu_seconds",
        f"User + system CPU seconds of the worker's vLLM process tree, {since}. Unit: CPU seconds.",
        labels=labels,
    )
    accepted = CounterMetricFamily(
        PREFIX + "worker_accepted_tokens",
        f"Draft tokens the worker's engine accepted (vllm:spec_decode_num_accepted_tokens), "
        f"{since}; spec workers only. Unit: tokens.",
        labels=labels,
    )
    generated = CounterMetricFamily(
        PREFIX + "worker_generation_tokens",
        f"Tokens the worker's engine emitted (vllm:generation_tokens), {since}. Unit: tokens.",
        labels=labels,
    )
    for pool, worker, pv, cpu_s, accepted_n, generated_n in q.worker_cost_counters(s):
        values = [pool, worker, "none" if pv is None else str(pv)]
        if cpu_s is not None:
            cpu.add_metric(values, cpu_s)
        if accepted_n is not None:
            accepted.add_metric(values, float(accepted_n))
        if generated_n is not None:
            generated.add_metric(values, float(generated_n))
    yield cpu
    yield accepted
    yield generated


def _le(seconds: float) -> str:
    """A bucket edge as the gateway's exposition spells it in `le` (prometheus_client's
    own formatter, so "1.0" and "0.3981072" match character for character)."""
    return str(floatToGoString(seconds))  # type: ignore[no-untyped-call]


def _adapter_acceptance(s: Session) -> Iterator[Metric]:
    """Acceptance per LoRA adapter (adapter="" is the base model) and pair, over the
    last hour of request records."""
    window = "over the request records received in the last hour"
    rate = GaugeMetricFamily(
        PREFIX + "adapter_acceptance_rate",
        f"Accepted / drafted tokens of the requests naming each adapter, {window}. "
        "Unit: ratio 0..1.",
        labels=["adapter", "pair"],
    )
    length = GaugeMetricFamily(
        PREFIX + "adapter_mean_acceptance_length",
        f"1 + accepted tokens per draft of the requests naming each adapter, {window}. "
        "Unit: tokens per target step.",
        labels=["adapter", "pair"],
    )
    drafts = GaugeMetricFamily(
        PREFIX + "adapter_drafts",
        f"Drafts (speculation steps) behind those two, {window}. Unit: drafts.",
        labels=["adapter", "pair"],
    )
    for e in acceptance_by_adapter(s, since=now() - ADAPTER_WINDOW):
        if e.acceptance_rate is None or e.mean_acceptance_length is None:
            continue
        labels = [e.adapter or "", e.pair or ""]
        rate.add_metric(labels, e.acceptance_rate)
        length.add_metric(labels, e.mean_acceptance_length)
        drafts.add_metric(labels, float(e.drafts))
    yield rate
    yield length
    yield drafts


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    token = request.app.state.settings.exposure.metrics_token
    if token is not None:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        # NOTE: constant-time, as for every other token.
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.get_secret_value().encode()
        ):
            raise Unauthorized("/metrics needs the metrics token (SPECROUTE_METRICS_TOKEN)")
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)


def install_metrics(app: FastAPI) -> CollectorRegistry:
    """Serve the control plane's metrics on GET /metrics (no secrets, no text; behind
    SPECROUTE_METRICS_TOKEN when it is set)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControlCollector(lambda: app.state.database))
    app.state.metrics_registry = registry
    app.include_router(router)
    return registry
