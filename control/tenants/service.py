"""Tenants and their keys. A key is shown once; only sha256 and a prefix are kept."""

from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.credentials import (
    ADMIN_SCOPES,
    ALL_SCOPES,
    Principal,
    Scope,
    hash_secret,
    new_secret,
)
from control.domain import Change, Missing, NameTaken, create_recorded, found, record_change
from control.errors import Forbidden, InvalidRequest
from control.models import AdminToken, ApiKey, Pool, Tenant, utcnow
from control.repository import delete_row, get_row
from control.tenants import repository as repo
from control.tenants.schemas import AdminTokenCreate, AgentTokenCreate, TenantCreate, TenantUpdate

API_KEY_PREFIX = "sk-sr-"
ADMIN_TOKEN_PREFIX = "sr-admin-"
AGENT_TOKEN_PREFIX = "sr-agent-"
GATEWAY_TOKEN_PREFIX = "sr-gw-"
VISIBLE_CHARS = 12


class ScopeEscalation(Forbidden):
    code = "scope_escalation"


def _check_scopes_held(principal: Principal, scopes: Iterable[str], verb: str) -> None:
    """A principal may mint or revoke only tokens whose scopes it holds itself:
    otherwise a write-only token could create (or strip) a token with more power."""
    missing = sorted(set(scopes) - principal.scopes)
    if missing:
        raise ScopeEscalation(
            f"{principal.actor} cannot {verb} a token with scopes it does not hold: "
            + ", ".join(missing),
            details={"param": "scopes", "missing_scopes": missing},
        )


def tenant_state(t: Tenant) -> dict[str, Any]:
    return {
        "name": t.name,
        "allowed_models": t.allowed_models,
        "override_allowed": t.override_allowed,
        "weighted_tokens_per_minute": t.weighted_tokens_per_minute,
        "request_sample_rate": t.request_sample_rate,
    }


def get_tenant(session: Session, tenant_id: int) -> Tenant:
    return repo.TENANTS.get_or_raise(session, tenant_id)


def create_tenant(session: Session, body: TenantCreate, *, actor: str) -> Tenant:
    if repo.TENANTS.by_name(session, body.name) is not None:
        raise NameTaken("tenant", f"a tenant named {body.name!r} exists")
    tenant = Tenant(**body.model_dump())
    return create_recorded(session, tenant, entity="tenant", state=tenant_state, actor=actor)


def update_tenant(
    session: Session,
    tenant_id: int,
    body: TenantUpdate,
    *,
    actor: str,
    expected_version: int | None,
) -> Tenant:
    change = Change.load(
        session, repo.TENANTS, tenant_id, state=tenant_state, expected_version=expected_version
    )
    changes = body.model_dump(exclude_unset=True, exclude={"clear_quota"})
    values = {f: v for f, v in changes.items() if v is not None or f == "allowed_models"}
    if body.clear_quota:
        values["weighted_tokens_per_minute"] = None
    return change.save(values, actor=actor)


def delete_tenant(
    session: Session, tenant_id: int, *, actor: str, expected_version: int | None
) -> None:
    change = Change.load(
        session, repo.TENANTS, tenant_id, state=tenant_state, expected_version=expected_version
    )
    for key in list(change.row.keys):
        delete_row(session, key)
    change.delete(actor=actor)


def create_key(session: Session, tenant_id: int, name: str, *, actor: str) -> tuple[ApiKey, str]:
    tenant = get_tenant(session, tenant_id)
    secret = new_secret(API_KEY_PREFIX)
    key = ApiKey(
        tenant_id=tenant.id, name=name, prefix=secret[:VISIBLE_CHARS], key_hash=hash_secret(secret)
    )
    create_recorded(session, key, entity="api_key", state=_key_state, actor=actor)
    return key, secret


def _key_state(key: ApiKey) -> dict[str, Any]:
    return {"tenant_id": key.tenant_id, "name": key.name, "prefix": key.prefix}


def get_key(session: Session, tenant_id: int, key_id: int) -> ApiKey:
    return found(
        repo.get_key(session, tenant_id, key_id),
        "api_key",
        f"tenant {tenant_id} has no key {key_id}",
    )


def revoke_key(session: Session, tenant_id: int, key_id: int, *, actor: str) -> ApiKey:
    key = get_key(session, tenant_id, key_id)
    if key.revoked_at is not None:
        return key
    key.revoked_at = utcnow()
    session.flush()
    record_change(
        session,
        actor=actor,
        action="api_key.revoke",
        entity_type="api_key",
        entity_id=key.id,
        before={"revoked": False, "prefix": key.prefix},
        after={"revoked": True, "prefix": key.prefix},
    )
    return key


