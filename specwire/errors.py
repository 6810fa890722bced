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
