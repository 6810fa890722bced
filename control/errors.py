"""Typed control-plane errors. One handler (in control.app) renders them all as
OpenAI-style bodies; each domain subclasses these next to its service."""

from typing import Any


class ControlError(Exception):
    status_code: int = 500
    error_type: str = "internal_error"
    code: str = "internal_error"

    def __init__(
        self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details or {}

    def headers(self) -> dict[str, str]:
        return {}


class NotFound(ControlError):
    status_code = 404
    error_type = "not_found_error"
    code = "not_found"


class Missing(NotFound):
    """404 with code `<entity>_not_found`."""

    def __init__(self, entity: str, message: str) -> None:
        super().__init__(message, code=f"{entity}_not_found")


class Conflict(ControlError):
    status_code = 409
    error_type = "conflict_error"
    code = "conflict"


class PreconditionFailed(ControlError):
    status_code = 412
    error_type = "precondition_failed_error"
    code = "stale_version"


class PreconditionRequired(ControlError):
    status_code = 428
    error_type = "precondition_required_error"
    code = "if_match_required"


class InvalidRequest(ControlError):
    status_code = 422
    error_type = "invalid_request_error"
    code = "invalid_value"


class Unauthorized(ControlError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_token"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class Forbidden(ControlError):
    status_code = 403
    error_type = "permission_error"
    code = "missing_scope"


class DependencyUnavailable(ControlError):
    status_code = 503
    error_type = "dependency_unavailable_error"
    code = "database_unavailable"

    def __init__(self, message: str, *, retry_after_s: int = 5, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


def stale_version(entity: str, entity_id: int, current: int, expected: int) -> PreconditionFailed:
    """The 412 for a compare-and-set that lost: the entity moved past `expected`."""
    return PreconditionFailed(
        f"{entity} {entity_id} is at version {current}, not {expected}",
        details={"current_version": current},
    )