def create_admin_token(
    session: Session, body: AdminTokenCreate, *, principal: Principal
) -> tuple[AdminToken, str]:
    scopes = {s.value for s in body.scopes}
    if Scope.INTERNAL_AGENT in scopes:
        raise InvalidRequest(
            "agent tokens are bound to a pool: mint them with POST /pools/{id}/agent-tokens",
            code="agent_token_needs_enrolment",
            details={"param": "scopes"},
        )
    if Scope.INTERNAL_GATEWAY in scopes and scopes & ADMIN_SCOPES:
        raise InvalidRequest(
            "a gateway token holds internal:gateway only, never admin scopes",
            code="mixed_principal",
            details={"param": "scopes"},
        )
    return _mint(session, body.name, scopes, {}, principal=principal)


def create_agent_token(
    session: Session, pool_id: int, body: AgentTokenCreate, *, principal: Principal
) -> tuple[AdminToken, str]:
    """Enrol an engine agent for one pool: its token may heartbeat only for that pool,
    from the allowed origins, and read only that pool's spec. A caller without
    `internal:agent` is refused before the pool is looked up, so the refusal is the
    same whether the pool exists or not."""
    _check_scopes_held(principal, {Scope.INTERNAL_AGENT.value}, "create")
    pool = get_row(session, Pool, pool_id)
    if pool is None:
        raise Missing("pool", f"pool {pool_id} does not exist")
    enrolment = {
        "pool_id": pool.id,
        "pool_uid": pool.uid,
        "allowed_endpoints": list(body.allowed_endpoints),
    }
    return _mint(session, body.name, {Scope.INTERNAL_AGENT.value}, enrolment, principal=principal)


def _mint(
    session: Session,
    name: str,
    scopes: set[str],
    extra: dict[str, Any],
    *,
    principal: Principal,
) -> tuple[AdminToken, str]:
    actor = principal.actor
    _check_scopes_held(principal, scopes, "create")
    if repo.ADMIN_TOKENS.by_name(session, name) is not None:
        raise NameTaken("admin_token", f"a token named {name!r} exists")
    # NOTE: the visible prefix names the principal, so a leaked token is recognisable.
    if Scope.INTERNAL_AGENT in scopes:
        prefix = AGENT_TOKEN_PREFIX
    elif Scope.INTERNAL_GATEWAY in scopes:
        prefix = GATEWAY_TOKEN_PREFIX
    else:
        prefix = ADMIN_TOKEN_PREFIX
    secret = new_secret(prefix)
    token = AdminToken(
        name=name,
        prefix=secret[:VISIBLE_CHARS],
        token_hash=hash_secret(secret),
        scopes=sorted(scopes),
        extra=extra,
    )
    session.add(token)
    session.flush()
    record_audit(
        session,
        actor=actor,
        action="admin_token.create",
        entity_type="admin_token",
        entity_id=token.id,
        after={"name": token.name, "scopes": token.scopes, "prefix": token.prefix, **extra},
    )
    return token, secret


def get_admin_token(session: Session, token_id: int) -> AdminToken:
    return repo.ADMIN_TOKENS.get_or_raise(session, token_id)


def revoke_admin_token(session: Session, token_id: int, *, principal: Principal) -> AdminToken:
    """Revokes a token whose scopes `principal` holds. A caller that does not hold
    every scope gets one 403 for a token it may not revoke and for a missing id alike
    (naming only its own scopes), so the route tells it nothing it could not do."""
    actor = principal.actor
    token = get_row(session, AdminToken, token_id)
    if not principal.scopes >= ALL_SCOPES and (
        token is None or not set(token.scopes) <= principal.scopes
    ):
        raise ScopeEscalation(
            f"{actor} cannot revoke admin token {token_id}: no token it may revoke "
            "(one holding only scopes it holds) has this id",
            details={"param": "scopes", "held_scopes": sorted(principal.scopes)},
        )
    if token is None:
        raise Missing("admin_token", f"admin token {token_id} does not exist")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.flush()
        record_audit(
            session,
            actor=actor,
            action="admin_token.revoke",
            entity_type="admin_token",
            entity_id=token.id,
            before={"revoked": False},
            after={"revoked": True},
        )
    return token
