"""OpenAI-style error body, used by every HTTP boundary (gateway and control)."""

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    message: str
    type: str
    code: str | None = None
    param: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail

    @classmethod
    def of(
        cls, message: str, type_: str, code: str | None = None, param: str | None = None
    ) -> "ErrorBody":
        return cls(error=ErrorDetail(message=message, type=type_, code=code, param=param))


def not_found_message(path: str, detail: str) -> str:
    """A 404's message: `detail`, and where `path` ends in a slash, that no path of the
    API does (both apps refuse a trailing slash rather than redirect: a redirect's
    Location would name the scheme and host this process sees, not the caller's)."""
    if len(path) > 1 and path.endswith("/"):
        return f"{detail}: the API's paths have no trailing slash; use {path.rstrip('/')}"
    return detail
