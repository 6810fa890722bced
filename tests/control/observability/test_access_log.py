"""Access logs: snapshot polls, heartbeats and telemetry at DEBUG, the rest at INFO."""

import logging
import logging.config

import pytest
from uvicorn.config import LOGGING_CONFIG

from control.access_log import uvicorn_log_config


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_routine_requests_log_at_debug_only(level: str, capsys: pytest.CaptureFixture[str]) -> None:
    logging.config.dictConfig(uvicorn_log_config(LOGGING_CONFIG))
    access = logging.getLogger("uvicorn.access")
    access.setLevel(level)
    line = '%s - "%s %s HTTP/%s" %d'
    for method, path, status in (
        ("GET", "/internal/v1/snapshot", 200),
        ("GET", "/internal/v1/snapshot", 304),
        ("POST", "/internal/v1/workers/w-1/heartbeat", 200),
        ("POST", "/internal/v1/telemetry", 200),
        ("POST", "/internal/v1/telemetry", 503),  # a failure stays visible
        ("POST", "/admin/v1/rollouts/1/promote", 200),  # a change stays visible
    ):
        access.info(line, "127.0.0.1:5", method, path, "1.1", status)
    out = capsys.readouterr().out
    assert "/admin/v1/rollouts/1/promote" in out
    assert '/internal/v1/telemetry HTTP/1.1" 503' in out
    routine = (
        'snapshot HTTP/1.1" 200',
        'snapshot HTTP/1.1" 304',
        "heartbeat",
        'telemetry HTTP/1.1" 200',
    )
    if level == "INFO":
        assert not any(r in out for r in routine), out
    else:
        assert all(r in out for r in routine), out
