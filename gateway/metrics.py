"""Prometheus metrics of the gateway, on their own registry, with bounded labels.

Every metric is documented once, here, in its help text: what is counted (the
numerator), per what (denominator or unit), and the PromQL that reads it; a
metrics catalog is generated from these strings. Label values that come from
traffic (segment, tenant) are capped to the top K by traffic plus ``other``,
so a flood of new segments or tenants cannot grow the exposition without bound.
"""

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.metric_files import forget_dead_processes, multiprocess_dir
from gateway.telemetry.positions import POSITION_LABELS, UNKNOWN
from gateway.telemetry.record import RequestRecord
from specwire import LATENCY_BUCKETS_S, OVERFLOW_LABEL, UNSEGMENTED_LABEL, Arm
from specwire.auth_throttle import AUTH_FAILURE_REASONS

PREFIX = "specroute_gateway_"
OTHER = OVERFLOW_LABEL
NONE = UNSEGMENTED_LABEL

__all__ = ["LATENCY_BUCKETS_S", "NONE", "OTHER", "GatewayMetrics", "TopKLabels"]


class TopKLabels:
    """Maps raw label values to at most k admitted values plus ``other``.

    Values are admitted while slots are free; afterwards a value displaces the
    least-trafficked admitted one once its (decayed) count exceeds that one's by
    ``hysteresis``, so the admitted set follows the top K by traffic without
    flapping. ``on_evict`` removes the evicted value's series, which keeps the
    number of distinct values in the exposition at most k + 1.
    """

    def __init__(
        self,
        k: int,
        on_evict: Callable[[str], None] | None = None,
        *,
        hysteresis: float = 2.0,
        decay_every: int = 10_000,
        max_tracked: int | None = None,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        self.k = k
        self.on_evict = on_evict
        self.hysteresis = hysteresis
        self.decay_every = decay_every
        self.max_tracked = max_tracked or 16 * k
        self.admitted: set[str] = set()
        self._counts: dict[str, float] = {}
        self._seen = 0
        self._lock = threading.Lock()

    def resolve(self, value: str) -> str:
        with self._lock:
            self._count(value)
            if value in self.admitted:
                return value
            if len(self.admitted) < self.k:
                self.admitted.add(value)
                return value
            weakest = min(self.admitted, key=lambda v: self._counts.get(v, 0.0))
            if self._counts[value] <= self.hysteresis * self._counts.get(weakest, 0.0):
                return OTHER
            self.admitted.discard(weakest)
            self.admitted.add(value)
        if self.on_evict is not None:
            self.on_evict(weakest)
        return value

    def _count(self, value: str) -> None:
        if value not in self._counts and len(self._counts) >= self.max_tracked:
            # Forget the lighter half of the untracked-for-labels values: memory stays bounded.
            candidates = sorted(
                (v for v in self._counts if v not in self.admitted), key=self._counts.__getitem__
            )
            for v in candidates[: max(len(candidates) // 2, 1)]:
                del self._counts[v]
        self._counts[value] = self._counts.get(value, 0.0) + 1.0
        self._seen += 1
        if self._seen % self.decay_every == 0:
            # NOTE: halving makes old traffic fade, so a segment that went quiet can be displaced.
            self._counts = {v: c / 2.0 for v, c in self._counts.items()}


class GatewayMetrics:
    def __init__(
        self,
        top_k_segments: int,
        *,
        top_k_tenants: int | None = None,
        max_positions: int = 16,
        hash_tenants: bool = False,
    ) -> None:
        self.hash_tenants = hash_tenants
        # NOTE: in multi-process mode (`serve --workers N`) each value lives in a file
        # shared with the other processes, and a scrape renders all of them; series
        # are then never removed (prometheus-client cannot), so an evicted segment or
        # a departed worker keeps its last count until the gateway restarts.
        self.multiprocess = multiprocess_dir()
        self._scrape_registry: CollectorRegistry | None = None
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._request_series: dict[tuple[str, Arm, int | None, str, int], _RequestSeries] = {}
        self.max_positions = max_positions
        self.segments = TopKLabels(top_k_segments, on_evict=self._forget_segment)
        self.tenants = TopKLabels(top_k_tenants or top_k_segments, on_evict=self._forget_tenant)
        r = self.registry
        seg_labels = ["segment", "arm", "pair_version"]
        self.requests = Counter(
            PREFIX + "requests",
            "Finished requests (numerator), by segment, arm, pair version, outcome "
            "(ok|error|client_error|cancelled) and HTTP status. Unit: requests. "
            "client_error: refused for its own fault (a 4xx), never an arm error. Arm error "
            'ratio: sum(rate(specroute_gateway_requests_total{outcome="error"}[5m])) '
            '/ sum(rate(specroute_gateway_requests_total{outcome!="client_error"}[5m])).',
            [*seg_labels, "outcome", "status"],
            registry=r,
        )
        self.tokens = Counter(
            PREFIX + "tokens",
            "Tokens served, kind=prompt|completion, as the engine reported in usage. "
            "Unit: tokens. Throughput: sum by (kind) (rate(specroute_gateway_tokens_total[1m])).",
            [*seg_labels, "kind"],
            registry=r,
        )
        self.drafts = Counter(
            PREFIX + "spec_drafts",
            "Draft proposals (target verification passes) on the spec arm, from the engine's "
            "per-request speculative summary. Unit: drafts. Mean accepted length: "
            "rate(specroute_gateway_spec_accepted_tokens_total[5m]) "
            "/ rate(specroute_gateway_spec_drafts_total[5m]).",
            ["segment", "pair_version"],
            registry=r,
        )
        self.drafted_tokens = Counter(
            PREFIX + "spec_drafted_tokens",
            "Draft tokens proposed to the target (denominator of the acceptance rate). "
            "Unit: tokens.",
            ["segment", "pair_version"],
            registry=r,
        )
        self.accepted_tokens = Counter(
            PREFIX + "spec_accepted_tokens",
            "Draft tokens the target accepted (numerator of the acceptance rate). Unit: tokens. "
            "Acceptance rate: rate(specroute_gateway_spec_accepted_tokens_total[5m]) "
            "/ rate(specroute_gateway_spec_drafted_tokens_total[5m]).",
            ["segment", "pair_version"],
            registry=r,
        )
        self.full_proposals = Counter(
            PREFIX + "spec_full_proposals",
            "Draft proposals the target accepted whole (all k tokens: the accepted count at "
            "the last draft position). Unit: drafts. Full-proposal acceptance: "
            "rate(specroute_gateway_spec_full_proposals_total[5m]) "
            "/ rate(specroute_gateway_spec_drafts_total[5m]); correction rate "
            "(drafts the target corrected): 1 minus that.",
            ["segment", "pair_version"],
            registry=r,
        )
        self.judged_positions = Counter(
            PREFIX + "spec_judged_positions",
            "Draft positions the target judged (drafts + accepted - accepted at the last "
            "position: positions after a rejection are never judged), the denominator of "
            "the request-unit acceptance the automation's guard tests. Unit: positions.",
            ["segment", "pair_version"],
            registry=r,
        )
        self.accepted_by_position = Counter(
            PREFIX + "spec_accepted_tokens_by_position",
            "Accepted draft tokens at draft position (0-based; the last position value "
            f"folds positions >= {max_positions - 1}). Unit: tokens. Per-position acceptance: "
            'rate(...{position="i"}[5m]) / rate(specroute_gateway_spec_drafts_total[5m]).',
            ["segment", "pair_version", "position"],
            registry=r,
        )
        bucket_labels = ["segment", "pair_version", "position_bucket"]
        buckets = ", ".join(POSITION_LABELS)
        self.drafted_by_response_position = Counter(
            PREFIX + "spec_drafted_tokens_by_response_position",
            "Draft tokens proposed, by the response position (0-based token index) where "
            f"their verify step began: position_bucket {buckets}, or {UNKNOWN} (the engine "
            "sent no per-step arrays). Unit: tokens. Acceptance by response position: "
            "rate(specroute_gateway_spec_accepted_tokens_by_response_position_total[5m]) "
            "/ rate(specroute_gateway_spec_drafted_tokens_by_response_position_total[5m]).",
            bucket_labels,
            registry=r,
        )
        self.accepted_by_response_position = Counter(
            PREFIX + "spec_accepted_tokens_by_response_position",
            "Draft tokens the target accepted, by the response position where their verify "
            "step began (position_bucket as for spec_drafted_tokens_by_response_position). "
            "Unit: tokens.",
            bucket_labels,
            registry=r,
        )
        self.depth_switches = Counter(
            PREFIX + "depth_switches",
            "Depth by load: switches of a segment's depth ladder to another rung, by the "
            "rung's depth k and the reason: load (the per-worker load left the rung's band), "
            "no_worker (the rung's pool had no usable worker), acceptance_reset (position-1 "
            "acceptance moved sharply; back to the rollout's own pool). The ladder's first "
            "request counts as a load switch when it leaves the default rung. Unit: "
            "switches. Switches per hour: "
            "sum by (segment) (increase(specroute_gateway_depth_switches_total[1h])).",
            ["segment", "k", "reason"],
            registry=r,
        )
        self.depth_rung = Gauge(
            PREFIX + "depth_rung_k",
            "Depth by load: the depth k of the rung a segment's depth ladder sends spec "
            "requests to now (this process's ladder state; with several processes per "
            "host, one series per process, pid label). Unit: draft tokens per step.",
            ["segment"],
            registry=r,
            multiprocess_mode="liveall",
        )
        latency_labels = ["segment", "arm"]
        self.ttft = Histogram(
            PREFIX + "ttft_seconds",
            "Time to first token seen by the gateway, from request arrival to the first "
            "content chunk. Unit: seconds. p99: histogram_quantile(0.99, sum by (le, arm) "
            "(rate(specroute_gateway_ttft_seconds_bucket[5m]))).",
            latency_labels,
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.tpot = Histogram(
            PREFIX + "tpot_seconds",
            "Time per output token after the first: (e2e - ttft) / (completion_tokens - 1), "
            "one sample per request with more than one token. Unit: seconds per token.",
            latency_labels,
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.e2e = Histogram(
            PREFIX + "e2e_seconds",
            "End-to-end request latency at the gateway, arrival to last byte (client errors "
            "not observed). Unit: seconds.",
            latency_labels,
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.decisions = Counter(
            PREFIX + "decisions",
            "Routing decisions by reason (DecisionReason) and chosen arm. Unit: decisions. "
            'Share sent to spec: sum(rate(specroute_gateway_decisions_total{arm="spec"}[5m])) '
            "/ sum(rate(specroute_gateway_decisions_total[5m])).",
            ["reason", "arm"],
            registry=r,
        )
        self.snapshot_version = Gauge(
            PREFIX + "snapshot_version",
            "Version of the policy snapshot the gateway routes on (with several processes "
            "per host, the oldest any of them routes on). Unit: version number.",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.snapshot_age = Gauge(
            PREFIX + "snapshot_age_seconds",
            "Age of the routed-on snapshot at scrape time (now - generated_at). Unit: seconds. "
            "Above the snapshot TTL every segment fails safe to baseline. With several "
            "processes per host, the oldest, as of each one's last poll.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self._snapshot_age_at: tuple[float, float] | None = None  # (age_s, monotonic at set)
        if self.multiprocess is None:
            self.snapshot_age.set_function(self._current_snapshot_age)
        self.quota_rejections = Counter(
            PREFIX + "quota_rejections",
            "Requests refused with 429 because the tenant's weighted-token budget was spent. "
            "Unit: requests.",
            ["tenant"],
            registry=r,
        )
        self.shadow_mirrors = Counter(
            PREFIX + "shadow_mirrors",
            "Shadow stage: mirrored copies of requests sent to a spec pool, by outcome (ok, "
            "error, client_error: a 4xx, cancelled over the budget, skipped at the in-flight "
            "cap, no_worker). "
            "Unit: requests.",
            ["outcome"],
            registry=r,
        )
        self.contract_pairs = Counter(
            PREFIX + "contract_pairs",
            "Output contract: requests answered by both arms in the background, by "
            "outcome. Greedy ones compared token for token (equal, unequal); sampled ones "
            "by which arm's completion the target found likelier (sampled_spec_higher, "
            "sampled_spec_lower, sampled_tie); incomplete: an arm failed or timed out; "
            "skipped at the in-flight cap. Equal share at T=0 = equal / (equal + unequal); "
            "under lossless speculation spec_higher / (spec_higher + spec_lower) is 1/2. "
            "Unit: requests.",
            ["outcome"],
            registry=r,
        )
        self.quota_store_failures = Counter(
            PREFIX + "quota_store_failures",
            "Calls to the shared quota store (Redis) that failed or timed out; each puts "
            "the gateway in its quota failure mode (open, closed or local) for a while. "
            "Unit: calls.",
            ["operation"],
            registry=r,
        )
        for operation in ("admit", "settle", "charge", "reconcile"):
            self.quota_store_failures.labels(operation)
        self.auth_failures = Counter(
            PREFIX + "auth_failures",
            "Requests refused for their API key: missing_token, invalid_token (unknown or "
            "revoked key), rate_limited (the source address failed too often; 429). "
            "Unit: requests.",
            ["reason"],
            registry=r,
        )
        for reason in AUTH_FAILURE_REASONS:
            self.auth_failures.labels(reason)
        self.refusals = Counter(
            PREFIX + "refusals",
            "Requests refused before their routing decision, by the HTTP status answered "
            "and the gateway's own error code (invalid_json, invalid_value, "
            "payload_too_large, unsupported_content_encoding, invalid_encoding, "
            "request_body_timeout, model_not_found, not_found, method_not_allowed, "
            "cors_disallowed, invalid_api_key, gateway_overloaded, ...; never text from the "
            "client or an engine). A client that left before its answer counts as status "
            "499, code "
            "client_disconnected. Auth "
            "failures count here and, by reason, in auth_failures; a request refused after "
            "its decision (quota 429, engine refusal, no worker) counts in requests instead. "
            "Unit: requests. By code: sum by (status, code) "
            "(rate(specroute_gateway_refusals_total[5m])).",
            ["status", "code"],
            registry=r,
        )
        self.outstanding = Gauge(
            PREFIX + "outstanding_requests",
            "Requests in flight to an engine worker (the least-outstanding routing signal; "
            "with several processes per host, their sum). Unit: requests.",
            ["pool", "worker"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.telemetry_flushed = Counter(
            PREFIX + "telemetry_batches_flushed",
            "Telemetry batches (one per closed window) acknowledged by control. Unit: batches.",
            registry=r,
        )
        self.telemetry_dropped = Counter(
            PREFIX + "telemetry_batches_dropped",
            "Telemetry batches never delivered, by reason: overflow (queue cap hit while "
            "control was down; oldest dropped), rejected (control answered 4xx), shutdown "
            "(undelivered at exit). Unit: batches.",
            ["reason"],
            registry=r,
        )
        self.request_records_dropped = Counter(
            PREFIX + "request_records_dropped",
            "Sampled per-request records not shipped to control, by reason: window_cap (over "
            "telemetry_max_records_per_window), refusal_cap (a request refused before "
            "routing, over telemetry_max_refusal_records_per_window), invalid (a value past "
            "the record contract's bounds; checked only while the window has room, so a "
            "record past the cap counts as window_cap). The request still counts in its "
            "telemetry window if it was routed. Unit: records.",
            ["reason"],
            registry=r,
        )
        self.telemetry_pending = Gauge(
            PREFIX + "telemetry_batches_pending",
            "Telemetry batches waiting for delivery to control. Unit: batches.",
            registry=r,
            multiprocess_mode="livesum",
        )

    def _child(self, metric: MetricWrapperBase, *labels: str) -> Any:
        """`metric.labels(*labels)`, cached: labels() takes a lock and builds a tuple."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _forget_children(self) -> None:
        # NOTE: a removed series must not live on in a cache (its increments would be
        # lost from the exposition); removals are rare, so every cache goes.
        self._children.clear()
        self._request_series.clear()

    def observe_request(self, rec: RequestRecord) -> None:
        segment = self.segments.resolve(rec.segment_name or NONE)
        key = (segment, rec.arm, rec.pair_version_id, rec.outcome, rec.http_status)
        s = self._request_series.get(key)
        if s is None:
            s = self._request_series[key] = _RequestSeries(self, segment, rec)
        s.requests.inc()
        if rec.prompt_tokens:
            s.prompt_tokens.inc(rec.prompt_tokens)
        if rec.completion_tokens:
            s.completion_tokens.inc(rec.completion_tokens)
        if rec.drafts or rec.drafted_tokens:
            # NOTE: an inc(0) adds nothing, so a zero is not added; its series is bound
            # all the same (here and below), as the inc(0) bound it before.
            drafts, drafted, accepted, full_proposals = s.spec
            if rec.drafts:
                drafts.inc(rec.drafts)
            if rec.drafted_tokens:
                drafted.inc(rec.drafted_tokens)
            if rec.accepted_tokens:
                accepted.inc(rec.accepted_tokens)
            # NOTE: zeros too, so every drafted position has a series from the first
            # spec request on and per-position ratios read 0, not "no data".
            positions = s.positions
            for i, n in enumerate(rec.accepted_per_position):
                if i == len(positions):
                    positions.append(s.position(i))
                if n:
                    positions[i].inc(n)
            # NOTE: a position is reached only after every earlier one was accepted, so
            # the last position's count is the number of proposals accepted whole.
            full = rec.accepted_per_position[-1] if rec.accepted_per_position else 0
            if full:
                full_proposals.inc(full)
            judged = rec.judged_positions
            if judged is not None:
                s.judged_positions.inc(judged)
            self._observe_response_positions(rec, s)
        if rec.ttft_ms is not None:
            s.ttft.observe(rec.ttft_ms / 1000.0)
        if rec.tpot_ms is not None:
            s.tpot.observe(rec.tpot_ms / 1000.0)
        if rec.outcome != "client_error":
            # NOTE: as in the telemetry windows: how fast an engine refuses a bad request
            # says nothing of the arm's latency.
            s.e2e.observe(rec.e2e_ms / 1000.0)

    def _observe_response_positions(self, rec: RequestRecord, s: "_RequestSeries") -> None:
        by_position = rec.by_response_position
        if by_position is None:
            drafted_child, accepted_child = s.unknown_position
            if rec.drafted_tokens:
                drafted_child.inc(rec.drafted_tokens)
            if rec.accepted_tokens:
                accepted_child.inc(rec.accepted_tokens)
            return
        # NOTE: zeros too, as per draft position: every bucket a spec request reached or
        # not has a series, so a bucket's ratio reads 0/0 (no data) rather than missing.
        for (drafted_child, accepted_child), (drafted, accepted) in zip(
            s.by_response_position, by_position, strict=True
        ):
            if drafted:
                drafted_child.inc(drafted)
            if accepted:
                accepted_child.inc(accepted)

    def observe_decision(self, reason: str, arm: Arm) -> None:
        self._child(self.decisions, reason, arm.value).inc()

    def observe_depth_rung(self, segment: str | None, k: int, reason: str) -> None:
        """A depth ladder's rung is now `k`: reason start (no switch), or the switch's."""
        label = self.segments.resolve(segment or NONE)
        if reason != "start":
            self._child(self.depth_switches, label, str(k), reason).inc()
        self._child(self.depth_rung, label).set(k)

    def observe_shadow(self, outcome: str) -> None:
        self.shadow_mirrors.labels(outcome).inc()

    def observe_contract_pair(self, outcome: str) -> None:
        self.contract_pairs.labels(outcome).inc()

    def observe_quota_store_failure(self, operation: str) -> None:
        self.quota_store_failures.labels(operation).inc()

    def observe_refusal(self, status: int, code: str) -> None:
        self._child(self.refusals, str(status), code).inc()

    def tenant_label(self, tenant: str) -> str:
        """The label a tenant's series carry: its name, or a digest of it when tenant
        names must not appear in the exposition (tenant_label_hash)."""
        if not self.hash_tenants:
            return tenant
        return "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:12]

    def observe_quota_rejection(self, tenant: str) -> None:
        self.quota_rejections.labels(self.tenants.resolve(self.tenant_label(tenant))).inc()

    def set_snapshot(self, version: int, age_s: float) -> None:
        self.snapshot_version.set(version)
        self._snapshot_age_at = (age_s, time.monotonic())
        if self.multiprocess is not None:
            self.snapshot_age.set(age_s)

    def _current_snapshot_age(self) -> float:
        # NOTE: the age keeps growing between set_snapshot calls (control down), so it is
        # computed at scrape time rather than frozen at the last set.
        if self._snapshot_age_at is None:
            return float("nan")
        age_s, at = self._snapshot_age_at
        return age_s + (time.monotonic() - at)

    def set_outstanding(self, pool: str, worker: str, n: int) -> None:
        self._child(self.outstanding, pool, worker).set(n)

    def forget_worker(self, pool: str, worker: str) -> None:
        """Drop a worker's series when it leaves the snapshot, so churn does not accumulate."""
        self._forget_children()
        if self.multiprocess is not None:
            self.outstanding.labels(pool, worker).set(0)  # its series stays (see __init__)
            return
        self.outstanding.remove(pool, worker)

    def observe_telemetry_flushed(self, n: int = 1) -> None:
        self.telemetry_flushed.inc(n)

    def observe_telemetry_dropped(self, reason: str, n: int = 1) -> None:
        self.telemetry_dropped.labels(reason).inc(n)

    def observe_request_record_dropped(self, reason: str) -> None:
        self.request_records_dropped.labels(reason).inc()

    def set_telemetry_pending(self, n: int) -> None:
        self.telemetry_pending.set(n)

    def render(self) -> tuple[bytes, str]:
        if self.multiprocess is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        forget_dead_processes(self.multiprocess)
        if self._snapshot_age_at is not None:
            self.snapshot_age.set(self._current_snapshot_age())
        if self._scrape_registry is None:
            self._scrape_registry = CollectorRegistry()
            MultiProcessCollector(self._scrape_registry, str(self.multiprocess))  # type: ignore[no-untyped-call]
        return generate_latest(self._scrape_registry), CONTENT_TYPE_LATEST

    def _forget_segment(self, segment: str) -> None:
        self._forget_children()
        if self.multiprocess is not None:
            return  # series cannot be removed in multi-process mode (see __init__)
        for metric in (
            self.requests,
            self.tokens,
            self.drafts,
            self.drafted_tokens,
            self.accepted_tokens,
            self.accepted_by_position,
            self.full_proposals,
            self.judged_positions,
            self.drafted_by_response_position,
            self.accepted_by_response_position,
            self.ttft,
            self.tpot,
            self.e2e,
            self.depth_switches,
            self.depth_rung,
        ):
            metric.remove_by_labels({"segment": segment})

    def _forget_tenant(self, tenant: str) -> None:
        self._forget_children()
        if self.multiprocess is not None:
            return
        self.quota_rejections.remove_by_labels({"tenant": tenant})


class _RequestSeries:
    """The request metrics' children for one (segment, arm, pair version, outcome,
    status): `requests`, and each other attribute bound by `labels()` the first time
    `observe_request` reads it, a plain attribute after. A series thus appears when
    first observed, as with a `labels()` call per observation, at a fraction of the
    cost (labels() takes a lock and builds its key tuple each call)."""

    def __init__(self, metrics: "GatewayMetrics", segment: str, rec: RequestRecord) -> None:
        m, arm, outcome, status = metrics, rec.arm.value, rec.outcome, str(rec.http_status)
        pv = NONE if rec.pair_version_id is None else str(rec.pair_version_id)
        self.requests = m.requests.labels(segment, arm, pv, outcome, status)
        self.positions: list[Any] = []  # accepted_by_position, by draft position
        last = m.max_positions - 1
        self.position: Callable[[int], Any] = lambda i: m.accepted_by_position.labels(
            segment, pv, str(min(i, last))
        )
        spec = (m.drafts, m.drafted_tokens, m.accepted_tokens, m.full_proposals)
        self._binds: dict[str, Callable[[], Any]] = {
            "prompt_tokens": lambda: m.tokens.labels(segment, arm, pv, "prompt"),
            "completion_tokens": lambda: m.tokens.labels(segment, arm, pv, "completion"),
            "spec": lambda: tuple(metric.labels(segment, pv) for metric in spec),
            "judged_positions": lambda: m.judged_positions.labels(segment, pv),
            "unknown_position": lambda: (
                m.drafted_by_response_position.labels(segment, pv, UNKNOWN),
                m.accepted_by_response_position.labels(segment, pv, UNKNOWN),
            ),
            "by_response_position": lambda: [
                (
                    m.drafted_by_response_position.labels(segment, pv, label),
                    m.accepted_by_response_position.labels(segment, pv, label),
                )
                for label in POSITION_LABELS
            ],
            "ttft": lambda: m.ttft.labels(segment, arm),
            "tpot": lambda: m.tpot.labels(segment, arm),
            "e2e": lambda: m.e2e.labels(segment, arm),
        }

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not set yet: the first read binds, later ones find it.
        bind = self.__dict__.get("_binds", {}).get(name)
        if bind is None:
            raise AttributeError(name)
        child = bind()
        setattr(self, name, child)
        return child
