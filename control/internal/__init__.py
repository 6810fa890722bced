"""The internal API (/internal/v1) that gateways and engine agents call."""

from control.internal.endpoints import router

__all__ = ["router"]
