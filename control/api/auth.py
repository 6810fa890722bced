"""Admin bearer-token auth with scopes.

The bootstrap token from settings holds every scope; other admin tokens live in
`admin_tokens`, stored as sha256 with a short visible prefix. A token can mint
or revoke only tokens whose scopes it holds itself (no privilege escalation).
"""

import hmac
from typing import Annotated

from fastapi import Depends, Request

from control.api.deps import SessionDep, SettingsDep
from control.credentials import ALL_SCOPES, Principal, Scope, active_token
from control.errors import Forbidden, Unauthorized

__all__ = ["Principal", "Reader", "Writer", "authenticate"]


def _bearer(request: Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token", code="missing_token")
    return token.strip()


def authenticate(request: Request, session: SessionDep, settings: SettingsDep) -> Principal:
    token = _bearer(request)
    if hmac.compare_digest(token.encode(), settings.admin_secret().encode()):
        return Principal(actor="admin:bootstrap", scopes=ALL_SCOPES)
    row = active_token(session, token)
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
