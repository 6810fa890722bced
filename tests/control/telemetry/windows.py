"""Telemetry windows as a gateway sends them, and the POST that stores them, for the
reads over stored windows (the API through TestClient, the CLI over HTTP)."""

from collections.abc import Sequence
from datetime import datetime

import httpx
from fastapi.testclient import TestClient

from specwire import Arm, PositionTokens, TelemetryBatch, TelemetryWindow


def window(
    segment_id: int | None,
    arm: Arm,
    start: datetime,
    *,
    requests: int,
    drafts: int = 0,
    per_position: Sequence[int] = (),
    buckets: dict[str, tuple[int, int]] | None = None,
    totals: tuple[int, int] | None = None,
    pair_version_id: int | None = None,
    rollout_id: int | None = None,
) -> TelemetryWindow:
    """A window whose drafted and accepted tokens are its buckets' sums (`totals` for
    a window from a gateway that sends no buckets); segment None: no segment matched."""
    parts = buckets or {}
    drafted, accepted = totals or (
        sum(d for d, _ in parts.values()),
        sum(a for _, a in parts.values()),
    )
    return TelemetryWindow(
        segment_id=segment_id,
        arm=arm,
        pair_version_id=pair_version_id,
        rollout_id=rollout_id,
        window_start=start,
        window_seconds=10,
        requests=requests,
        drafts=drafts,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        accepted_per_position=list(per_position),
        by_response_position={
            b: PositionTokens(drafted_tokens=d, accepted_tokens=a) for b, (d, a) in parts.items()
        },
    )


def post_windows(
    client: httpx.Client | TestClient,
    internal_token: str,
    windows: Sequence[tuple[str, TelemetryWindow]],
    *,
    base_url: str = "",
) -> None:
    """Store (gateway, window) pairs: one batch per gateway and window start, as
    gateways send them."""
    batches: dict[tuple[str, datetime], list[TelemetryWindow]] = {}
    for gateway, w in windows:
        batches.setdefault((gateway, w.window_start), []).append(w)
    for (gateway, start), group in batches.items():
        batch = TelemetryBatch(gateway_id=gateway, window_start=start, windows=group)
        response = client.post(
            base_url + "/internal/v1/telemetry",
            content=batch.model_dump_json(),
            headers={
                "Authorization": f"Bearer {internal_token}",
                "content-type": "application/json",
            },
        )
        assert response.status_code == 200, response.text
        assert response.json()["stored"] == len(group), response.text
