"""The log line every specroute service writes with `log_format=json`.

Part of the contract because log pipelines (Loki, Elasticsearch, Cloud
Logging) parse it: one JSON object per line with `ts` (RFC 3339, UTC),
`level`, `logger`, `message`, `request_id` when the line belongs to a request,
and for uvicorn's access lines `method`, `path`, `status` and `client`.
Exceptions travel in `exc_info` as one string. No request or response body is
ever logged (docs/security.md).

The request id lives in a context variable: the gateway sets it where it reads
or makes `x-request-id`, control's middleware does the same, and every line
logged while that request is handled carries it.
"""

import copy
import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]

REQUEST_ID: ContextVar[str | None] = ContextVar("specroute_request_id", default=None)

# uvicorn's access records carry (client, method, path, http version, status) as args.
_ACCESS_ARGS = 5


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        args = record.args
        if (
            record.name == "uvicorn.access"
            and isinstance(args, tuple)
            and len(args) == _ACCESS_ARGS
        ):
            client, method, path, _version, status = args
            line |= {"message": "request", "method": method, "path": path, "status": status}
            line["client"] = client
        else:
            line["message"] = record.getMessage()
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            line["request_id"] = request_id
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def uvicorn_json_config(base: dict[str, Any]) -> dict[str, Any]:
    """uvicorn's logging config (`base`) with every handler, the root's too, writing
    JSON lines."""
    config = copy.deepcopy(base)
    config["formatters"] = {
        name: {"()": f"{__name__}.JsonFormatter"} for name in config.get("formatters", {})
    }
    # The services' own loggers (specroute.*) propagate to the root: same handler, same format.
    config["root"] = {"handlers": ["default"], "level": "INFO"}
    return config
