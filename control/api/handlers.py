"""The single place errors become HTTP responses. A user mistake is never a 500:
typed ControlErrors carry their status; validation, integrity and connection
errors from the frameworks are translated here."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from control.api.errors import ControlErrorBody, ControlErrorDetail, FieldError
from control.errors import ControlError, DependencyUnavailable
from specwire.errors import not_found_message

log = logging.getLogger(__name__)

_HTTP_TYPES = {
    401: ("authentication_error", "invalid_token"),
    403: ("permission_error", "missing_scope"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    406: ("invalid_request_error", "not_acceptable"),
    415: ("invalid_request_error", "unsupported_media_type"),
}


def render(
    status_code: int,
    message: str,
    type_: str,
    code: str | None,
    *,
    param: str | None = None,
    details: dict[str, Any] | None = None,
    field_errors: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ControlErrorBody(
        error=ControlErrorDetail(
            message=message,
            type=type_,
            code=code,
            param=param,
            details=details or {},
            field_errors=field_errors,
        )
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=status_code, headers=headers)


def render_control_error(exc: ControlError) -> JSONResponse:
    param = exc.details.get("param") if isinstance(exc.details.get("param"), str) else None
    return render(
        exc.status_code,
        exc.message,
        exc.error_type,
        exc.code,
        param=param,
        details=exc.details,
        headers=exc.headers() or None,
    )


def _is_connect_failure(exc: DBAPIError) -> bool:
    # NOTE: OperationalError also covers bad SQL; only a failed connection is an
    # outage. SQLAlchemy flags dropped connections as invalidated.
    if exc.connection_invalidated:
        return True
    text = str(exc.orig).lower()
    return isinstance(exc, OperationalError) and ("connect" in text or "unable to open" in text)


def _is_contention(exc: DBAPIError) -> bool:
    """Lock waits that ran out (SQLite busy timeout, PostgreSQL deadlock or
    serialization failure): transient, so 503 + Retry-After, not a defect."""
    text = str(exc.orig).lower()
    return any(
        marker in text
        for marker in (
            "database is locked",
            "deadlock detected",
            "could not serialize",
            "lock timeout",  # PostgreSQL lock_timeout (SQLSTATE 55P03)
            "statement timeout",  # PostgreSQL statement_timeout (57014)
        )
    )


async def _control_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ControlError)
    return render_control_error(exc)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        FieldError(
            loc=[p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
            msg=str(e.get("msg", "")),
            type=str(e.get("type", "")),
        )
        for e in exc.errors()
    ]
    first = errors[0] if errors else None
    param = ".".join(str(p) for p in first.loc[1:]) if first and len(first.loc) > 1 else None
    message = f"{param or 'request'}: {first.msg}" if first else "invalid request"
    return render(
        422,
        message,
        "invalid_request_error",
        "invalid_value",
        param=param,
        field_errors=errors,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    type_, code = _HTTP_TYPES.get(exc.status_code, ("invalid_request_error", "http_error"))
    message = str(exc.detail)
    if exc.status_code == 404:
        message = not_found_message(request.url.path, message)
    return render(exc.status_code, message, type_, code, headers=dict(exc.headers or {}))


async def _integrity_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, IntegrityError)
    # NOTE: the driver's message can quote values; keep only its first line.
    detail = str(exc.orig).splitlines()[0] if exc.orig is not None else "integrity error"
    return render(409, f"conflicts with existing data: {detail}", "conflict_error", "integrity")


async def _stale_row(_request: Request, exc: Exception) -> JSONResponse:
    # NOTE: a versioned row's UPDATE/DELETE matched no row: a concurrent change won
    # between this request's read and its write (the If-Match check passed first).
    return render(
        412,
        "the resource changed while this request ran; read it again",
        "precondition_failed_error",
        "stale_version",
    )


async def _data_error(_request: Request, exc: Exception) -> JSONResponse:
    # NOTE: a value the column cannot hold (NUL in PostgreSQL text, an integer
    # beyond SQLite's 64 bits) is the caller's mistake, not ours.
    return render(
        422,
        "a value cannot be stored (out of range or invalid bytes)",
        "invalid_request_error",
        "invalid_value",
    )


async def _database_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError)
    return render_database_error(exc)


def render_database_error(exc: DBAPIError) -> JSONResponse:
    """503 for an unreachable or busy database, else a logged 500."""
    if _is_connect_failure(exc):
        return render_control_error(DependencyUnavailable("the control database is unreachable"))
    if _is_contention(exc):
        return render_control_error(
            DependencyUnavailable(
                "the control database is busy", code="database_busy", retry_after_s=1
            )
        )
    log.exception("database error", exc_info=exc)
    return render(500, "internal database error", "internal_error", "internal_error")


async def _replay(_request: Request, exc: Exception) -> JSONResponse:
    from control.api.idempotency import IdempotentReplay

    assert isinstance(exc, IdempotentReplay)
    return exc.response()


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return render(500, "internal error", "internal_error", "internal_error")


def install_error_handlers(app: FastAPI) -> None:
    from control.api.idempotency import IdempotentReplay

    app.add_exception_handler(IdempotentReplay, _replay)
    app.add_exception_handler(ControlError, _control_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(IntegrityError, _integrity_error)
    app.add_exception_handler(StaleDataError, _stale_row)
    app.add_exception_handler(DataError, _data_error)
    app.add_exception_handler(OverflowError, _data_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
