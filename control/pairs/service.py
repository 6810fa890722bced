"""Registering pairs and versions. A version is immutable; only retire moves it."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from control.domain import Change, InUse, NameTaken, create_recorded, found, record_change
from control.errors import Conflict
from control.models import Pair, PairVersion, utcnow
from control.pairs import repository as repo
from control.pairs.artifacts import check_adapter, check_artifacts
from control.pairs.schemas import PairCreate, PairUpdate, PairVersionCreate
from control.pairs.schemas import PairVersion as PairVersionOut


def _pair_state(pair: Pair) -> dict[str, Any]:
    return {"name": pair.name, "description": pair.description}


def _version_state(version: PairVersion) -> dict[str, Any]:
    return PairVersionOut.model_validate(version).model_dump(mode="json")


def get_pair(session: Session, pair_id: int) -> Pair:
    return repo.PAIRS.get_or_raise(session, pair_id)


def get_version(session: Session, pair_id: int, version_id: int) -> PairVersion:
    return found(
        repo.get_version(session, pair_id, version_id),
        "pair_version",
        f"pair {pair_id} has no version {version_id}",
    )


def create_pair(session: Session, body: PairCreate, *, actor: str) -> Pair:
    if repo.PAIRS.by_name(session, body.name) is not None:
        raise NameTaken("pair", f"a pair named {body.name!r} exists")
    pair = Pair(name=body.name, description=body.description)
    return create_recorded(session, pair, entity="pair", state=_pair_state, actor=actor)


def update_pair(
    session: Session, pair_id: int, body: PairUpdate, *, actor: str, expected_version: int | None
) -> Pair:
    change = Change.load(
        session, repo.PAIRS, pair_id, state=_pair_state, expected_version=expected_version
    )
    return change.save({"description": body.description}, actor=actor)


def delete_pair(
    session: Session, pair_id: int, *, actor: str, expected_version: int | None
) -> None:
    change = Change.load(
        session, repo.PAIRS, pair_id, state=_pair_state, expected_version=expected_version
    )
    if change.row.versions:
        raise Conflict(
            f"pair {change.row.name!r} has versions; retire them instead",
            code="pair_has_versions",
        )
    change.delete(actor=actor)


def register_version(
    session: Session,
    pair_id: int,
    body: PairVersionCreate,
    *,
    actor: str,
    model_roots: Sequence[Path],
) -> PairVersion:
    """Validate the artifacts (refusing incompatible pairs and refs outside the model
    roots) and add version n+1."""
    pair = get_pair(session, pair_id)
    report = check_artifacts(body.method, body.target_ref, body.draft_ref, model_roots=model_roots)
    adapter_ref = check_adapter(body.adapter_id, body.adapter_ref, model_roots=model_roots)
    version = PairVersion(
        pair_id=pair.id,
        version=repo.next_version_number(session, pair.id),
        method=body.method,
        target_ref=body.target_ref,
        target_digest=report.target_digest,
        draft_ref=body.draft_ref,
        draft_digest=report.draft_digest,
        num_speculative_tokens=body.num_speculative_tokens,
        draft_sample_method=body.draft_sample_method,
        tokenizer_hash=report.tokenizer_hash,
        chat_template_hash=report.chat_template_hash,
        adapter_id=body.adapter_id,
        adapter_ref=adapter_ref,
        engine_version=body.engine_version,
        capabilities=body.capabilities.model_dump(),
        status="active",
    )
    return create_recorded(
        session, version, entity="pair_version", state=_version_state, actor=actor
    )


def retire_version(
    session: Session, pair_id: int, version_id: int, *, actor: str, reason: str | None
) -> PairVersion:
    version = get_version(session, pair_id, version_id)
    if version.status == "retired":
        return version
    live = repo.exposing_rollout_names(session, version.id)
    if live:
        raise InUse(
            "pair_version",
            f"rollouts {', '.join(live)} still expose this version; roll back or disable first",
            live,
        )
    before = _version_state(version)
    version.status = "retired"
    version.retired_at = utcnow()
    session.flush()
    record_change(
        session,
        actor=actor,
        action="pair_version.retire",
        entity_type="pair_version",
        entity_id=version.id,
        before=before,
        after=_version_state(version),
        reason=reason,
    )
    return version
