"""Per-request telemetry: records, windowed aggregation and the flush to control."""

from gateway.telemetry.aggregator import TelemetryAggregator
from gateway.telemetry.buckets import bucket_index
from gateway.telemetry.flusher import TelemetryFlusher
from gateway.telemetry.record import Outcome, RequestRecord

__all__ = [
    "Outcome",
    "RequestRecord",
    "TelemetryAggregator",
    "TelemetryFlusher",
    "bucket_index",
]
