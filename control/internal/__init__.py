"""The internal API (/internal/v1) that gateways and engine agents call; its router
is `control.internal.endpoints.router`, mounted by `control.app`."""
