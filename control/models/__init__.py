"""All ORM models in one package so Alembic sees one metadata."""

from control.models.audit import AuditEvent, Decision
from control.models.base import Base, utcnow
from control.models.evaluations import (
    EvalCase,
    EvalSet,
    EvaluationCaseResult,
    OfflineEvaluation,
)
from control.models.pairs import Pair, PairVersion
from control.models.pools import Pool, Worker
from control.models.recommendations import DepthRecommendation
from control.models.requests import RequestRecordRow
from control.models.rollouts import Rollout
from control.models.segments import Segment
from control.models.state import IdempotencyRecord, SnapshotState
from control.models.telemetry import TelemetryBatchRow, TelemetryWindowRow
from control.models.tenants import AdminToken, ApiKey, Tenant
from control.models.thresholds import ThresholdSet

__all__ = [
    "AdminToken",
    "ApiKey",
    "AuditEvent",
    "Base",
    "Decision",
    "DepthRecommendation",
    "EvalCase",
    "EvalSet",
    "EvaluationCaseResult",
    "IdempotencyRecord",
    "OfflineEvaluation",
    "Pair",
    "PairVersion",
    "Pool",
    "RequestRecordRow",
    "Rollout",
    "Segment",
    "SnapshotState",
    "TelemetryBatchRow",
    "TelemetryWindowRow",
    "Tenant",
    "ThresholdSet",
    "Worker",
    "utcnow",
]
