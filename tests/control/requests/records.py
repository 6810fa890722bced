"""Request records as a gateway sends them to control: one record, a telemetry batch
of them, and the POST that delivers it."""

from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import RequestRecordRow, TelemetryBatchRow, TelemetryWindowRow

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def record(request_id: str, **kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "request_id": request_id,
        "received_at": T0.isoformat(),
        "tenant_id": 4,
        "tenant": "acme",
        "endpoint": "chat",
        "stream": False,
        "model": "tiny",
        "segment_id": 3,
        "segment": "code",
        "rollout_id": 11,
        "rollout_version": 2,
        "pair_version_id": 7,
        "pair": "tiny-v3",
        "arm": "spec",
        "reason": "cohort_spec",
        "pool_id": 1,
        "worker_id": "p1-w0",
        "engine_version": "0.32.0",
        "sampling": {"temperature": 0.7, "seed_present": True, "stop_count": 2},
        "prompt_tokens": 12,
        "completion_tokens": 30,
        "drafts": 10,
        "drafted_tokens": 30,
        "accepted_tokens": 18,
        "accepted_per_position": [8, 6, 4],
        "ttft_ms": 40.0,
        "tpot_ms": 6.5,
        "e2e_ms": 228.5,
        "outcome": "ok",
        "http_status": 200,
    }
    return doc | kw


def batch(records: list[dict[str, Any]], start: datetime = T0, gateway: str = "gw-a") -> Any:
    return {
        "gateway_id": gateway,
        "window_start": start.isoformat(),
        "windows": [],
        "requests": records,
    }


def post(client: TestClient, headers: dict[str, str], body: Any) -> Any:
    return client.post("/internal/v1/telemetry", json=body, headers=headers)


def stored_rows(session: Session) -> tuple[int, ...]:
    """How many batches, windows and request records are stored."""
    return tuple(
        session.scalar(select(func.count()).select_from(model)) or 0
        for model in (TelemetryBatchRow, TelemetryWindowRow, RequestRecordRow)
    )
