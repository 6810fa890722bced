"""Depth advice made actionable: a pair version's k is fixed in vLLM, so a better depth
is a sibling version with the advised k, registered like any other and sent through
the same stages (offline evaluation, shadow, canary)."""

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.errors import Conflict
from control.models import PairVersion
from control.pairs import repository as repo
from control.pairs.schemas import PairVersionCreate
from control.pairs.service import get_version, register_version


class NoDepthAdvice(Conflict):
    code = "missing_evidence"


def suggest_depth(
    session: Session,
    pair_id: int,
    version_id: int,
    *,
    actor: str,
    model_roots: Sequence[Path],
) -> PairVersion:
    """Register the sibling of `version_id` at the depth the latest advice recommends:
    every registration field of the source (its adapter included) but k."""
    version = get_version(session, pair_id, version_id)
    advice = repo.latest_depth_advice(session, version.id)
    if advice is None:
        raise NoDepthAdvice(
            f"no depth advice for pair version {version.id} yet: the automation advises from a "
            "live rollout's per-position acceptance and measured speedup",
            details={"missing_evidence": ["depth_advice"]},
        )
    if advice.recommended_k == version.num_speculative_tokens:
        raise Conflict(
            f"pair version {version.id} already drafts the advised {advice.recommended_k} "
            f"tokens (depth recommendation {advice.id})",
            code="already_at_advised_depth",
            details={"recommendation_id": advice.id},
        )
    body = PairVersionCreate(
        method=version.method,
        target_ref=version.target_ref,
        draft_ref=version.draft_ref,
        num_speculative_tokens=advice.recommended_k,
        draft_sample_method=version.draft_sample_method,
        adapter_id=version.adapter_id,
        adapter_ref=version.adapter_ref,
        engine_version=version.engine_version,
        capabilities=version.capabilities,
    )
    sibling = register_version(session, pair_id, body, actor=actor, model_roots=model_roots)
    record_audit(
        session,
        actor=actor,
        action="pair_version.suggest_depth",
        entity_type="pair_version",
        entity_id=sibling.id,
        after={
            "from_version_id": version.id,
            "recommendation_id": advice.id,
            "k": advice.recommended_k,
            "expected_speedup": advice.expected_speedup_recommended,
            "expected_speedup_current": advice.expected_speedup_current,
        },
    )
    return sibling
