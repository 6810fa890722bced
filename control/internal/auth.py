"""Who is calling the internal API, and what each principal may do there.

- **gateway**: reads the policy snapshot, writes telemetry. Credential: the
  bootstrap `SPECROUTE_INTERNAL_TOKEN`, or an admin-minted token with the
  `internal:gateway` scope (one per gateway fleet, rotated by minting a new one
  and revoking the old).
- **agent** (an engine agent): heartbeats for workers of the one pool it was
  enrolled for, from endpoints its enrolment allows, and reads that pool's spec.
  Credential: a token minted by `POST /admin/v1/pools/{id}/agent-tokens`.

Neither can do the other's job (403), so a stolen agent token cannot read the
tenants' key hashes in the snapshot, and a stolen gateway token cannot register
a worker.
"""

import hmac
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request

from control.api.deps import SessionDep, SettingsDep
from control.credentials import Scope, active_token, enrolled_pool_id
from control.errors import Forbidden, Unauthorized
from control.internal.origins import endpoint_allowed

Role = Literal["gateway", "agent"]


@dataclass(frozen=True)
class InternalPrincipal:
    actor: str
    role: Role
    # Agents: the pool they are enrolled for; None once that pool is gone (whatever
    # pool has its id now).
    pool_id: int | None = None
    allowed_endpoints: tuple[str, ...] = ()  # agents: origins their workers may serve on


def _bearer(request: Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token", code="missing_token")
    return token.strip()


def internal_principal(
    request: Request, session: SessionDep, settings: SettingsDep
) -> InternalPrincipal:
    token = _bearer(request)
    # NOTE: constant-time, so response timing does not reveal a matching prefix.
    if hmac.compare_digest(token.encode(), settings.internal_secret().encode()):
        return InternalPrincipal(actor="gateway:bootstrap", role="gateway")
    row = active_token(session, token)
    if row is None:
        raise Unauthorized("invalid internal token")
    if Scope.INTERNAL_GATEWAY in row.scopes:
        return InternalPrincipal(actor=f"gateway:{row.name}", role="gateway")
    enrolment = row.extra or {}
    if Scope.INTERNAL_AGENT in row.scopes and isinstance(enrolment.get("pool_id"), int):
        return InternalPrincipal(
            actor=f"agent:{row.name}",
            role="agent",
            pool_id=enrolled_pool_id(session, enrolment),
            allowed_endpoints=tuple(enrolment.get("allowed_endpoints") or ()),
        )
    raise Forbidden("this token holds no internal scope", code="not_an_internal_token")


def _requiring(role: Role) -> object:
    def dependency(
        principal: Annotated[InternalPrincipal, Depends(internal_principal, scope="function")],
    ) -> InternalPrincipal:
        if principal.role != role:
            raise Forbidden(
                f"only {'a gateway' if role == 'gateway' else 'an enrolled engine agent'} "
                "may call this route",
                code=f"{role}_only",
                details={"principal": principal.actor},
            )
        return principal

    return dependency


Gateway = Annotated[InternalPrincipal, Depends(_requiring("gateway"), scope="function")]
Agent = Annotated[InternalPrincipal, Depends(_requiring("agent"), scope="function")]


def not_enrolled(principal: InternalPrincipal) -> Forbidden:
    """The one refusal for a pool an agent is not enrolled for.

    NOTE: the same message and body whether the pool exists, never existed, or was
    the agent's own and is gone, so an agent token cannot probe which pools exist.
    """
    return Forbidden(
        f"{principal.actor} is not enrolled for this pool",
        code="pool_not_enrolled",
        details={"param": "pool_id"},
    )


def check_agent_pool(principal: InternalPrincipal, pool_id: int) -> None:
    if principal.pool_id is None or pool_id != principal.pool_id:
        raise not_enrolled(principal)


def check_agent_beat(principal: InternalPrincipal, pool_id: int, endpoint_url: str) -> None:
    """An agent heartbeats only for its enrolled pool, from an allowed endpoint."""
    check_agent_pool(principal, pool_id)
    if not endpoint_allowed(endpoint_url, principal.allowed_endpoints):
        raise Forbidden(
            f"{principal.actor} may not register a worker at this endpoint_url",
            code="endpoint_not_allowed",
            details={"param": "endpoint_url", "allowed": list(principal.allowed_endpoints)},
        )
