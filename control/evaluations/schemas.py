"""Request and response bodies of the eval-sets and offline-evaluations API."""

from datetime import date, datetime
from enum import StrEnum
from itertools import pairwise
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from control.ids import DbId

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_SHA256 = r"^[0-9a-f]{64}$"


class CaseSource(StrEnum):
    GENERATED = "generated"
    PRODUCTION_INCIDENT = "production_incident"
    CURATED = "curated"


class Boundary(StrEnum):
    """Where a blocking case sits: a regression on it blocks `start`."""

    AUTHORIZATION = "authorization"
    PRIVACY = "privacy"
    SAFETY = "safety"
    IRREVERSIBLE_ACTION = "irreversible_action"


class CaseOutcome(StrEnum):
    """A case's outcome in an offline evaluation, best first (`OUTCOME_RANK`): `ok`
    completed (and, where the evaluator ran a baseline engine at temperature 0,
    its tokens equal the baseline's), `diverged` completed with tokens that differ
    from the baseline engine's at temperature 0, `error` the engine failed it."""

    OK = "ok"
    DIVERGED = "diverged"
    ERROR = "error"


OUTCOME_RANK: dict[str, int] = {o.value: i for i, o in enumerate(CaseOutcome)}


class AcceptanceSource(StrEnum):
    """Where an offline evaluation's acceptance came from: `per_request` the engine's
    per-request speculative metrics (`--per-request-spec-decode-metrics`), one
    histogram per case, so every case result carries its acceptance; `engine_counters`
    the difference of the engine's Prometheus `vllm:spec_decode_*` counters over the
    whole run (an engine without per-request metrics): the aggregates are exact, the
    slices and every case's acceptance are not measured (null)."""

    PER_REQUEST = "per_request"
    ENGINE_COUNTERS = "engine_counters"


class EvalCaseCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case_key: str = Field(min_length=1, max_length=200, pattern=_NAME)
    labels: dict[str, str] = Field(
        default_factory=dict,
        max_length=16,
        description="Slicing labels, e.g. task, language, temperature, adapter.",
    )
    why: str = Field(min_length=1, max_length=2000, description="Why this case exists.")
    source: CaseSource
    reviewer: str = Field(
        min_length=1, max_length=200, description="Who reviewed its expected behaviour."
    )
    supports: str = Field(
        min_length=1, max_length=500, description="The policy, incident or source it supports."
    )
    refresh_by: date = Field(description="After this date the case is stale.")
    prompt_ref: str = Field(
        min_length=1, max_length=500, description="Key of the prompt in the set's prompt store."
    )
    prompt_sha256: str = Field(pattern=_SHA256, description="sha256 of the stored prompt.")
    blocking: bool = Field(
        default=False,
        description="A boundary case: a regression on it blocks `start` into shadow whatever "
        "the aggregate, and no waiver lifts it (needs `boundary`).",
    )
    boundary: Boundary | None = Field(
        default=None, description="authorization, privacy, safety or irreversible_action."
    )

    @model_validator(mode="after")
    def _blocking_has_boundary(self) -> Self:
        if self.blocking and self.boundary is None:
            raise ValueError("a blocking case names its boundary")
        return self


