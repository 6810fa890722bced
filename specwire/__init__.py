"""The floor under both planes: the wire documents control, gateway and engine share.

Beside the documents it holds what more than one plane needs and belongs to none:
the pair's artifact checks (`specwire.artifacts`), the prompt store's format
(`specwire.prompts`), the engine-args allowlist, digests, TLS and log helpers.
This package imports nothing of the project and nothing heavier than pydantic,
so the gateway and the engine agent can depend on it without SQLAlchemy. Its
names load on first use (PEP 562 `__getattr__`): `specwire.admin_client`
(the SDK, which the CLI imports) does not pay for the pydantic models.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specwire.errors import ErrorBody, ErrorDetail
    from specwire.features import Arm, RequestFeatures, SegmentSelector
    from specwire.heartbeat import (
        EngineTelemetry,
        HeartbeatAck,
        SpecCounters,
        WorkerHeartbeat,
    )
    from specwire.pool import PoolSpec, SpeculativeConfig, lora_module_names
    from specwire.requests import (
        NOT_ROUTED,
        Outcome,
        RequestRecordDoc,
        SamplingSummary,
        StructuredKind,
        failure_outcome,
    )
    from specwire.slo import (
        DEFAULT_TPOT_SLO_S,
        DEFAULT_TTFT_SLO_S,
        LATENCY_BUCKETS_S,
        OVERFLOW_LABEL,
        SLO_OBJECTIVE,
        UNSEGMENTED_LABEL,
        slo_edge,
    )
    from specwire.snapshot import (
        EXPOSING_STATES,
        DepthLadder,
        DepthRung,
        PairCapabilities,
        PairVersionSpec,
        PolicySnapshot,
        PoolSnapshot,
        QuotaSpec,
        QuotaWeights,
        RolloutSpec,
        RolloutState,
        SegmentSpec,
        TenantSpec,
        WorkerSpec,
        engine_release,
        same_engine_release,
    )
    from specwire.telemetry import (
        COUNTER_FIELDS,
        HISTOGRAM_FIELDS,
        LATENCY_BUCKETS_MS,
        LOAD_BUCKET_EDGES,
        MAX_MISMATCH_IDS,
        MOMENT_FIELDS,
        POSITION_BUCKETS,
        POSITION_EDGES,
        POSITION_LABELS,
        SLICE_HISTOGRAM_FIELDS,
        LatencyHistogram,
        LoadSlice,
        LoadTotals,
        OutputContractCounts,
        PositionTokens,
        RequestAcceptance,
        TelemetryAck,
        TelemetryBatch,
        TelemetryWindow,
        WindowCounts,
        add_counts,
        add_histograms,
        add_positions,
        add_response_positions,
        load_bucket,
        log_ms,
    )

INTERNAL_PREFIX = "/internal/v1"
SNAPSHOT_CHANNEL = "specroute.snapshot"

_WHERE = {
    "Arm": "specwire.features",
    "COUNTER_FIELDS": "specwire.telemetry",
    "DEFAULT_TPOT_SLO_S": "specwire.slo",
    "DEFAULT_TTFT_SLO_S": "specwire.slo",
    "EXPOSING_STATES": "specwire.snapshot",
    "EngineTelemetry": "specwire.heartbeat",
    "ErrorBody": "specwire.errors",
    "ErrorDetail": "specwire.errors",
    "HISTOGRAM_FIELDS": "specwire.telemetry",
    "HeartbeatAck": "specwire.heartbeat",
    "LATENCY_BUCKETS_MS": "specwire.telemetry",
    "LATENCY_BUCKETS_S": "specwire.slo",
    "LOAD_BUCKET_EDGES": "specwire.telemetry",
    "LatencyHistogram": "specwire.telemetry",
    "LoadSlice": "specwire.telemetry",
    "LoadTotals": "specwire.telemetry",
    "MAX_MISMATCH_IDS": "specwire.telemetry",
    "MOMENT_FIELDS": "specwire.telemetry",
    "NOT_ROUTED": "specwire.requests",
    "OVERFLOW_LABEL": "specwire.slo",
    "Outcome": "specwire.requests",
    "DepthLadder": "specwire.snapshot",
    "DepthRung": "specwire.snapshot",
    "PairCapabilities": "specwire.snapshot",
    "PairVersionSpec": "specwire.snapshot",
    "PolicySnapshot": "specwire.snapshot",
    "PoolSnapshot": "specwire.snapshot",
    "PoolSpec": "specwire.pool",
    "QuotaSpec": "specwire.snapshot",
    "QuotaWeights": "specwire.snapshot",
    "OutputContractCounts": "specwire.telemetry",
    "POSITION_BUCKETS": "specwire.telemetry",
    "POSITION_EDGES": "specwire.telemetry",
    "POSITION_LABELS": "specwire.telemetry",
    "PositionTokens": "specwire.telemetry",
    "RequestAcceptance": "specwire.telemetry",
    "RequestFeatures": "specwire.features",
    "RequestRecordDoc": "specwire.requests",
    "RolloutSpec": "specwire.snapshot",
    "RolloutState": "specwire.snapshot",
    "SLICE_HISTOGRAM_FIELDS": "specwire.telemetry",
    "SLO_OBJECTIVE": "specwire.slo",
    "SamplingSummary": "specwire.requests",
    "SegmentSelector": "specwire.features",
    "SegmentSpec": "specwire.snapshot",
    "SpecCounters": "specwire.heartbeat",
    "SpeculativeConfig": "specwire.pool",
    "StructuredKind": "specwire.requests",
    "TelemetryAck": "specwire.telemetry",
    "TelemetryBatch": "specwire.telemetry",
    "TelemetryWindow": "specwire.telemetry",
    "TenantSpec": "specwire.snapshot",
    "UNSEGMENTED_LABEL": "specwire.slo",
    "WindowCounts": "specwire.telemetry",
    "WorkerHeartbeat": "specwire.heartbeat",
    "WorkerSpec": "specwire.snapshot",
    "add_counts": "specwire.telemetry",
    "add_histograms": "specwire.telemetry",
    "add_positions": "specwire.telemetry",
    "add_response_positions": "specwire.telemetry",
    "engine_release": "specwire.snapshot",
    "failure_outcome": "specwire.requests",
    "load_bucket": "specwire.telemetry",
    "log_ms": "specwire.telemetry",
    "lora_module_names": "specwire.pool",
    "same_engine_release": "specwire.snapshot",
    "slo_edge": "specwire.slo",
}

__all__ = [
    "COUNTER_FIELDS",
    "DEFAULT_TPOT_SLO_S",
    "DEFAULT_TTFT_SLO_S",
    "EXPOSING_STATES",
    "HISTOGRAM_FIELDS",
    "INTERNAL_PREFIX",
    "LATENCY_BUCKETS_MS",
    "LATENCY_BUCKETS_S",
    "LOAD_BUCKET_EDGES",
    "MAX_MISMATCH_IDS",
    "MOMENT_FIELDS",
    "NOT_ROUTED",
    "OVERFLOW_LABEL",
    "POSITION_BUCKETS",
    "POSITION_EDGES",
    "POSITION_LABELS",
    "SLICE_HISTOGRAM_FIELDS",
    "SLO_OBJECTIVE",
    "SNAPSHOT_CHANNEL",
    "UNSEGMENTED_LABEL",
    "Arm",
    "DepthLadder",
    "DepthRung",
    "EngineTelemetry",
    "ErrorBody",
    "ErrorDetail",
    "HeartbeatAck",
    "LatencyHistogram",
    "LoadSlice",
    "LoadTotals",
    "Outcome",
    "OutputContractCounts",
    "PairCapabilities",
    "PairVersionSpec",
    "PolicySnapshot",
    "PoolSnapshot",
    "PoolSpec",
    "PositionTokens",
    "QuotaSpec",
    "QuotaWeights",
    "RequestAcceptance",
    "RequestFeatures",
    "RequestRecordDoc",
    "RolloutSpec",
    "RolloutState",
    "SamplingSummary",
    "SegmentSelector",
    "SegmentSpec",
    "SpecCounters",
    "SpeculativeConfig",
    "StructuredKind",
    "TelemetryAck",
    "TelemetryBatch",
    "TelemetryWindow",
    "TenantSpec",
    "WindowCounts",
    "WorkerHeartbeat",
    "WorkerSpec",
    "add_counts",
    "add_histograms",
    "add_positions",
    "add_response_positions",
    "engine_release",
    "failure_outcome",
    "load_bucket",
    "log_ms",
    "lora_module_names",
    "same_engine_release",
    "slo_edge",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'specwire' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
