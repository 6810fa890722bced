"""Bounds of the stored columns, checked at the HTTP boundary.

The wire contract leaves ids and counters unbounded, but PostgreSQL stores them
in 32-bit INTEGER and VARCHAR(n) columns and rejects NUL characters in text. A
value past those bounds is the caller's mistake: a 422 naming the field, never
a database error rendered as 500. So is a window whose buckets do not fit its
totals (`specwire.window_checks`): a 422 `inconsistent_counts` naming the field.
"""

from control.errors import InvalidRequest
from specwire import COUNTER_FIELDS, TelemetryBatch, WorkerHeartbeat
from specwire.window_checks import window_mismatch

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# The window's key and every plain counter: each is an INTEGER column.
_WINDOW_INT_FIELDS = (
    "segment_id",
    "pair_version_id",
    "rollout_id",
    "window_seconds",
    *COUNTER_FIELDS,
)


_RECORD_INT_FIELDS = (
    "tenant_id",
    "segment_id",
    "rollout_id",
    "rollout_version",
    "pair_version_id",
    "pool_id",
    "prompt_tokens",
    "completion_tokens",
    "drafts",
    "drafted_tokens",
    "accepted_tokens",
)
_RECORD_TEXT_FIELDS = (
    "request_id",
    "tenant",
    "model",
    "adapter",
    "segment",
    "pair",
    "reason",
    "worker_id",
    "engine_version",
    "error_code",
)
# Per-request records in one batch: a gateway sends at most its per-window cap.
MAX_RECORDS_PER_BATCH = 20_000


def check_text(value: str | None, *, param: str, max_length: int) -> None:
    if value is None:
        return
    if "\x00" in value:
        raise InvalidRequest(f"{param} must not contain NUL characters", details={"param": param})
    if len(value) > max_length:
        raise InvalidRequest(
            f"{param} is longer than {max_length} characters", details={"param": param}
        )


def check_int_range(value: int | None, *, param: str, limit: int = INT32_MAX) -> None:
    if value is not None and not 0 <= value <= limit:
        raise InvalidRequest(f"{param} must be between 0 and {limit}", details={"param": param})


def fits_int32_id(value: int) -> bool:
    """Ids outside this range cannot exist: look-ups answer 404 without a query."""
    return 1 <= value <= INT32_MAX


def check_heartbeat(worker_id: str, beat: WorkerHeartbeat) -> None:
    if not worker_id.strip():
        raise InvalidRequest("worker_id must not be blank", details={"param": "worker_id"})
    check_text(worker_id, param="worker_id", max_length=200)
    check_text(beat.endpoint_url, param="endpoint_url", max_length=500)
    check_text(beat.engine_version, param="engine_version", max_length=50)
    check_text(beat.engine_build, param="engine_build", max_length=200)
    check_text(beat.model_digest, param="model_digest", max_length=64)
    check_int_range(beat.running, param="running")
    check_int_range(beat.waiting, param="waiting")
    check_int_range(beat.process_memory_bytes, param="process_memory_bytes", limit=INT64_MAX)
    check_int_range(beat.gpu_memory_bytes, param="gpu_memory_bytes", limit=INT64_MAX)


def check_batch(batch: TelemetryBatch) -> None:
    check_text(batch.gateway_id, param="gateway_id", max_length=200)
    for i, window in enumerate(batch.windows):
        for name in _WINDOW_INT_FIELDS:
            check_int_range(getattr(window, name), param=f"windows.{i}.{name}")
        mismatch = window_mismatch(window)
        if mismatch is not None:
            param = f"windows.{i}.{mismatch.field}"
            raise InvalidRequest(
                f"{param}: {mismatch.message}",
                code="inconsistent_counts",
                details={"param": param},
            )
    if len(batch.requests) > MAX_RECORDS_PER_BATCH:
        raise InvalidRequest(
            f"requests: at most {MAX_RECORDS_PER_BATCH} records per batch",
            details={"param": "requests"},
        )
    for i, record in enumerate(batch.requests):
        for name in _RECORD_INT_FIELDS:
            check_int_range(getattr(record, name), param=f"requests.{i}.{name}")
        for name in _RECORD_TEXT_FIELDS:
            check_text(getattr(record, name), param=f"requests.{i}.{name}", max_length=256)
