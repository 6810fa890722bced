"""Errors of the worker heartbeat service."""

from control.errors import NotFound


class UnknownPool(NotFound):
    code = "unknown_pool"
