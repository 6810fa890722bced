"""`Idempotency-Key` on POST.

The stored response is written in the same transaction as the mutation, so a
key is recorded exactly when its effect is. A replay with the same body returns
the stored status and body (header `Idempotent-Replayed: true`) and changes
nothing. The same key with a different method, path or body is 422
`idempotency_key_reused` (the IETF draft's choice: the request, not the server
state, is wrong). Two concurrent first uses collide on the unique (actor, key)
and the loser gets 409.
"""

import hashlib
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from control.api.auth import Principal, Writer
from control.api.deps import SessionDep
from control.errors import InvalidRequest
from control.models import IdempotencyRecord
from control.repository import idempotency_record

REPLAYED_HEADER = "Idempotent-Replayed"
REDACTED = "<redacted: shown once at creation>"


class IdempotentReplay(Exception):
    """Raised before the endpoint runs; the handler renders the stored response.

    The record's values are copied now: the session rolls back (and expires the
    row) before the handler runs.
    """

    def __init__(self, record: IdempotencyRecord) -> None:
        super().__init__(record.key)
        self.status_code = record.status_code
        self.body = record.response_body
        self.headers = {**record.response_headers, REPLAYED_HEADER: "true"}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=self.status_code, headers=self.headers)


class Idempotency:
    """Per-request handle: `remember` stores what the endpoint returns."""

    def __init__(
        self, session: Session, principal: Principal, key: str | None, request_hash: str, path: str
    ) -> None:
        self.session = session
        self.principal = principal
        self.key = key
        self.request_hash = request_hash
        self.path = path

    def remember(
        self,
        body: Any,
        *,
        status_code: int,
        headers: dict[str, str] | None = None,
        redact: frozenset[str] = frozenset(),
    ) -> JSONResponse:
        """Return `body`; with a key, also store it. Fields in `redact` (secrets shown
        once) are stored as a placeholder, so a replay never re-reveals them."""
        encoded = jsonable_encoder(body)
        if self.key is not None:
            stored = (
                {k: (REDACTED if k in redact else v) for k, v in encoded.items()}
                if redact
                else encoded
            )
            self.session.add(
                IdempotencyRecord(
                    actor=self.principal.actor,
                    key=self.key,
                    method="POST",
                    path=self.path,
                    request_hash=self.request_hash,
                    status_code=status_code,
                    response_body=stored,
                    response_headers=headers or {},
                )
            )
            # NOTE: flush now so a concurrent duplicate fails inside the request (409),
            # not at commit after the response is built.
            self.session.flush()
        return JSONResponse(encoded, status_code=status_code, headers=headers)


async def idempotency(
    request: Request,
    session: SessionDep,
    principal: Writer,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description=(
                "Makes the POST safe to retry: a replay returns the stored response "
                "(header Idempotent-Replayed: true) and changes nothing. The same key "
                "with a different path or body is 422 idempotency_key_reused; a "
                "concurrent first use of the same key is 409."
            ),
        ),
    ] = None,
) -> Idempotency:
    body = await request.body()
    digest = hashlib.sha256(b"POST\n" + request.url.path.encode() + b"\n" + body).hexdigest()
    if idempotency_key is not None:
        record = idempotency_record(session, principal.actor, idempotency_key)
        if record is not None:
            if record.request_hash != digest:
                raise InvalidRequest(
                    "this Idempotency-Key was already used with a different request",
                    code="idempotency_key_reused",
                    details={"param": "Idempotency-Key"},
                )
            raise IdempotentReplay(record)
    return Idempotency(session, principal, idempotency_key, digest, request.url.path)


IdempotencyDep = Annotated[Idempotency, Depends(idempotency, scope="function")]
