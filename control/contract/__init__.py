"""Wire documents shared by control, gateway and engine.

This package imports nothing of the project and nothing heavier than pydantic,
so the gateway and the engine agent can depend on it without SQLAlchemy. Its
names load on first use (PEP 562 `__getattr__`): `control.contract.admin_client`
(the SDK, which the CLI imports) does not pay for the pydantic models.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from control.contract.errors import ErrorBody, ErrorDetail
    from control.contract.features import Arm, RequestFeatures, SegmentSelector
    from control.contract.heartbeat import (
        EngineTelemetry,
        HeartbeatAck,
        SpecCounters,
        WorkerHeartbeat,
    )
    from control.contract.pool import PoolSpec, SpeculativeConfig, lora_module_names
    from control.contract.requests import (
        NOT_ROUTED,
        Outcome,
        RequestRecordDoc,
        SamplingSummary,
        StructuredKind,
        failure_outcome,
    )
    from control.contract.slo import (
        DEFAULT_TPOT_SLO_S,
        DEFAULT_TTFT_SLO_S,
        LATENCY_BUCKETS_S,
        OVERFLOW_LABEL,
        SLO_OBJECTIVE,
        UNSEGMENTED_LABEL,
        slo_edge,
    )
    from control.contract.snapshot import (
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
    from control.contract.telemetry import (
        COUNTER_FIELDS,
        HISTOGRAM_FIELDS,
        LATENCY_BUCKETS_MS,
        LOAD_BUCKET_EDGES,
        MAX_MISMATCH_IDS,
        MOMENT_FIELDS,
        SLICE_HISTOGRAM_FIELDS,
        LatencyHistogram,
        LoadSlice,
        LoadTotals,
        OutputContractCounts,
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

_WHERE = {
    "Arm": "control.contract.features",
    "COUNTER_FIELDS": "control.contract.telemetry",
    "DEFAULT_TPOT_SLO_S": "control.contract.slo",
    "DEFAULT_TTFT_SLO_S": "control.contract.slo",
    "EXPOSING_STATES": "control.contract.snapshot",
    "EngineTelemetry": "control.contract.heartbeat",
    "ErrorBody": "control.contract.errors",
    "ErrorDetail": "control.contract.errors",
    "HISTOGRAM_FIELDS": "control.contract.telemetry",
    "HeartbeatAck": "control.contract.heartbeat",
    "LATENCY_BUCKETS_MS": "control.contract.telemetry",
    "LATENCY_BUCKETS_S": "control.contract.slo",
    "LOAD_BUCKET_EDGES": "control.contract.telemetry",
    "LatencyHistogram": "control.contract.telemetry",
    "LoadSlice": "control.contract.telemetry",
    "LoadTotals": "control.contract.telemetry",
    "MAX_MISMATCH_IDS": "control.contract.telemetry",
    "MOMENT_FIELDS": "control.contract.telemetry",
    "NOT_ROUTED": "control.contract.requests",
    "OVERFLOW_LABEL": "control.contract.slo",
    "Outcome": "control.contract.requests",
    "DepthLadder": "control.contract.snapshot",
    "DepthRung": "control.contract.snapshot",
    "PairCapabilities": "control.contract.snapshot",
    "PairVersionSpec": "control.contract.snapshot",
    "PolicySnapshot": "control.contract.snapshot",
    "PoolSnapshot": "control.contract.snapshot",
    "PoolSpec": "control.contract.pool",
    "QuotaSpec": "control.contract.snapshot",
    "QuotaWeights": "control.contract.snapshot",
    "OutputContractCounts": "control.contract.telemetry",
    "RequestAcceptance": "control.contract.telemetry",
    "RequestFeatures": "control.contract.features",
    "RequestRecordDoc": "control.contract.requests",
    "RolloutSpec": "control.contract.snapshot",
    "RolloutState": "control.contract.snapshot",
    "SLICE_HISTOGRAM_FIELDS": "control.contract.telemetry",
    "SLO_OBJECTIVE": "control.contract.slo",
    "SamplingSummary": "control.contract.requests",
    "SegmentSelector": "control.contract.features",
    "SegmentSpec": "control.contract.snapshot",
    "SpecCounters": "control.contract.heartbeat",
    "SpeculativeConfig": "control.contract.pool",
    "StructuredKind": "control.contract.requests",
    "TelemetryAck": "control.contract.telemetry",
    "TelemetryBatch": "control.contract.telemetry",
    "TelemetryWindow": "control.contract.telemetry",
    "TenantSpec": "control.contract.snapshot",
    "UNSEGMENTED_LABEL": "control.contract.slo",
    "WindowCounts": "control.contract.telemetry",
    "WorkerHeartbeat": "control.contract.heartbeat",
    "WorkerSpec": "control.contract.snapshot",
    "add_counts": "control.contract.telemetry",
    "add_histograms": "control.contract.telemetry",
    "add_positions": "control.contract.telemetry",
    "engine_release": "control.contract.snapshot",
    "failure_outcome": "control.contract.requests",
    "load_bucket": "control.contract.telemetry",
    "log_ms": "control.contract.telemetry",
    "lora_module_names": "control.contract.pool",
    "same_engine_release": "control.contract.snapshot",
    "slo_edge": "control.contract.slo",
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
        raise AttributeError(f"module 'control.contract' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
