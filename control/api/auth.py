"""Admin bearer-token auth with scopes.

The bootstrap token from settings holds both scopes; other admin tokens live in
`admin_tokens`, stored as sha256 with a short visible prefix.
"""

import hashlib
import hmac
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select

from control.api.deps import SessionDep, SettingsDep
from control.errors import Forbidden, Unauthorized
from control.models import AdminToken


class Scope(StrEnum):
    READ = "admin:read"
    WRITE = "admin:write"


ALL_SCOPES = frozenset(Scope)


@dataclass(frozen=True)
class Principal:
    actor: str
    scopes: frozenset[str]


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _bearer(request: Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token", code="missing_token")
    return token.strip()


def authenticate(request: Request, session: SessionDep, settings: SettingsDep) -> Principal:
    token = _bearer(request)
    if hmac.compare_digest(token.encode(), settings.admin_token.get_secret_value().encode()):
        return Principal(actor="admin:bootstrap", scopes=ALL_SCOPES)
    row = session.scalar(
        select(AdminToken).where(
            AdminToken.token_hash == hash_secret(token), AdminToken.revoked_at.is_(None)
        )
    )
    if row is None:
        raise Unauthorized("invalid or revoked admin token")
    return Principal(actor=f"admin:{row.name}", scopes=frozenset(row.scopes))


def _require(scope: Scope) -> object:
    def dependency(
        principal: Annotated[Principal, Depends(authenticate, scope="function")],
    ) -> Principal:
        if scope not in principal.scopes:
            raise Forbidden(
                f"this route needs the {scope.value} scope",
                details={"required_scope": scope.value},
            )
        return principal

    return dependency


Reader = Annotated[Principal, Depends(_require(Scope.READ), scope="function")]
Writer = Annotated[Principal, Depends(_require(Scope.WRITE), scope="function")]
