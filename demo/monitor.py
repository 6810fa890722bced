"""What the demo watches while traffic runs: the gateway's /metrics and the control
plane's rollouts and decisions, sampled every few seconds into time series.

Acceptance comes from the gateway's counters (per segment: draft proposals and
accepted draft tokens, as the engine reported them per request), so the mean
acceptance length of an interval is 1 + Δaccepted / Δdrafts. Rollout states
and decisions come from the admin API, exactly as an operator would read them.
"""

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

DRAFTS = "specroute_gateway_spec_drafts_total"
ACCEPTED = "specroute_gateway_spec_accepted_tokens_total"


@dataclass(frozen=True)
class AcceptancePoint:
    t_s: float  # since the traffic started
    segment: str
    drafts: float  # cumulative
    accepted: float  # cumulative


@dataclass(frozen=True)
class DecisionEvent:
    id: int
    t_s: float  # since the traffic started (from the decision's created_at)
    segment: str
    kind: str
    from_state: str
    to_state: str
    to_percentage: float
    actor: str
    reason: str
    has_record: bool
    evidence: dict[str, Any]


@dataclass
class RolloutView:
    state: str
    percentage: float


def spec_counters(metrics_text: str) -> dict[str, tuple[float, float]]:
    """segment -> (drafts, accepted draft tokens), summed over pair versions."""
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name not in (DRAFTS, ACCEPTED):
                continue
            pair = out.setdefault(sample.labels.get("segment", "none"), [0.0, 0.0])
            pair[0 if sample.name == DRAFTS else 1] += sample.value
    return {seg: (d, a) for seg, (d, a) in out.items()}


def mean_acceptance_length(drafts: float, accepted: float) -> float | None:
    """tau = 1 + accepted / drafts: tokens emitted per target verification pass."""
    return 1.0 + accepted / drafts if drafts > 0 else None


@dataclass
class Monitor:
    gateway_url: str
    control_url: str
    admin_token: str
    rollout_segments: dict[int, str]  # rollout id -> segment name
    started_wall: float  # time.time() when the traffic started
    acceptance: list[AcceptancePoint] = field(default_factory=list)
    decisions: list[DecisionEvent] = field(default_factory=list)
    rollouts: dict[str, RolloutView] = field(default_factory=dict)
    last_error: str | None = None

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(timeout=10.0, trust_env=False)
        self._seen: set[int] = set()

    async def close(self) -> None:
        await self._http.aclose()

    async def sample(self, t_s: float) -> list[DecisionEvent]:
        """One poll of both planes; returns the decisions not seen before."""
        self.last_error = None
        try:
            response = await self._http.get(f"{self.gateway_url}/metrics")
            for segment, (drafts, accepted) in spec_counters(response.text).items():
                self.acceptance.append(AcceptancePoint(t_s, segment, drafts, accepted))
        except httpx.HTTPError as exc:
            self.last_error = f"gateway /metrics: {exc}"
        try:
            return await self._sample_control()
        except httpx.HTTPError as exc:
            self.last_error = f"control: {exc}"
            return []

    async def _admin(self, path: str, **params: Any) -> Any:
        response = await self._http.get(
            f"{self.control_url}/admin/v1{path}",
            params=params,
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        response.raise_for_status()
        return response.json()

    async def _sample_control(self) -> list[DecisionEvent]:
        for row in (await self._admin("/rollouts", limit=500))["items"]:
            segment = self.rollout_segments.get(row["id"])
            if segment is not None:
                self.rollouts[segment] = RolloutView(row["state"], float(row["percentage"]))
        fresh: list[DecisionEvent] = []
        page = await self._admin("/decisions", limit=100)
        for row in reversed(page["items"]):  # oldest first
            segment = self.rollout_segments.get(row["rollout_id"])
            if row["id"] in self._seen or segment is None:
                continue
            self._seen.add(row["id"])
            event = DecisionEvent(
                id=row["id"],
                t_s=self._since_start(row["created_at"]),
                segment=segment,
                kind=row["kind"],
                from_state=row["from_state"],
                to_state=row["to_state"],
                to_percentage=float(row["to_percentage"]),
                actor=row["actor"],
                reason=_reason(row),
                has_record=bool(row["has_record"]),
                evidence=row.get("evidence") or {},
            )
            self.decisions.append(event)
            fresh.append(event)
        return fresh

    def _since_start(self, created_at: str) -> float:
        with contextlib.suppress(ValueError):
            stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
            if stamp.tzinfo is None:
                # NOTE: SQLite hands back naive datetimes; control stores UTC.
                from datetime import UTC

                stamp = stamp.replace(tzinfo=UTC)
            return stamp.timestamp() - self.started_wall
        return 0.0

    def totals(self, segment: str) -> tuple[float, float]:
        """The latest cumulative (drafts, accepted) of a segment."""
        for point in reversed(self.acceptance):
            if point.segment == segment:
                return point.drafts, point.accepted
        return 0.0, 0.0

    async def record_markdown(self, decision_id: int) -> str | None:
        response = await self._http.get(
            f"{self.control_url}/admin/v1/decisions/{decision_id}/record",
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        return response.text if response.status_code == 200 else None


def _reason(row: dict[str, Any]) -> str:
    evidence = row.get("evidence") or {}
    verdict = evidence.get("verdict") if isinstance(evidence, dict) else None
    if isinstance(verdict, dict) and verdict.get("reason"):
        return str(verdict["reason"])
    return str(evidence.get("reason") or row["kind"]) if isinstance(evidence, dict) else row["kind"]