class EvalSetCreate(BaseModel):
    """A new version of the named set (version 1 when the name is new)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=_NAME)
    description: str = Field(default="", max_length=1000)
    prompt_store: str = Field(
        min_length=1,
        max_length=1000,
        description="Where the prompts live (e.g. file:///data/evals/code.jsonl); control "
        "stores references and digests only, never prompt text.",
    )
    cases: list[EvalCaseCreate] = Field(min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _unique_keys(self) -> Self:
        keys = [c.case_key for c in self.cases]
        if len(keys) != len(set(keys)):
            raise ValueError("case_key must be unique within an eval set")
        return self


class EvalCase(EvalCaseCreate):
    model_config = ConfigDict(from_attributes=True)

    id: int
    stale: bool = False


class EvalSetSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    version: int
    description: str
    prompt_store: str
    created_by: str
    created_at: datetime
    case_count: int = 0
    stale_case_keys: list[str] = Field(
        default_factory=list, description="Cases past their refresh-by date today."
    )


class EvalSet(EvalSetSummary):
    cases: list[EvalCase] = Field(default_factory=list)


class SliceResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cases: int = Field(ge=0)
    drafts: int = Field(ge=0)
    mean_acceptance_length: float | None = Field(default=None, ge=1.0)
    acceptance_rate: float | None = Field(default=None, ge=0.0, le=1.0)


class CaseResultCreate(BaseModel):
    """One case's result, by the case's key: numbers and an outcome, never text."""

    model_config = ConfigDict(extra="forbid")

    case_key: str = Field(min_length=1, max_length=200, pattern=_NAME)
    outcome: CaseOutcome
    completion_tokens: int = Field(ge=0)
    drafts: int | None = Field(
        ge=0,
        description="Verification steps (target passes) the case took; null: not measured "
        "(an evaluation whose acceptance_source is engine_counters).",
    )
    accepted_per_position: list[int] | None = Field(
        max_length=64,
        description="[k]: verification steps that accepted draft position i (1..k); "
        "acceptance is a prefix, so the counts never rise with i. Null with drafts.",
    )

    @property
    def measured(self) -> bool:
        """Whether the case's acceptance was measured (per-request metrics)."""
        return self.drafts is not None

    @model_validator(mode="after")
    def _prefix(self) -> Self:
        if (self.drafts is None) != (self.accepted_per_position is None):
            raise ValueError("drafts and accepted_per_position are both null or both set")
        if self.drafts is None or self.accepted_per_position is None:
            return self
        counts = self.accepted_per_position
        if any(n < 0 or n > self.drafts for n in counts):
            raise ValueError("accepted_per_position counts lie in [0, drafts]")
        if any(later > earlier for earlier, later in pairwise(counts)):
            raise ValueError("accepted_per_position never rises with the position")
        return self


class CaseResult(CaseResultCreate):
    model_config = ConfigDict(from_attributes=True)

    id: int
    evaluation_id: int
    acceptance_rate: float | None = Field(
        description="Accepted / drafted tokens; null when the case took no verification step "
        "or its acceptance was not measured (drafts null)."
    )


class OfflineEvaluationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pair_version_id: DbId
    eval_set_id: DbId
    case_keys: list[str] = Field(
        min_length=1,
        max_length=100_000,
        description="The cases the evaluation ran, those the engine failed included (an "
        "`error` case result each; the aggregates are over the others).",
    )
    drafts: int = Field(ge=1, description="Draft proposals (target verification passes).")
    position_acceptance: list[float] = Field(
        min_length=1,
        max_length=64,
        description="Conditional acceptance rate per draft position: P(accept j | reached j).",
    )
    mean_acceptance_length: float = Field(ge=1.0, le=65.0)
    cost_ratio: float = Field(ge=0.0, le=10.0, description="Draft / target forward cost.")
    expected_speedup: dict[str, float] = Field(
        description="Closed-form expected speedup per depth at cost_ratio, keyed by depth."
    )
    draft_perplexity: float | None = Field(default=None, gt=0.0)
    slices: dict[str, SliceResult] = Field(
        default_factory=dict, description='Per label value, e.g. "task=code".'
    )
    training_set: str | None = Field(
        default=None, max_length=500, description="What the draft was trained on."
    )
    engine_version: str = Field(default="", max_length=50)
    acceptance_source: AcceptanceSource = Field(
        default=AcceptanceSource.PER_REQUEST,
        description="per_request (each case's own metrics) or engine_counters (the "
        "engine's counters over the whole run: case results carry null drafts and "
        "accepted_per_position, and there are no slices).",
    )
    case_results: list[CaseResultCreate] = Field(
        default_factory=list,
        max_length=100_000,
        description="Per-case results (optional; what `evaluations diff` and the blocking "
        "cases read), each naming a case in case_keys at most once.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if any(not 0.0 <= r <= 1.0 for r in self.position_acceptance):
            raise ValueError("position_acceptance rates must lie in [0, 1]")
        for depth, speedup in self.expected_speedup.items():
            if not depth.isdigit() or not 1 <= int(depth) <= 64 or speedup <= 0:
                raise ValueError("expected_speedup maps depths 1..64 to positive speedups")
        keys = [r.case_key for r in self.case_results]
        if len(keys) != len(set(keys)):
            raise ValueError("case_results name each case at most once")
        per_request = self.acceptance_source is AcceptanceSource.PER_REQUEST
        if any(r.measured != per_request for r in self.case_results):
            raise ValueError(
                "case results carry drafts and accepted_per_position exactly when "
                "acceptance_source is per_request (null with engine_counters)"
            )
        if not per_request and self.slices:
            raise ValueError("an evaluation from engine_counters measures no slices")
        return self


class OfflineEvaluation(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    pair_version_id: int
    eval_set_id: int
    cases: int = Field(
        description="Cases measured: case_keys less those with an `error` case result."
    )
    drafts: int
    position_acceptance: list[float]
    mean_acceptance_length: float
    cost_ratio: float
    expected_speedup: dict[str, float]
    draft_perplexity: float | None
    slices: dict[str, Any]
    stale_case_keys: list[str] = Field(
        description="Cases that were past their refresh-by date when it was posted."
    )
    training_set: str | None
    engine_version: str
    acceptance_source: AcceptanceSource = AcceptanceSource.PER_REQUEST
    case_result_count: int = Field(default=0, description="Per-case results it carries.")
    actor: str
    created_at: datetime


class CaseChange(BaseModel):
    """One case in both evaluations and how it moved (after minus before)."""

    case_key: str
    outcome_before: CaseOutcome
    outcome_after: CaseOutcome
    outcome_change: str = Field(description="worse, better or same (ok < diverged < error).")
    acceptance_before: float | None
    acceptance_after: float | None
    acceptance_delta: float | None = Field(
        description="after - before; null when either took no verification step."
    )
    completion_tokens_before: int
    completion_tokens_after: int
    boundary: str | None = Field(
        default=None,
        description="The case's boundary when it is a blocking case in the later evaluation's set.",
    )


class EvaluationDiff(BaseModel):
    before_id: int
    after_id: int
    compared: int = Field(description="Cases with a result in both.")
    changed: int = Field(description="Of those, cases whose outcome or acceptance moved.")
    worse: int = Field(description="Cases whose outcome got worse.")
    better: int = Field(description="Cases whose outcome got better.")
    only_before: list[str] = Field(description="Case keys with a result only in the first.")
    only_after: list[str] = Field(description="Case keys with a result only in the second.")
    cases: list[CaseChange] = Field(
        description="The cases that changed most, up to the limit: the largest outcome move "
        "(worse first), then the largest absolute acceptance change."
    )


class CaseFromRequest(BaseModel):
    """A request record turned into a case of the set's next version. Control holds no
    text: the operator stores the prompt and names it (`prompt_ref`, `prompt_sha256`);
    the record's sampling settings, adapter, segment and tenant become labels."""

    model_config = ConfigDict(extra="forbid")

    from_request: str = Field(min_length=1, max_length=128, description="The request id.")
    case_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=_NAME,
        description="Default: incident-<request id>.",
    )
    source: CaseSource = CaseSource.PRODUCTION_INCIDENT
    prompt_ref: str = Field(min_length=1, max_length=500)
    prompt_sha256: str = Field(pattern=_SHA256)
    reviewer: str = Field(min_length=1, max_length=200)
    why: str | None = Field(default=None, min_length=1, max_length=2000)
    supports: str | None = Field(default=None, min_length=1, max_length=500)
    refresh_by: date
    blocking: bool = False
    boundary: Boundary | None = None

    @model_validator(mode="after")
    def _blocking_has_boundary(self) -> Self:
        if self.blocking and self.boundary is None:
            raise ValueError("a blocking case names its boundary")
        return self
