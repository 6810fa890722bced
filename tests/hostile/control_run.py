"""Run the hostile cases and the OpenAPI fuzz against a control plane (any httpx
client: a TestClient in-process or a live server) and tally the statuses."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from specwire.artifacts import BUNDLED_PAIR_DIR
from tests.hostile.control_cases import Case
from tests.hostile.fuzz import FuzzRequest, requests_from_openapi

_CLIENT_REFUSALS = frozenset({"InvalidURL", "LocalProtocolError", "UnsupportedProtocol"})

HttpClient = Any
"""An httpx.Client on a live server, or Starlette's TestClient (an httpx2 client)."""

THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.3,
    "min_mean_acceptance_length": 1.5,
    "min_speedup": 1.1,
    "max_kv_cache_usage": 0.9,
    "min_samples": 100,
    "stage_dwell_seconds": 60,
    "guard_dwell_seconds": 30,
    "probation_percentage": 2.0,
    "cooldown_seconds": 300,
}


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    # A success where the case's expected answer is a refusal (goal: none).
    wrong_successes: list[str] = field(default_factory=list)
    # Any other answer than the case's expected status (cases only, not the fuzz).
    unexpected: list[str] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return sum(self.statuses.values())

    def add(self, status: int, what: str, *, expected: int | None = None) -> None:
        self.statuses[status] += 1
        if status >= 500 or status == 0:
            self.server_errors.append(f"{status} {what}")
        if expected is not None and expected >= 400 and 200 <= status < 300:
            self.wrong_successes.append(f"{status} {what}")
        if expected is not None and status != expected:
            self.unexpected.append(f"{status} (expected {expected}) {what}")


def seed(client: HttpClient, auth: dict[str, str]) -> dict[str, int]:
    """A pair version on the bundled pair, pools, a segment, a tenant, thresholds and a
    rollout: real ids for the fuzz to aim at."""

    def post(path: str, body: dict[str, Any]) -> int:
        response = client.post(f"/admin/v1{path}", json=body, headers=auth)
        assert response.status_code == 201, (path, response.text)
        return int(response.json()["id"])

    pair = post("/pairs", {"name": "hostile-pair"})
    target = str(BUNDLED_PAIR_DIR / "target")
    version = post(
        f"/pairs/{pair}/versions",
        {
            "method": "draft_model",
            "target_ref": target,
            "draft_ref": str(BUNDLED_PAIR_DIR / "draft"),
            "num_speculative_tokens": 3,
        },
    )
    spec = post(
        "/pools",
        {
            "name": "h-spec",
            "served_model_name": "tiny",
            "target_ref": target,
            "pair_version_id": version,
        },
    )
    base = post("/pools", {"name": "h-base", "served_model_name": "tiny", "target_ref": target})
    segment = post("/segments", {"name": "h-seg", "selector": {"tasks": ["code"]}})
    thresholds = post("/threshold-sets", {"name": "h-thr", **THRESHOLDS})
    tenant = post("/tenants", {"name": "h-tenant"})
    rollout = post(
        "/rollouts",
        {
            "name": "h-rollout",
            "segment_id": segment,
            "pair_version_id": version,
            "spec_pool_id": spec,
            "baseline_pool_id": base,
            "threshold_set_id": thresholds,
            "stages": [1, 100],
        },
    )
    return {
        "pair": pair,
        "version": version,
        "pool": spec,
        "segment": segment,
        "set": thresholds,
        "tenant": tenant,
        "rollout": rollout,
        "key": 1,
        "token": 1,
        "decision": 1,
    }


def send_case(client: HttpClient, case: Case, auth: dict[str, str]) -> Any:
    headers: dict[str, Any] = {**auth, **case.headers}
    content = case.content
    if case.json is not None:
        import json

        content = json.dumps(case.json).encode()
    if content is not None:
        headers.setdefault("Content-Type", "application/json")
    return client.request(
        case.method,
        case.path,
        content=content,
        headers=[
            (k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()
        ],
        params=case.params,
    )


def send_fuzz(
    client: HttpClient, request: FuzzRequest, auth: dict[str, str], internal: dict[str, str]
) -> int:
    chosen = internal if request.path.startswith("/internal/") else auth
    headers = {**{k: v.encode() for k, v in chosen.items()}, **request.headers}
    if request.content is not None:
        headers.setdefault("Content-Type", b"application/json")
    try:
        response = client.request(
            request.method,
            request.path,
            content=request.content,
            headers=[(k.encode(), v) for k, v in headers.items()],
            params=request.params,
        )
    except Exception as exc:
        # The client refused to send it (a URL or header it cannot encode): nothing
        # reached the server, so nothing to count.
        if isinstance(exc, ValueError) or type(exc).__name__ in _CLIENT_REFUSALS:
            return 0
        raise
    return int(response.status_code)


def fuzz(
    client: HttpClient,
    openapi: dict[str, Any],
    ids: dict[str, int],
    auth: dict[str, str],
    internal: dict[str, str],
    *,
    seed: int = 12,
    per_operation: int = 20,
) -> Tally:
    tally = Tally()
    for request in requests_from_openapi(openapi, ids, seed=seed, per_operation=per_operation):
        status = send_fuzz(client, request, auth, internal)
        if status:
            tally.add(status, request.describe())
    return tally
