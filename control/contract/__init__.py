"""Wire documents shared by control, gateway and engine.

This package imports nothing of the project and nothing heavier than pydantic,
so the gateway and the engine agent can depend on it without SQLAlchemy.
"""

from control.contract.errors import ErrorBody, ErrorDetail
from control.contract.features import Arm, RequestFeatures, SegmentSelector
from control.contract.heartbeat import HeartbeatAck, SpecCounters, WorkerHeartbeat
from control.contract.pool import PoolSpec, SpeculativeConfig, lora_module_names
from control.contract.requests import RequestRecordDoc, SamplingSummary, StructuredKind
from control.contract.snapshot import (
    EXPOSING_STATES,
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
from control.contract.telemetry import (
    COUNTER_FIELDS,
    HISTOGRAM_FIELDS,
    LATENCY_BUCKETS_MS,
    LOAD_BUCKET_EDGES,
    MOMENT_FIELDS,
    SLICE_HISTOGRAM_FIELDS,
    LatencyHistogram,
    LoadSlice,
    LoadTotals,
    RequestAcceptance,
    TelemetryAck,
    TelemetryBatch,
    TelemetryWindow,
    WindowCounts,
    add_counts,
    add_histograms,
    add_positions,
    load_bucket,
    log_ms,
)

INTERNAL_PREFIX = "/internal/v1"
SNAPSHOT_CHANNEL = "specroute.snapshot"

__all__ = [
    "COUNTER_FIELDS",
    "EXPOSING_STATES",
    "HISTOGRAM_FIELDS",
    "INTERNAL_PREFIX",
    "LATENCY_BUCKETS_MS",
    "LOAD_BUCKET_EDGES",
    "MOMENT_FIELDS",
    "SLICE_HISTOGRAM_FIELDS",
    "SNAPSHOT_CHANNEL",
    "Arm",
    "ErrorBody",
    "ErrorDetail",
    "HeartbeatAck",
    "LatencyHistogram",
    "LoadSlice",
    "LoadTotals",
    "PairCapabilities",
    "PairVersionSpec",
    "PolicySnapshot",
    "PoolSnapshot",
    "PoolSpec",
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
    "engine_release",
    "load_bucket",
    "log_ms",
    "lora_module_names",
    "same_engine_release",
]
