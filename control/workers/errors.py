"""Errors of the worker heartbeat service."""

from control.errors import Forbidden, NotFound


class UnknownPool(NotFound):
    code = "unknown_pool"


class WorkerOfAnotherPool(Forbidden):
    code = "worker_of_another_pool"
