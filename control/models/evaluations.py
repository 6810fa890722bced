"""Governed eval sets (versioned, with lineage per case) and offline evaluations.

No prompt text lives here: a case names its prompt by a reference into the eval
set's prompt store (a file or object store the engine reads) and keeps only the
prompt's sha256, so the main tables hold what request records hold — ids,
labels and numbers.
"""

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, Date, Float, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.models.base import Base, utcnow
from control.models.pairs import PairVersion


class EvalSet(Base):
    """Immutable once written: a change is version n+1 of the same name."""

    __tablename__ = "eval_sets"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), index=True)
    version: Mapped[int]
    description: Mapped[str] = mapped_column(String(1000), default="")
    # Where the prompts are, e.g. file:///data/evals/code.jsonl; cases name keys in it.
    prompt_store: Mapped[str] = mapped_column(String(1000))
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    cases: Mapped[list["EvalCase"]] = relationship(
        back_populates="eval_set", order_by="EvalCase.id", cascade="all, delete-orphan"
    )


class EvalCase(Base):
    __tablename__ = "eval_cases"
    __table_args__ = (UniqueConstraint("eval_set_id", "case_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    eval_set_id: Mapped[int] = mapped_column(
        ForeignKey("eval_sets.id", ondelete="CASCADE"), index=True
    )
    case_key: Mapped[str] = mapped_column(String(200))
    # Slicing labels: task, language, temperature, adapter.
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    why: Mapped[str] = mapped_column(Text)
    # generated | production_incident | curated
    source: Mapped[str] = mapped_column(String(32))
    reviewer: Mapped[str] = mapped_column(String(200))
    # The policy, incident or source the case supports.
    supports: Mapped[str] = mapped_column(String(500))
    refresh_by: Mapped[date] = mapped_column(Date)
    prompt_ref: Mapped[str] = mapped_column(String(500))
    prompt_sha256: Mapped[str] = mapped_column(String(64))
    # A blocking case sits at a boundary (authorization | privacy | safety |
    # irreversible_action): a regression on it blocks `start` whatever the aggregate.
    blocking: Mapped[bool] = mapped_column(default=False)
    boundary: Mapped[str | None] = mapped_column(String(32))

    eval_set: Mapped[EvalSet] = relationship(back_populates="cases")


class OfflineEvaluation(Base):
    """What `specroute engine evaluate` measured for a pair version on an eval set."""

    __tablename__ = "offline_evaluations"

    id: Mapped[int] = mapped_column(primary_key=True)
    pair_version_id: Mapped[int] = mapped_column(
        ForeignKey("pair_versions.id", ondelete="RESTRICT"), index=True
    )
    eval_set_id: Mapped[int] = mapped_column(
        ForeignKey("eval_sets.id", ondelete="RESTRICT"), index=True
    )
    # Cases measured: those it ran less those the engine failed (an `error` result).
    cases: Mapped[int]
    drafts: Mapped[int]
    # Conditional acceptance rate per draft position (1..k): P(accept j | accepted < j).
    position_acceptance: Mapped[list[float]] = mapped_column(JSON)
    mean_acceptance_length: Mapped[float] = mapped_column(Float)
    # Draft cost per forward relative to the target's, as measured by the evaluator.
    cost_ratio: Mapped[float] = mapped_column(Float)
    # {"1": 1.4, "3": 1.7, ...}: closed-form expected speedup per depth at cost_ratio.
    expected_speedup: Mapped[dict[str, Any]] = mapped_column(JSON)
    draft_perplexity: Mapped[float | None] = mapped_column(Float)
    # Per label value: {"task=code": {"cases", "mean_acceptance_length", ...}, ...}
    slices: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Case keys past their refresh-by date when the evaluation was posted.
    stale_case_keys: Mapped[list[str]] = mapped_column(JSON, default=list)
    # What the draft was trained on (a dataset name or digest), for the leakage audit.
    training_set: Mapped[str | None] = mapped_column(String(500))
    engine_version: Mapped[str] = mapped_column(String(50), default="")
    # per_request (each case's own metrics) | engine_counters (the engine's counters
    # over the run: no per-case acceptance, no slices).
    acceptance_source: Mapped[str] = mapped_column(
        String(32), default="per_request", server_default="per_request"
    )
    # Rows it has in evaluation_case_results (0: aggregates only).
    case_result_count: Mapped[int] = mapped_column(default=0)
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    pair_version: Mapped[PairVersion] = relationship()
    eval_set: Mapped[EvalSet] = relationship()


class EvaluationCaseResult(Base):
    """One case's result in an offline evaluation: numbers and an outcome, by the
    case's key; never the prompt or the completion."""

    __tablename__ = "evaluation_case_results"
    __table_args__ = (UniqueConstraint("evaluation_id", "case_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    evaluation_id: Mapped[int] = mapped_column(
        ForeignKey("offline_evaluations.id", ondelete="CASCADE"), index=True
    )
    case_key: Mapped[str] = mapped_column(String(200))
    # ok | diverged | error (control.evaluations.outcomes orders them).
    outcome: Mapped[str] = mapped_column(String(16))
    completion_tokens: Mapped[int]
    # Verification steps (target passes) the case took; None: not measured (an
    # evaluation from engine counters).
    drafts: Mapped[int | None]
    # [k]: steps that accepted draft position i (1..k); None with drafts.
    accepted_per_position: Mapped[list[int] | None] = mapped_column(JSON)
    # Accepted / drafted tokens; None when the case took no verification step or was
    # not measured.
    acceptance_rate: Mapped[float | None] = mapped_column(Float)
