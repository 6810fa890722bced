"""Pools: a spec pool must serve the target of its pair version."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from control.credentials import revoke_enrolments
from control.domain import Change, InUse, NameTaken, create_recorded
from control.errors import InvalidRequest
from control.models import PairVersion, Pool, utcnow
from control.pools import repository as repo
from control.pools.schemas import PoolCreate, PoolUpdate
from control.repository import get_row
from control.rollouts.targets import check_same_target
from specwire.engine_args import EngineArgRefused, check_engine_args


def pool_state(pool: Pool) -> dict[str, Any]:
    return {
        "name": pool.name,
        "served_model_name": pool.served_model_name,
        "target_ref": pool.target_ref,
        "pair_version_id": pool.pair_version_id,
        "engine_args": pool.engine_args,
        "desired_workers": pool.desired_workers,
    }


class EngineArgsRefused(InvalidRequest):
    """An engine argument outside the allow-list (specwire.engine_args)."""

    code = "engine_arg_not_allowed"


def check_pool_engine_args(engine_args: dict[str, Any], model_roots: Sequence[Path]) -> None:
    """422 naming the first flag a pool may not set (reserved, not allowed, a bad
    value, or a path outside the model roots)."""
    try:
        check_engine_args(engine_args, model_roots=model_roots)
    except EngineArgRefused as exc:
        raise EngineArgsRefused(
            exc.message, code=exc.code, details={"param": "engine_args", "flag": exc.flag}
        ) from None


def get_pool(session: Session, pool_id: int) -> Pool:
    return repo.POOLS.get_or_raise(session, pool_id)


def create_pool(
    session: Session, body: PoolCreate, *, actor: str, model_roots: Sequence[Path]
) -> Pool:
    check_pool_engine_args(body.engine_args, model_roots)
    if repo.POOLS.by_name(session, body.name) is not None:
        raise NameTaken("pool", f"a pool named {body.name!r} exists")
    if body.pair_version_id is not None:
        version = get_row(session, PairVersion, body.pair_version_id)
        if version is None:
            raise InvalidRequest(
                f"pair version {body.pair_version_id} does not exist",
                details={"param": "pair_version_id"},
            )
        if version.status != "active":
            raise InvalidRequest(
                f"pair version {version.id} is retired", details={"param": "pair_version_id"}
            )
        if version.target_ref != body.target_ref:
            raise InvalidRequest(
                f"pool target {body.target_ref!r} differs from the pair version's target "
                f"{version.target_ref!r}",
                code="target_mismatch",
                details={"param": "target_ref"},
            )
    pool = Pool(
        name=body.name,
        served_model_name=body.served_model_name,
        target_ref=body.target_ref,
        pair_version_id=body.pair_version_id,
        engine_args=body.engine_args,
        desired_workers=body.desired_workers,
    )
    return create_recorded(session, pool, entity="pool", state=pool_state, actor=actor)


def update_pool(
    session: Session,
    pool_id: int,
    body: PoolUpdate,
    *,
    actor: str,
    model_roots: Sequence[Path],
    expected_version: int | None,
) -> Pool:
    change = Change.load(
        session, repo.POOLS, pool_id, state=pool_state, expected_version=expected_version
    )
    pool = change.row
    values: dict[str, Any] = {}
    if body.engine_args is not None:
        check_pool_engine_args(body.engine_args, model_roots)
        values["engine_args"] = body.engine_args
    if body.desired_workers is not None:
        values["desired_workers"] = body.desired_workers
    change.apply(values)
    if body.engine_args is not None:
        # NOTE: engine_args carry the pool's lora-modules: its rollouts' arms must still
        # serve the same adapter set (and target) after the change; a 422 rolls it back.
        for rollout in repo.live_rollouts_using(session, pool.id):
            check_same_target(rollout.spec_pool, rollout.baseline_pool, model_roots=model_roots)
    return change.record(actor=actor)


def delete_pool(
    session: Session, pool_id: int, *, actor: str, expected_version: int | None
) -> None:
    change = Change.load(
        session, repo.POOLS, pool_id, state=pool_state, expected_version=expected_version
    )
    users = repo.rollouts_using(session, pool_id)
    if users:
        raise InUse("pool", f"rollouts {', '.join(users)} use this pool", users)
    # NOTE: an agent token is good for its pool only; with the pool gone it is good for
    # nothing, so it is revoked with it (and the uid check refuses it regardless).
    revoked = revoke_enrolments(session, change.row.uid, utcnow())
    change.delete(actor=actor, after={"revoked_agent_tokens": revoked} if revoked else None)
