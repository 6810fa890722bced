"""Quiet access logs: routine machine traffic at DEBUG, everything else as it was.

Every gateway polls the snapshot once a second and every engine agent
heartbeats every few seconds; at INFO their access lines drowned out what a
person wants to see. Successful snapshot polls, heartbeats, telemetry posts and
pool-spec reads are logged at DEBUG (shown with `--log-level debug`); their failures, and every
other request, stay at INFO.
"""

import copy
import logging
from typing import Any

ROUTINE: tuple[tuple[str, str], ...] = (
    ("GET", "/internal/v1/snapshot"),
    ("POST", "/internal/v1/workers/"),
    ("POST", "/internal/v1/telemetry"),
    # `engine up` re-reads its pool spec (desired_workers) every --capacity-poll seconds.
    ("GET", "/internal/v1/pools/"),
)


class RoutineAtDebug(logging.Filter):
    """For uvicorn's access logger, whose records carry
    (client, method, path, http version, status) as args."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 5):
            return True
        _client, method, path, _version, status = args
        routine = any(method == m and str(path).startswith(p) for m, p in ROUTINE)
        if not routine or not isinstance(status, int) or status >= 400:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def uvicorn_log_config(base: dict[str, Any]) -> dict[str, Any]:
    """uvicorn's logging config (`base`) with the filter on its access logger."""
    config = copy.deepcopy(base)
    config.setdefault("filters", {})["routine_at_debug"] = {"()": RoutineAtDebug}
    handler = config["handlers"]["access"]
    handler["filters"] = [*handler.get("filters", []), "routine_at_debug"]
    return config
